package intercept

import (
	"context"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// BenchmarkChainChunk is what the recorder's chain costs one
// agent_message_chunk of a running turn on the relay's goroutine, before and
// after the turn's answer has reached its budget; the relay's own read, scan
// and write are not in it.
func BenchmarkChainChunk(b *testing.B) {
	const chunk = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The relay reads one line and writes the same bytes on."}}}}`
	const prompt = `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_5f3a9c2e81d047b6","prompt":[{"type":"text","text":"go on"}]}}`
	for _, full := range []bool{false, true} {
		name := "collecting"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			r := New(Config{Store: state.NewMemory(), Queue: 1 << 16})
			c := NewChain(nil, r.StageList()...).WithAnswers(r.Ledger(), true)
			env, err := proxy.Scan([]byte(prompt))
			if err != nil {
				b.Fatal(err)
			}
			c.Frame(ctx, &proxy.Frame{Dir: proxy.ClientToAgent, Raw: []byte(prompt), Env: env})
			raw := []byte(chunk)
			env, err = proxy.Scan(raw)
			if err != nil {
				b.Fatal(err)
			}
			f := &proxy.Frame{Dir: proxy.AgentToClient, Raw: raw, Env: env}
			if full {
				for range 1000 {
					c.Frame(ctx, f)
				}
			}
			n := 0
			for b.Loop() {
				if c.Frame(ctx, f).Do != proxy.Pass {
					b.Fatal("chunk not passed")
				}
				if n++; !full && n%200 == 0 {
					// A new turn: keep collecting below the budget.
					r.rec.Text().TakeAnswer("sess_5f3a9c2e81d047b6")
				}
			}
		})
	}
}

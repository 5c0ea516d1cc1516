package record

import (
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// BenchmarkNoticeCheck is what telling a notice's chunk from the answer's
// costs each chunk on the relay's goroutine (mayBeNotice, and noticeChunk
// for what it lets through), and what a notice's chunk costs as a whole
// (the check, its decode and its copy onto the record's queue).
func BenchmarkNoticeCheck(b *testing.B) {
	for _, tt := range []struct{ name, update string }{
		{"text", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The relay reads one line and writes the same bytes on."}}`},
		{"messageId", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The relay reads one line and writes the same bytes on."},"messageId":"msg_01ABCDEFGHIJKLMNOPQRSTUV"}`},
		{"notice", claudeNotice},
	} {
		raw := []byte(updateFrame(tt.update))
		b.Run("check/"+tt.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if mayBeNotice(raw) && noticeChunk(raw) {
					n++
				}
			}
			_ = n
		})
	}
	b.Run("collect/notice", func(b *testing.B) {
		led := ledger.New(func() {})
		r := New(Config{Store: state.NewMemory(), Queue: 1 << 20}, led, life.New(life.NewSignal()))
		raw := []byte(updateFrame(claudeNotice))
		env, err := proxy.Scan(raw)
		if err != nil {
			b.Fatal(err)
		}
		f := &proxy.Frame{Dir: proxy.AgentToClient, Raw: raw, Env: env}
		n := 0
		for b.Loop() {
			r.text.collect(f)
			if n++; n == 1<<19 {
				for range n {
					<-r.events
				}
				n = 0
			}
		}
	})
}

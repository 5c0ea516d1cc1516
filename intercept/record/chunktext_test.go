package record

import (
	"encoding/json"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// TestChunkTextReadsTheText: the text chunkText reads is the text a JSON
// decoder reads, plain or with escapes, and with "}}}}" or a messageId
// after it, as today's agents send.
func TestChunkTextReadsTheText(t *testing.T) {
	for _, text := range []string{``, `plain words`, `a \"quote\"`, `line\nbreak`, `\u00e9t\u00e9`, `back\\slash`, `ends in \\`, `\"`} {
		for _, after := range []string{`}}}}`, `},"messageId":"msg_1"}}}`} {
			raw := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"` + after)
			env, err := proxy.Scan(raw)
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			var want struct {
				Params struct {
					Update struct {
						Content struct{ Text string } `json:"content"`
					} `json:"update"`
				} `json:"params"`
			}
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			got, ok := chunkText(&proxy.Frame{Dir: proxy.AgentToClient, Raw: raw, Env: env})
			if !ok || string(got) != want.Params.Update.Content.Text {
				t.Errorf("chunkText(%s) = %q, %v; want %q", raw, got, ok, want.Params.Update.Content.Text)
			}
		}
	}
}

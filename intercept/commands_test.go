package intercept

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
)

// TestHandoffEcho: the agent's echo of a prompt that carried a handoff
// shows the user's blocks only; an echo without one passes untouched.
func TestHandoffEcho(t *testing.T) {
	handoff := `{"type":"text","text":` + string(wire.String(replay.HandoffTag+"What follows is the earlier conversation")) + `}`
	user := `{"type":"text","text":"what now?"}`
	frame := func(u string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + u + `}}`)
	}
	v := handoffEcho(frame(`{"sessionUpdate":"user_message","messageId":"m1","content":[` + handoff + `,` + user + `]}`))
	if v.Do != proxy.Rewrite || string(wire.Member(v.Line, "params", "update", "content")) != "["+user+"]" {
		t.Errorf("a whole message with the handoff: %v %s, want it rewritten to the user's block", v.Do, v.Line)
	}
	if v := handoffEcho(frame(`{"sessionUpdate":"user_message_chunk","messageId":"m1","content":` + handoff + `}`)); v.Do != proxy.Drop {
		t.Errorf("a chunk that is the handoff: %v, want it dropped", v.Do)
	}
	for _, u := range []string{
		`{"sessionUpdate":"user_message","messageId":"m1","content":[` + user + `]}`,
		`{"sessionUpdate":"user_message_chunk","content":` + user + `}`,
		`{"sessionUpdate":"user_message","messageId":"m1"}`,
	} {
		if v := handoffEcho(frame(u)); v.Do != proxy.Pass {
			t.Errorf("%s: %v, want it passed as it is", u, v.Do)
		}
	}
}

// TestAdvertiseInTheAgentsVersion: the sidecar's advertisement takes the
// shape of the version the agent chose: v1's agentCapabilities with
// loadSession, v2's capabilities with no load, which v2 has not.
func TestAdvertiseInTheAgentsVersion(t *testing.T) {
	for _, tt := range []struct {
		result       string
		meta, absent []string
		proto        int
	}{
		{`{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"},"agentCapabilities":{"loadSession":false}}`,
			[]string{"agentCapabilities", "_meta", "acp-sidecar"}, []string{"capabilities"}, 1},
		{`{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{"delete":{}}}}`,
			[]string{"capabilities", "_meta", "acp-sidecar"}, []string{"agentCapabilities"}, 2},
	} {
		lf := life.New(life.NewSignal())
		c := &commands{life: lf, version: "test", log: slog.New(slog.DiscardHandler)}
		v, err := c.advertise([]byte(`{"jsonrpc":"2.0","id":0,"result":` + tt.result + `}`))
		if err != nil || v.Do != proxy.Rewrite {
			t.Fatalf("advertise(%s) = %v %v", tt.result, v.Do, err)
		}
		res := wire.Member(v.Line, "result")
		if wire.Member(res, tt.meta...) == nil {
			t.Errorf("v%d: no %s in %s", tt.proto, strings.Join(tt.meta, "."), res)
		}
		for _, k := range tt.absent {
			if wire.Member(res, k) != nil {
				t.Errorf("v%d: %s in %s", tt.proto, k, res)
			}
		}
		if got := lf.Caps(); got.Protocol != tt.proto || !got.Delete && tt.proto == 2 {
			t.Errorf("v%d: caps %+v", tt.proto, got)
		}
		if tt.proto == 2 {
			var caps struct {
				Session map[string]json.RawMessage `json:"session"`
			}
			if json.Unmarshal(wire.Member(res, "capabilities"), &caps) != nil || caps.Session["fork"] == nil || caps.Session["loadSession"] != nil {
				t.Errorf("v2 session capabilities %s: want the emulated fork, and no load", wire.Member(res, "capabilities"))
			}
		}
	}
}

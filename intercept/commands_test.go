package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
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

// fakeCommandOps is the commands' CommandOps for their unit tests: it
// notes each call, and reports what the test sets.
type fakeCommandOps struct {
	calls []string
	err   error
}

var _ CommandOps = (*fakeCommandOps)(nil)

func (o *fakeCommandOps) note(format string, args ...any) error {
	o.calls = append(o.calls, fmt.Sprintf(format, args...))
	return o.err
}

func (o *fakeCommandOps) Reset(_ context.Context, sid string) (rebuild.Report, error) {
	return rebuild.Report{SessionID: sid}, o.note("reset %s", sid)
}

func (o *fakeCommandOps) RestoreOriginal(_ context.Context, sid string) (rebuild.Report, error) {
	return rebuild.Report{SessionID: sid}, o.note("restore-original %s", sid)
}

func (o *fakeCommandOps) AcceptConfig(_ context.Context, sid string) error {
	return o.note("accept-config %s", sid)
}

func (o *fakeCommandOps) Rewind(_ context.Context, sid string, n int) (rebuild.RollbackReport, error) {
	return rebuild.RollbackReport{}, o.note("rewind %s %d", sid, n)
}

func (o *fakeCommandOps) Rollback(_ context.Context, sid string, keep int) (rebuild.RollbackReport, error) {
	return rebuild.RollbackReport{}, o.note("rollback %s %d", sid, keep)
}

func (o *fakeCommandOps) Fork(_ context.Context, parent string, at int) (rebuild.Report, error) {
	return rebuild.Report{SessionID: "c2"}, o.note("fork %s %d", parent, at)
}

func (o *fakeCommandOps) Status(_ context.Context, sid string) (map[string]any, error) {
	return map[string]any{"sessionId": sid}, o.note("status %s", sid)
}

func (o *fakeCommandOps) StatusText(_ context.Context, sid string) (string, error) {
	return "acp-sidecar: session " + sid, o.note("sidecar-status %s", sid)
}

// TestCommandsRunOnTheSession: a slash command or a `_sidecar/*` method
// runs its operation on the session it names, off the relay's path, and
// keeps the session busy while it runs, so a prompt after it waits; a
// malformed one is answered without running anything.
func TestCommandsRunOnTheSession(t *testing.T) {
	slash := func(text string) string {
		return `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":` + string(wire.String(text)) + `}]}}`
	}
	ext := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":4,"method":"` + method + `","params":{"sessionId":"s1"` + params + `}}`
	}
	for _, tt := range []struct {
		raw  string
		call string // "" for none
		busy bool   // the session is busy while it runs
	}{
		{slash("/reset"), "reset s1", true},
		{slash("/rewind 2"), "rewind s1 2", true},
		{slash("/rewind two"), "", true},
		{slash("/sidecar-status"), "sidecar-status s1", false},
		{ext(wire.ExtRollback, `,"keepTurns":1`), "rollback s1 1", true},
		{ext(wire.ExtFork, `,"atTurn":2`), "fork s1 2", false},
		{ext(wire.ExtStatus, ``), "status s1", false},
		{ext(wire.ExtRollback, ``), "", false},
	} {
		ops := &fakeCommandOps{}
		led := ledger.New(nil)
		c := NewCommands(ops, led, life.New(life.NewSignal()), "test", wire.V1, slog.New(slog.DiscardHandler))
		f := scanFrame(t, proxy.ClientToAgent, tt.raw)
		if !c.Claims(f.Dir, &f.Env) {
			t.Errorf("%s: not claimed", tt.raw)
			continue
		}
		v, err := c.Intercept(t.Context(), f)
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		var d proxy.Decision
		switch v.Do {
		case proxy.Defer:
			if got := led.IsBusy("s1"); got != tt.busy {
				t.Errorf("%s: busy %v while it runs, want %v", tt.raw, got, tt.busy)
			}
			d = v.Later(t.Context())
		case proxy.Answer:
			d = proxy.Decision{Answer: [][]byte{v.Line}}
		default:
			t.Fatalf("%s: %v, want it answered by the sidecar", tt.raw, v.Do)
		}
		if want := []string{tt.call}; tt.call == "" && len(ops.calls) != 0 || tt.call != "" && !slices.Equal(ops.calls, want) {
			t.Errorf("%s: called %v, want %q", tt.raw, ops.calls, tt.call)
		}
		if n := len(d.Answer); n == 0 || scanFrame(t, proxy.AgentToClient, string(d.Answer[n-1])).Env.Kind != proxy.KindResponse || !strings.Contains(string(d.Answer[n-1]), `"id":4`) {
			t.Errorf("%s: answered %q, want it to end in the answer to id 4", tt.raw, d.Answer)
		}
		// The session stays busy until the relay has placed the answer
		// (Decision.Placed): a prompt that waited must not overtake it.
		if tt.busy && (d.Placed == nil || !led.IsBusy("s1")) {
			t.Errorf("%s: the session is free before the answer has its place", tt.raw)
		}
		if d.Placed != nil {
			d.Placed()
		}
		if led.IsBusy("s1") {
			t.Errorf("%s: the session is still busy after the command's answer was placed", tt.raw)
		}
	}
}

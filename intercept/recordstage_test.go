package intercept

import (
	"context"
	"slices"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// TestRecordHeldFramesMeetTheStagesAfter: a frame the record holds until
// its write lands (here a session/new result, a config change's answer and
// a prompt's answer) goes on through the stages after the record when it
// is let go, as it would have unheld, with the request it answers known
// to them; it is never sent on raw past them.
func TestRecordHeldFramesMeetTheStagesAfter(t *testing.T) {
	ctx := t.Context()
	r := New(Config{Store: state.NewMemory(), Queue: 8})
	r.Start(ctx)
	t.Cleanup(func() { r.Close(context.Background()) })
	var after []string
	c := NewChain(nil, NewRecordStage(r.Recorder()), sawAfter{&after}).WithAnswers(r.Ledger(), true)
	exchange := []struct{ request, answer string }{
		{`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","configOptions":[{"id":"model","name":"Model","category":"model","type":"select","currentValue":"a","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"model","value":"b"}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"configOptions":[{"id":"model","name":"Model","category":"model","type":"select","currentValue":"b","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`},
	}
	held := 0
	for _, x := range exchange {
		c.Frame(ctx, scanFrame(t, proxy.ClientToAgent, x.request))
		after = nil
		v := c.Frame(ctx, scanFrame(t, proxy.AgentToClient, x.answer))
		if v.Do != proxy.Hold {
			if !slices.Equal(after, []string{x.answer}) {
				t.Errorf("unheld, the stage after the record saw %q, want the answer", after)
			}
			continue
		}
		held++
		d := v.Later(ctx)
		if len(d.Forward) == 0 {
			t.Fatalf("the record let go of nothing for %s", x.answer)
		}
		// The record may complete the answer (pickers) and add frames of
		// its own after it (its command list): the answer meets the
		// stages after, the sidecar's own frames do not.
		first, err := proxy.Scan(d.Forward[0])
		if err != nil || first.Kind != proxy.KindResponse || string(first.ID) != string(scanFrame(t, proxy.AgentToClient, x.answer).Env.ID) {
			t.Errorf("the record let go of %q first, want the answer", d.Forward[0])
		}
		if !slices.Equal(after, []string{string(d.Forward[0])}) {
			t.Errorf("held, the stage after the record saw %q, want the answer it let go", after)
		}
	}
	if held == 0 {
		t.Fatal("the record held none of the answers: the test says nothing")
	}
}

package intercept_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"
)

func jsonUnmarshal(b []byte, v any) { json.Unmarshal(b, v) }

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func values(c *state.Config) map[string]string {
	if c == nil {
		return nil
	}
	out := map[string]string{}
	for id, v := range c.Values() {
		var s string
		json.Unmarshal(v, &s)
		out[id] = s
	}
	if c.Mode != nil {
		out["legacy-mode"] = c.Mode.Current
	}
	if c.Model != nil {
		out["legacy-model"] = c.Model.Current
	}
	return out
}

// TestRecordLayersAndTurns is the record's main scenario: the client sets a
// model, a model-dependent effort and a mode, runs three turns and cancels
// one. The original keeps the defaults, live follows the agent, a rejected
// value appears nowhere, and every turn has its status.
func TestRecordLayersAndTurns(t *testing.T) {
	r := newRig(t, intercept.Config{})
	ctx := t.Context()
	c := r.client
	sess, err := c.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	if _, err := c.SetConfigOption(ctx, sid, "model", "deep-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetConfigOption(ctx, sid, "effort", "max"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetConfigOption(ctx, sid, "effort", "nonsense"); err == nil {
		t.Fatal("the fake agent accepted an effort it does not offer")
	}
	if err := c.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, _, err := c.Prompt(ctx, sid, fmt.Sprintf("turn %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The third turn is cancelled while it runs.
	stop := make(chan acp.StopReason, 1)
	go func() {
		reason, _, _ := c.Prompt(ctx, sid, "hang")
		stop <- reason
	}()
	if _, err := c.WaitLine(ctx, func(l []byte) bool { return strings.Contains(string(l), "waiting for session/cancel") }); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if reason := <-stop; reason != acp.StopReasonCancelled {
		t.Fatalf("stop reason %q, want cancelled", reason)
	}

	rec, err := r.store.Session(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	wantOriginal := map[string]string{"model": "smart-2", "effort": "medium", "mode": "code", "verbosity": "normal", "legacy-mode": "code", "legacy-model": "smart-2"}
	if diff := cmp.Diff(wantOriginal, values(rec.Original)); diff != "" {
		t.Errorf("original mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantOriginal, values(rec.Baseline)); diff != "" {
		t.Errorf("baseline mismatch (-want +got):\n%s", diff)
	}
	live := values(rec.Live)
	for k, want := range map[string]string{"model": "deep-3", "effort": "max", "mode": "plan", "legacy-mode": "plan"} {
		if live[k] != want {
			t.Errorf("live %s = %q, want %q (live %v)", k, live[k], want, live)
		}
	}
	var ovs []string
	for _, o := range rec.Overrides {
		ovs = append(ovs, o.OptionID+"="+string(o.Value))
	}
	if diff := cmp.Diff([]string{`model="deep-3"`, `effort="max"`, `mode="plan"`}, ovs); diff != "" {
		t.Errorf("overrides mismatch (-want +got):\n%s", diff)
	}
	turns, err := r.store.Turns(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range turns {
		got = append(got, fmt.Sprintf("%d %s %s %s", tr.Index, tr.Status, tr.StopReason, tr.PromptText))
		if tr.Status == state.TurnCompleted && !strings.Contains(tr.Answer, "model=deep-3 mode=plan effort=max") {
			t.Errorf("turn %d answer %q does not show the agent's config", tr.Index, tr.Answer)
		}
	}
	want := []string{"1 completed end_turn turn 1", "2 completed end_turn turn 2", "3 cancelled cancelled hang"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turns mismatch (-want +got):\n%s", diff)
	}
}

// TestStartupSettings applies --set values before the client sees the
// session: valid ones in planner order, a value the agent does not offer
// never sent, and the client told of the result as the agent would.
func TestStartupSettings(t *testing.T) {
	r := newRig(t, intercept.Config{Settings: []record.Setting{
		{ID: "mode", Value: "ask"}, {ID: "model", Value: "deep-3"}, {ID: "verbosity", Value: "loud"}, {ID: "nosuch", Value: "x"},
	}})
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	// The first prompt shows the agent really runs on the settings.
	_, text, err := r.client.Prompt(ctx, sid, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "model=deep-3 mode=ask") {
		t.Errorf("agent reply %q; want model deep-3 and mode ask", text)
	}
	want := []string{"initialize", "session/new", "session/set_config_option model=deep-3", "session/set_config_option mode=ask", "session/prompt"}
	if diff := cmp.Diff(want, r.calls(t)); diff != "" {
		t.Errorf("agent calls mismatch (-want +got):\n%s", diff)
	}
	// The client saw a config_option_update with the settled values.
	var sawModel bool
	for _, u := range r.client.Updates(sid) {
		if u.Update.ConfigOptionUpdate == nil {
			continue
		}
		for _, o := range u.Update.ConfigOptionUpdate.ConfigOptions {
			if o.Select != nil && o.Select.Id == "model" && o.Select.CurrentValue == "deep-3" {
				sawModel = true
			}
		}
	}
	if !sawModel {
		t.Errorf("the client never saw model deep-3 in a config_option_update")
	}
	rec, err := r.store.Session(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	if v := values(rec.Original); v["model"] != "deep-3" || v["mode"] != "ask" || v["verbosity"] != "normal" {
		t.Errorf("original %v; want the settings applied and verbosity left at its default", v)
	}
	var errs []string
	for _, e := range rec.SetErrors {
		errs = append(errs, e.OptionID+"="+e.Value)
	}
	if diff := cmp.Diff([]string{"verbosity=loud", "nosuch=x"}, errs); diff != "" {
		t.Errorf("set errors mismatch (-want +got):\n%s", diff)
	}
}

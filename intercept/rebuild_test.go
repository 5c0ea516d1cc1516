package intercept_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"
)

// configure puts a session on a non-default model, a model-dependent
// effort and a mode, and returns its id.
func configure(t testing.TB, r *rig) acp.SessionId {
	t.Helper()
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	for _, kv := range [][2]string{{"model", "deep-3"}, {"effort", "max"}} {
		if _, err := r.client.SetConfigOption(ctx, sid, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.client.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	return sid
}

// reply sends a prompt and parses the fake agent's account of what it saw.
func reply(t *testing.T, r *rig, sid acp.SessionId, text string) fakeagent.Reply {
	t.Helper()
	_, out, err := r.client.Prompt(t.Context(), sid, text)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	rep, ok := fakeagent.ParseReply(out)
	if !ok {
		t.Fatalf("no fake-agent reply in %q", out)
	}
	return rep
}

// TestResetFailsClosed: the agent accepted an effort it does not offer
// (real agents do), so the fresh catalog cannot take it. The reset names
// the field, the next prompt is refused and never reaches the agent, and
// /accept-config lets prompts through again.
func TestResetFailsClosed(t *testing.T) {
	r := newRig(t, intercept.Config{}, "-accept-unknown")
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	if _, err := r.client.SetConfigOption(ctx, sid, "effort", "ultra"); err != nil {
		t.Fatal(err)
	}
	_, text, err := r.client.Prompt(ctx, sid, "/reset")
	if err != nil || !strings.Contains(text, "effort") || !strings.Contains(text, "could not be restored") {
		t.Fatalf("/reset answered %q, %v; want the effort field named", text, err)
	}
	prompts := countCalls(r.calls(t), "session/prompt")
	_, _, err = r.client.Prompt(ctx, sid, "are you there?")
	if err == nil || !strings.Contains(err.Error(), "effort") || !strings.Contains(err.Error(), "/accept-config") {
		t.Fatalf("prompt on a blocked session: %v; want a refusal naming effort and the way out", err)
	}
	if n := countCalls(r.calls(t), "session/prompt"); n != prompts {
		t.Errorf("the refused prompt reached the agent")
	}
	// /reset tries again for the config the session had, not for the
	// partial one the failed restore left: the field still fails.
	_, text, err = r.client.Prompt(ctx, sid, "/reset")
	if err != nil || !strings.Contains(text, "effort") || !strings.Contains(text, "could not be restored") {
		t.Fatalf("a second /reset answered %q, %v; want the effort field named again", text, err)
	}
	_, text, err = r.client.Prompt(ctx, sid, "/accept-config")
	if err != nil || !strings.Contains(text, "current config") {
		t.Fatalf("/accept-config answered %q, %v", text, err)
	}
	if got := reply(t, r, sid, "now?"); got.Effort != "medium" {
		t.Errorf("after accept-config the agent runs effort %q, want its default", got.Effort)
	}
}

func countCalls(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

func TestRestoreOriginal(t *testing.T) {
	r := newRig(t, intercept.Config{})
	ctx := t.Context()
	sid := configure(t, r) // three client changes
	_, text, err := r.client.Prompt(ctx, sid, "/restore-original")
	if err != nil || !strings.Contains(text, "restore-original done") {
		t.Fatalf("/restore-original answered %q, %v", text, err)
	}
	got := reply(t, r, sid, "back?")
	if got.Model != "smart-2" || got.Effort != "medium" || got.Mode != "code" {
		t.Errorf("after restore-original the agent has %+v; want the defaults back", got)
	}
	rec, err := r.store.Session(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	var ovs []string
	for _, o := range rec.Overrides[3:] {
		ovs = append(ovs, o.OptionID+"="+string(o.Value))
	}
	want := []string{`model="smart-2"`, `effort="medium"`, `mode="code"`, `verbosity="normal"`}
	if diff := cmp.Diff(want, ovs); diff != "" {
		t.Errorf("overrides written by restore-original (-want +got):\n%s", diff)
	}
}

// TestRestoreOriginalWithoutOriginal: a session recorded before originals
// existed is refused visibly and left as it was.
func TestRestoreOriginalWithoutOriginal(t *testing.T) {
	store := state.NewMemory()
	ctx := context.Background()
	if err := store.PutSession(ctx, &state.Session{ClientID: "fake-sess-1", NativeID: "fake-sess-1"}); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, intercept.Config{Store: store})
	sid := configure(t, r)
	if sid != "fake-sess-1" {
		t.Fatalf("session %q; the test needs the pre-recorded id", sid)
	}
	calls := len(r.calls(t))
	_, text, err := r.client.Prompt(t.Context(), sid, "/restore-original")
	if err != nil || !strings.Contains(text, "no recorded original") {
		t.Fatalf("/restore-original answered %q, %v; want a refusal", text, err)
	}
	if n := len(r.calls(t)); n != calls {
		t.Errorf("the refusal still made %d calls to the agent", n-calls)
	}
	if got := reply(t, r, sid, "same?"); got.Model != "deep-3" || got.Mode != "plan" {
		t.Errorf("config changed: %+v", got)
	}
	rec, _ := store.Session(t.Context(), string(sid))
	if rec.Original != nil {
		t.Errorf("an original was reconstructed: %+v", rec.Original)
	}
}

func TestSidecarSurfaces(t *testing.T) {
	r := newRig(t, intercept.Config{Version: "test"})
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The commands reach the client merged into the agent's list.
	ups, err := r.client.WaitUpdates(ctx, sess.SessionId, func(us []acp.SessionNotification) bool {
		for _, u := range us {
			if c := u.Update.AvailableCommandsUpdate; c != nil && len(c.AvailableCommands) > 0 && c.AvailableCommands[0].Name == "fake-help" {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no merged command list: %v", err)
	}
	var names []string
	for _, u := range ups {
		if c := u.Update.AvailableCommandsUpdate; c != nil && len(c.AvailableCommands) > 0 && c.AvailableCommands[0].Name == "fake-help" {
			for _, cmd := range c.AvailableCommands {
				names = append(names, cmd.Name)
			}
		}
	}
	for _, want := range []string{"fake-help", "reset", "restore-original", "accept-config", "sidecar-status"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("commands %v lack %q", names, want)
		}
	}
	// The initialize result advertises the extension methods.
	var advertised bool
	for _, l := range r.client.Lines() {
		if strings.Contains(string(l), `"agentCapabilities"`) && strings.Contains(string(l), `"acp-sidecar":{"methods":["_sidecar/reset"`) {
			advertised = true
		}
	}
	if !advertised {
		t.Errorf("initialize result does not advertise the _sidecar methods")
	}
	// An unknown _sidecar method is refused.
	if _, err := r.client.CallRaw(ctx, "_sidecar/nope", map[string]any{"sessionId": sess.SessionId}); err == nil {
		t.Errorf("_sidecar/nope was answered")
	}
	// Status works.
	res, err := r.client.CallRaw(ctx, wire.ExtStatus, map[string]any{"sessionId": sess.SessionId})
	if err != nil || !strings.Contains(string(res), `"nativeSessionId"`) {
		t.Errorf("status: %s, %v", res, err)
	}
}

// TestLegacySetModelTranslated: a client's session/set_model to an agent
// that only has the model as a config option is sent as set_config_option,
// and the client gets the set_model answer it asked for.
func TestLegacySetModelTranslated(t *testing.T) {
	r := newRig(t, intercept.Config{}, "-profile", "config-options-only")
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.client.SetModel(ctx, sess.SessionId, "deep-3"); err != nil {
		t.Fatalf("set_model: %v", err)
	}
	if got := reply(t, r, sess.SessionId, "which?"); got.Model != "deep-3" {
		t.Errorf("the agent runs %q, want deep-3", got.Model)
	}
	calls := r.calls(t)
	if !strings.Contains(strings.Join(calls, "\n"), "session/set_config_option model=deep-3") {
		t.Errorf("calls %v lack the translated set_config_option", calls)
	}
	rec, _ := r.store.Session(ctx, string(sess.SessionId))
	if v := values(rec.Live); v["model"] != "deep-3" {
		t.Errorf("live %v", v)
	}
}

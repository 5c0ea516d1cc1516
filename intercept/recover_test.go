package intercept_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"
)

// promptAfterRestart sends a prompt, sending it again while the sidecar
// answers that the agent is being restarted (code -32012); any other
// outcome is returned. The wait is bounded by ctx.
func promptAfterRestart(ctx context.Context, c *acpclient.Client, sid acp.SessionId, text string) (string, error) {
	for {
		_, out, err := c.Prompt(ctx, sid, text)
		if err == nil || acpclient.Code(err) != -32012 || !strings.Contains(err.Error(), "being restarted") {
			return out, err
		}
		select {
		case <-ctx.Done():
			return "", errors.Join(err, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestCrashMidTurnRecovers: the agent dies in the middle of a turn. The
// pending prompt gets a clear error and is recorded as interrupted; the
// next prompt runs in the same client session on a fresh native session,
// with the config restored in planner order and the kept turns handed over.
func TestCrashMidTurnRecovers(t *testing.T) {
	r := newRigWith(t, rigOptions{restart: true}, intercept.Config{})
	ctx := t.Context()
	sid := configure(t, r)
	reply(t, r, sid, "My favourite colour is teal")
	_, _, err := r.client.Prompt(ctx, sid, "crash now")
	if err == nil || !strings.Contains(err.Error(), "agent exited") || !strings.Contains(err.Error(), "send it again") {
		t.Fatalf("the prompt the agent died on got %v; want a clear error", err)
	}
	out, err := promptAfterRestart(ctx, r.client, sid, "echo: What is my favourite colour?")
	if err != nil {
		t.Fatalf("prompt after the crash: %v", err)
	}
	got, ok := fakeagent.ParseReply(out)
	if !ok {
		t.Fatalf("no reply in %q", out)
	}
	if got.Model != "deep-3" || got.Effort != "max" || got.Mode != "plan" || got.Turns != 1 {
		t.Errorf("after the crash the agent has %+v; want deep-3, max, plan in a fresh session", got)
	}
	seen := strings.Join(got.Echo, "\n")
	if !strings.Contains(seen, "teal") || !strings.Contains(seen, "interrupted") {
		t.Errorf("the handoff %q lacks the kept turn or the interrupted one", seen)
	}
	want := []string{"initialize", "session/load", "session/new", "session/set_config_option model=deep-3",
		"session/set_config_option mode=plan", "session/set_config_option effort=max", "session/prompt"}
	// The restarted agent's calls start with the sidecar's initialize.
	if diff := cmp.Diff(want, callsFrom(r.calls(t), "initialize")); diff != "" {
		t.Errorf("agent calls after the crash (-want +got):\n%s", diff)
	}
	turns, err := r.store.Turns(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, tr := range turns {
		statuses = append(statuses, string(tr.Status))
	}
	if strings.Join(statuses, " ") != "completed interrupted completed" {
		t.Errorf("turns %v; want the crashed one interrupted", statuses)
	}
}

// TestLoadEmulatedForAnAgentWithout: a session recorded by an earlier
// sidecar is loaded by a client through a sidecar whose agent cannot load:
// the recorded turns are replayed to the client, the load is answered, and
// the next prompt carries the handoff on the original config.
func TestLoadEmulatedForAnAgentWithout(t *testing.T) {
	store := state.NewMemory()
	first := newRig(t, intercept.Config{Store: store}, "-profile", "no-load", "-id-prefix", "old-")
	sid := configure(t, first)
	reply(t, first, sid, "My favourite colour is teal")
	reply(t, first, sid, "My favourite animal is an otter")

	second := newRig(t, intercept.Config{Store: store}, "-profile", "no-load", "-id-prefix", "new-")
	ctx := t.Context()
	if _, err := second.client.Load(ctx, sid, t.TempDir()); err != nil {
		t.Fatalf("load: %v", err)
	}
	var history []string
	for _, u := range second.client.Updates(sid) {
		if c := u.Update.UserMessageChunk; c != nil && c.Content.Text != nil {
			history = append(history, c.Content.Text.Text)
		}
	}
	if diff := cmp.Diff([]string{"My favourite colour is teal", "My favourite animal is an otter"}, history); diff != "" {
		t.Errorf("replayed user messages (-want +got):\n%s", diff)
	}
	got := reply(t, second, sid, "echo: and now?")
	if got.Model != "deep-3" || got.Mode != "plan" || !strings.Contains(strings.Join(got.Echo, "\n"), "otter") {
		t.Errorf("after the load the agent has %+v; want the recorded config and the handoff", got)
	}
	if !strings.HasPrefix(got.Session, "new-") {
		t.Errorf("native session %q; want one of the new agent's", got.Session)
	}
}

// BenchmarkRecover measures the sidecar's share of a crash recovery: from
// the moment the agent's output ends to the rebuilt session, less what the
// same calls cost when a client makes them directly (the agent's own work).
func BenchmarkRecover(b *testing.B) {
	ctx := context.Background()
	direct := directClient(b)
	r := newRigWith(b, rigOptions{restart: true}, intercept.Config{})
	sid := configure(b, r)
	var base, via time.Duration
	for b.Loop() {
		r.client.Prompt(ctx, sid, "crash now")
		start := <-r.exited
		if _, err := promptAfterRestart(ctx, r.client, sid, "hello"); err != nil {
			b.Fatal(err)
		}
		via += time.Since(start)
		// The same agent work, direct: initialize, load (fails), new, three
		// sets, the prompt.
		t0 := time.Now()
		direct.Initialize(ctx)
		direct.Load(ctx, "nope", "/tmp")
		s, _ := direct.NewSession(ctx, "/tmp")
		for _, kv := range fiveFields[:3] {
			direct.SetConfigOption(ctx, s.SessionId, kv[0], kv[1])
		}
		direct.Prompt(ctx, s.SessionId, "hello")
		base += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(via.Microseconds())/n/1000, "ms-recovery")
	b.ReportMetric(float64(base.Microseconds())/n/1000, "ms-agent-work")
	b.ReportMetric(float64((via-base).Microseconds())/n/1000, "ms-sidecar")
}

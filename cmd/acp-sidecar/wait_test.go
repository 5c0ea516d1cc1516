//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// While the agent restarts, the client waits (DESIGN.md "While the agent's
// side is being rebuilt, the client waits"): a request sent right after the
// agent died is answered by the restarted agent, on the rebuilt session,
// without an error to send it again.

// TestWaitPromptRightAfterKill sends a prompt the moment the killed agent is
// reaped, before the sidecar can have restarted it: the prompt either waits
// for the restart or, when the sidecar had not noticed the death yet, fails
// its write to the dead agent and is kept. Both ways it ends end_turn on the
// recorded config, and the restarted agent gets it exactly once.
func TestWaitPromptRightAfterKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		rungs []string
	}{
		// The load rung is testdata/script/scenario_kill_between.txtar.
		{"resume", []string{"-resume"}, []string{"session/resume"}},
		{"new", []string{"-load-fails"}, []string{"session/load", "session/new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lp := startLadder(t, tc.flags...)
			killAgent(t, lp.peer)
			resp, text, _ := lp.prompt("echo: charlie right after the kill")
			mustSucceed(t, "the prompt sent right after the kill", resp)
			if !strings.Contains(string(resp), `"end_turn"`) {
				t.Errorf("prompt after the kill = %s, want stopReason end_turn", clip(resp))
			}
			checkSecondLife(t, secondLife(t, readCalls(t, lp.calls)), tc.rungs...)
			r, ok := fakeagent.ParseReply(text)
			if !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
				t.Fatalf("reply after the kill = %+v (%v), want model deep-3, mode plan", r, ok)
			}
			if tc.name == "new" && (len(r.Echo) != 2 || !strings.Contains(r.Echo[0], "bravo kept turn")) {
				t.Errorf("the fresh session's prompt = %q, want the kept turns handed over, then the prompt", r.Echo)
			}
		})
	}
}

// gatedAgent wraps the agent command in a shell that, from the agent's
// second life on, waits for a line on a fifo before it starts the agent:
// the test decides when the restart ends, so "while the agent restarts" is
// a state the test holds, not a moment it hopes to hit.
func gatedAgent(t *testing.T) (wrap func([]string) []string, open func()) {
	dir := t.TempDir()
	marker, fifo := filepath.Join(dir, "started"), filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wrap = func(agent []string) []string {
		script := `if [ -f "$1" ]; then read x < "$2"; fi; touch "$1"; shift 2; exec "$@"`
		return append([]string{"sh", "-c", script, "sh", marker, fifo}, agent...)
	}
	open = func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	return wrap, open
}

// TestWaitCancelWhileRestarting: a prompt that waits for the restart is
// taken out of the queue by session/cancel and answered cancelled; the
// agent never gets it. The next prompt waits too, and once the agent is
// back it ends end_turn on the recorded config.
func TestWaitCancelWhileRestarting(t *testing.T) {
	t.Parallel()
	wrap, open := gatedAgent(t)
	lp := startLadderWith(t, nil, wrap)
	killAgent(t, lp.peer)

	lp.nextID++
	cancelled := fmt.Sprint(lp.nextID)
	lp.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"never sent"}]}}`, cancelled, lp.sid))
	lp.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, lp.sid))
	resp := lp.await("the cancelled prompt's answer", func(l []byte) bool { return strings.Contains(string(l), `"id":`+cancelled+`,`) })
	if !strings.Contains(string(resp), `"stopReason":"cancelled"`) {
		t.Fatalf("the waiting prompt after session/cancel = %s, want stopReason cancelled", clip(resp))
	}

	lp.nextID++
	id := fmt.Sprint(lp.nextID)
	lp.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"delta after the restart"}]}}`, id, lp.sid))
	open()
	resp = lp.await("the waiting prompt's answer", func(l []byte) bool { return strings.Contains(string(l), `"id":`+id+`,`) })
	mustSucceed(t, "the prompt that waited for the restart", resp)
	calls := secondLife(t, readCalls(t, lp.calls))
	checkSecondLife(t, calls, "session/load")
	for _, c := range calls {
		if c.Method == "session/prompt" && strings.Contains(string(c.Params), "never sent") {
			t.Errorf("the restarted agent got the cancelled prompt: %s", c.Params)
		}
	}
}

// TestWaitBoundedByHoldTimeout: a request that waits longer than
// --hold-timeout for an agent that does not come back gets an error that
// says what it waited for; it is never left without an answer.
func TestWaitBoundedByHoldTimeout(t *testing.T) {
	t.Parallel()
	wrap, open := gatedAgent(t)
	logFile := filepath.Join(t.TempDir(), "sidecar.log")
	lp := startLadderWith(t, []string{"--hold-timeout", "300ms", "--log-file", logFile}, wrap)
	killAgent(t, lp.peer)
	resp, _, _ := lp.prompt("waits in vain")
	_, code, msg := decodeRPCError(t, resp)
	if code != -32012 || !strings.Contains(msg, "waited 300ms for the agent to restart") {
		t.Errorf("the prompt past --hold-timeout got %d %q, want -32012 saying what it waited for", code, msg)
	}
	// The agent comes back, and the session goes on. The next prompt is
	// sent once the agent is up: sent while it still restarts, it would
	// wait under the same 300 ms, which a loaded machine's restart can
	// take. Once the agent is up, its rebuild is not bounded by the hold.
	open()
	awaitLogged(t, logFile, "the restarted agent is initialized")
	resp, text, _ := lp.prompt("echo: after the wait")
	mustSucceed(t, "the prompt after the agent came back", resp)
	if r, ok := fakeagent.ParseReply(text); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
		t.Errorf("reply after the agent came back = %+v (%v), want deep-3 / plan", r, ok)
	}
	if got := fakeagent.Methods(secondLife(t, readCalls(t, lp.calls))); slices.Contains(got, "session/new") {
		t.Errorf("the restarted agent got %q; the load should have held", got)
	}
}

// awaitLogged waits until the sidecar's log file holds what. A file gives
// no event to wait on, so it is read every few milliseconds; only the
// line ends the wait, within waitBound.
func awaitLogged(t *testing.T, path, what string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), what) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("the sidecar did not log %q within %v:\n%s", what, waitBound, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

//go:build linux

package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// session/close and session/delete from the editor (DESIGN.md "A session's
// whole life"), on an agent that has them and on one that does not.

// summaryOf is the session's row in `sessions --json`, and whether there
// is one.
func summaryOf(t *testing.T, store, sid string) (row sessionJSON, found bool) {
	t.Helper()
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--state-dir", store).Output()
	if err != nil {
		t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	var rows []sessionJSON
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	for _, r := range rows {
		if r.SessionID == sid {
			return r, true
		}
	}
	return sessionJSON{}, false
}

// TestCloseNeverRebuildsAndLoadReopens: a closed session is closed in the
// record, not live; a crash rebuilds nothing for it; the editor's load
// reopens it on its config.
func TestCloseNeverRebuildsAndLoadReopens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		flags      []string
		agentCalls bool // the agent is asked to close
	}{
		// The sidecar's own close is testdata/script/scenario_close_prompt.txtar.
		{"agent closes", []string{"-close"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := t.TempDir()
			lp := startLadderWith(t, []string{"--state-dir", store}, func(a []string) []string { return a }, tc.flags...)
			before := len(readCalls(t, lp.calls))
			_, resp := lp.request("session/close", map[string]any{"sessionId": lp.sid})
			mustSucceed(t, "session/close", resp)
			asked := false
			for _, c := range readCalls(t, lp.calls)[before:] {
				asked = asked || c.Method == "session/close"
			}
			if asked != tc.agentCalls {
				t.Errorf("the agent was asked to close: %v, want %v", asked, tc.agentCalls)
			}
			if row, ok := summaryOf(t, store, lp.sid); !ok || !row.Closed || row.Live {
				t.Errorf("sessions after the close: %+v (found %v), want closed and not live", row, ok)
			}

			killAgent(t, lp.peer)
			lp.barrier() // a request for no session: it waits for the restarted agent
			for _, c := range secondLife(t, readCalls(t, lp.calls)) {
				switch c.Method {
				case "session/load", "session/resume", "session/new", "session/set_config_option", "session/set_mode":
					t.Errorf("after the crash the sidecar sent %s for a closed session", describe(c))
				}
			}

			_, resp = lp.request("session/load", map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
			mustSucceed(t, "session/load of the closed session", resp)
			presp, text, _ := lp.prompt("after the reopen")
			mustSucceed(t, "prompt after the reopen", presp)
			if r, ok := fakeagent.ParseReply(text); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
				t.Errorf("reply after the reopen = %+v (%v), want deep-3 / plan", r, ok)
			}
			if row, ok := summaryOf(t, store, lp.sid); !ok || row.Closed {
				t.Errorf("sessions after the reopen: %+v (found %v), want it open again", row, ok)
			}
		})
	}
}

// TestDeleteForgetsEverywhere: the editor's session/delete leaves nothing of
// the session in the record or on the disk; a fork of it keeps what it
// inherited; deleting a session nobody knows succeeds.
func TestDeleteForgetsEverywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		flags      []string
		agentCalls bool
	}{
		// The agent's own delete is testdata/script/scenario_delete.txtar.
		{"sidecar deletes", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := t.TempDir()
			lp := startLadderWith(t, []string{"--state-dir", store}, func(a []string) []string { return a }, tc.flags...)
			const secret = "zebra-quartz-7351 the prompt that must go"
			resp, _, _ := lp.prompt(secret)
			mustSucceed(t, "the secret prompt", resp)

			// A fork at turn 2 inherits the first two turns, not the secret.
			_, resp = lp.request("_sidecar/fork", map[string]any{"sessionId": lp.sid, "atTurn": 2})
			mustSucceed(t, "_sidecar/fork", resp)
			child := sessionIDFrom(t, resp)

			before := len(readCalls(t, lp.calls))
			_, resp = lp.request("session/delete", map[string]any{"sessionId": lp.sid})
			mustSucceed(t, "session/delete", resp)
			asked := false
			for _, c := range readCalls(t, lp.calls)[before:] {
				asked = asked || c.Method == "session/delete"
			}
			if asked != tc.agentCalls {
				t.Errorf("the agent was asked to delete: %v, want %v", asked, tc.agentCalls)
			}

			if _, ok := summaryOf(t, store, lp.sid); ok {
				t.Error("sessions still lists the deleted session")
			}
			if out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "show", lp.sid, "--state-dir", store).CombinedOutput(); err == nil {
				t.Errorf("show of the deleted session succeeded:\n%s", out)
			}
			if held := filesHolding(t, store, "zebra-quartz-7351"); len(held) > 0 {
				t.Errorf("the deleted prompt is still on disk in %v", held)
			}

			// The fork keeps its inheritance: its record and its handoff.
			var got []string
			for _, tr := range showTurns(t, store, child) {
				got = append(got, tr.Prompt)
			}
			if len(got) != 2 || got[0] != "alpha kept turn" || got[1] != "bravo kept turn" {
				t.Errorf("the fork's turns after its parent's delete = %q, want the two it inherited", got)
			}
			out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "handoff", child, "--state-dir", store).Output()
			if err != nil || !strings.Contains(string(out), "alpha kept turn") {
				t.Errorf("the fork's handoff after its parent's delete (%v):\n%s", err, out)
			}

			_, resp = lp.request("session/delete", map[string]any{"sessionId": "never-was"})
			if tc.agentCalls {
				return // the agent's own answer for a session it never had
			}
			mustSucceed(t, "session/delete of a session nobody knows", resp)
		})
	}
}

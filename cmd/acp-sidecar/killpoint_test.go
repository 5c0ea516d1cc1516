//go:build linux

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// The kill-point matrix (DESIGN.md "While the agent's side is being
// rebuilt, the client waits"): the fake agent dies at a scripted point of a
// rebuild, once (-die-once), and the sidecar must converge. The rebuild
// starts again from the same capture; no prompt runs on a partial config;
// no completed turn is lost; every request gets exactly one answer.
func TestKillPointMatrix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		act   func(t *testing.T, lp *ladderPeer)
	}{
		{"creating the fresh session", []string{"-die-on", "session/new:2"}, resetSurvives},
		{"restoring the model", []string{"-die-on", "session/set_config_option:2"}, resetSurvives},
		{"restoring the mode", []string{"-die-on", "session/set_config_option:3"}, resetSurvives},
		{"running the handoff prompt", []string{"-die-on", "session/prompt:3"}, handoffSurvives},
		{"a native load's replay", []string{"-die-mid-load"}, func(t *testing.T, lp *ladderPeer) { killAgent(t, lp.peer) }},
		{"between two rebuilds", nil, func(t *testing.T, lp *ladderPeer) {
			resp, _, _ := lp.prompt("/rewind")
			mustSucceed(t, "/rewind", resp)
			killAgent(t, lp.peer)
			resetSurvives(t, lp) // sent at once: it waits for the restart and the recovery
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flags := append([]string{"-die-once", filepath.Join(t.TempDir(), "died")}, tc.flags...)
			lp := startLadder(t, flags...)
			tc.act(t, lp)
			resp, text, _ := lp.prompt("echo: after the kill")
			mustSucceed(t, "the prompt after the kill point", resp)
			if !strings.Contains(string(resp), `"end_turn"`) {
				t.Errorf("the prompt after the kill point = %s, want end_turn", clip(resp))
			}
			r, ok := fakeagent.ParseReply(text)
			if !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
				t.Errorf("the prompt after the kill point ran on %+v (%v); the capture is model deep-3, mode plan", r, ok)
			}
			checkAnsweredOnce(t, lp.lines())
			if died := readCalls(t, lp.calls); countLives(died) < 2 {
				t.Errorf("the agent never died at its kill point: one life, calls %q", fakeagent.Methods(died))
			}
			_, st := lp.request("_sidecar/status", map[string]any{"sessionId": lp.sid})
			var status struct {
				Result struct {
					Turns   int `json:"turns"`
					Blocked any `json:"blocked"`
				} `json:"result"`
			}
			if err := json.Unmarshal(st, &status); err != nil || status.Result.Turns < 3 || status.Result.Blocked != nil {
				t.Errorf("status after the kill point %s: want every turn kept (at least 3) and no block", clip(st))
			}
		})
	}
}

// resetSurvives sends /reset; whatever the agent does under it, the answer
// says it is done with the whole capture, and names no failed field.
func resetSurvives(t *testing.T, lp *ladderPeer) {
	t.Helper()
	resp, text, _ := lp.prompt("/reset")
	mustSucceed(t, "/reset", resp)
	if !strings.Contains(text, "reset done") || strings.Contains(text, "could not be restored") ||
		!strings.Contains(text, "mode=plan") || !strings.Contains(text, "model=deep-3") {
		t.Errorf("/reset said %q, want done with model=deep-3 mode=plan and no failed field", text)
	}
}

// handoffSurvives rewinds one turn, then the agent dies on the prompt that
// carries the kept turn: that prompt gets a clear error, and the next one
// carries the kept turn again, without the rewound one.
func handoffSurvives(t *testing.T, lp *ladderPeer) {
	t.Helper()
	resp, _, _ := lp.prompt("/rewind")
	mustSucceed(t, "/rewind", resp)
	resp, _, _ = lp.prompt("echo: dies under the handoff")
	if _, code, msg := decodeRPCError(t, resp); code != -32012 || !strings.Contains(msg, "exited") {
		t.Fatalf("the prompt the agent died under got %d %q, want -32012 saying the agent exited", code, msg)
	}
	resp, text, _ := lp.prompt("echo: after the handoff died")
	mustSucceed(t, "the prompt after the handoff died", resp)
	r, ok := fakeagent.ParseReply(text)
	if !ok || len(r.Echo) != 2 || !strings.Contains(r.Echo[0], "alpha kept turn") || strings.Contains(r.Echo[0], "bravo kept turn") {
		t.Errorf("the prompt after the handoff died got %q, want the kept turn handed over again without the rewound one", r.Echo)
	}
}

// countLives counts the agent's initializes in its call log.
func countLives(calls []fakeagent.Call) int {
	return count(fakeagent.Methods(calls), "initialize")
}

// checkAnsweredOnce fails for a response id the client got twice.
func checkAnsweredOnce(t *testing.T, lines [][]byte) {
	t.Helper()
	if ids := acpclient.AnsweredTwice(lines); len(ids) > 0 {
		t.Errorf("requests answered twice: %v", ids)
	}
}

// TestKillPointDuringSwitch: the agent a session moves to dies on the move's
// session/new. Its supervisor restarts it, and the move starts again on the
// restarted agent from the same record: the switch succeeds, the mode
// carries, and the first prompt there carries the kept turns, once.
func TestKillPointDuringSwitch(t *testing.T) {
	t.Parallel()
	died := filepath.Join(t.TempDir(), "died")
	sp := startSwitchIn(t, t.TempDir(), t.TempDir(), "", "-die-on session/new:1 -die-once "+died)
	_, resp := sp.request("session/set_mode", map[string]any{"sessionId": sp.sid, "modeId": "plan"})
	mustSucceed(t, "set mode", resp)
	sp.mustPrompt("one on a")
	resp = sp.switchTo("b")
	if got := selectorValue(t, resp, "result"); got != "b" {
		t.Fatalf("the switch the target died under answered selector %q, want b: %s", got, clip(resp))
	}
	if n := countLives(readCalls(t, sp.callsB)); n != 2 {
		t.Fatalf("b lived %d times, want 2: it dies on the move's session/new, once", n)
	}
	r := sp.mustPrompt("echo: two on b")
	if r.Mode != "plan" || len(r.Echo) != 2 || !strings.Contains(r.Echo[0], "one on a") {
		t.Errorf("b's first prompt after the move = %+v, want plan and the handoff of a's turn", r)
	}
	checkAnsweredOnce(t, sp.lines())
}

//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// A session's whole life (DESIGN.md): the sidecar's commands after every
// open, forks that keep the real history where the agent forks, and the
// config back after the agent's own load, resume or fork.

// commandsFor reports whether, among lines, a command list for sid names
// the sidecar's /reset, and whether one names the agent's own commands.
func commandsFor(lines [][]byte, sid string) (sidecar, agents bool) {
	for _, l := range lines {
		var m struct {
			Params struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					SessionUpdate     string `json:"sessionUpdate"`
					AvailableCommands []struct {
						Name string `json:"name"`
					} `json:"availableCommands"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &m) != nil || m.Params.SessionID != sid || m.Params.Update.SessionUpdate != "available_commands_update" {
			continue
		}
		for _, c := range m.Params.Update.AvailableCommands {
			switch {
			case c.Name == "reset":
				sidecar = true
			case strings.HasPrefix(c.Name, "fake"):
				agents = true
			}
		}
	}
	return sidecar, agents
}

// TestCommandsAfterEveryOpen: the sidecar's slash commands reach the client
// after a resume, where the agent sends no command list, and after a load,
// where it does (merged with the agent's).
func TestCommandsAfterEveryOpen(t *testing.T) {
	t.Parallel()
	lp := startLadder(t, "-resume")
	for _, method := range []string{"session/resume", "session/load"} {
		from := len(lp.lines())
		_, resp := lp.request(method, map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
		mustSucceed(t, method, resp)
		lp.barrier()
		sidecar, _ := commandsFor(lp.lines()[from:], lp.sid)
		if !sidecar {
			t.Errorf("after %s: no command list with the sidecar's /reset reached the client", method)
		}
	}
}

// TestConfigBackAfterTheAgentsOwnLoad: the fake agent, like claude, codex
// and gemini, goes back to its defaults on its own load and resume. The
// client that loads a session this sidecar holds sees the session's
// config in the result, and its next prompt runs on it. With
// -reopen-drops-legacy the agent's load and resume results also lack the
// legacy modes and models, as codex-acp 2.6.0's resume does: the client
// still sees the session's modes, on the restored mode.
func TestConfigBackAfterTheAgentsOwnLoad(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{{"-resume"}, {"-resume", "-reopen-drops-legacy"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			lp := startLadder(t, flags...)
			checkReopened(t, lp)
		})
	}
}

// TestConfigBackInAFreshSidecar is the editor that comes back: a fresh
// sidecar on the same store resumes and loads the session from the record
// (after session/list, as Emacs agent-shell does). The result carries the
// session's modes on the restored mode, even where the agent's own result
// lacks them, and the sidecar's commands follow.
func TestConfigBackInAFreshSidecar(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{{"-resume"}, {"-resume", "-reopen-drops-legacy"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			store := t.TempDir()
			first := startLadderWith(t, []string{"--state-dir", store}, func(a []string) []string { return a }, flags...)
			if code := first.finish(); code != 0 {
				t.Fatalf("first sidecar exited %d", code)
			}
			second := startLadderWith(t, []string{"--state-dir", store}, func(a []string) []string {
				return replaceState(a, stateOf(first))
			}, flags...)
			_, list := second.request("session/list", map[string]any{})
			if !strings.Contains(string(list), first.sid) {
				t.Fatalf("session/list in the fresh sidecar = %s, want %s in it", clip(list), first.sid)
			}
			second.sid = first.sid
			checkReopened(t, second)
		})
	}
}

// checkReopened resumes and loads lp's session and checks what the client
// sees: the restored config in the result, the sidecar's commands after
// it, and the next prompt on the config.
func checkReopened(t *testing.T, lp *ladderPeer) {
	t.Helper()
	for _, method := range []string{"session/resume", "session/load"} {
		from := len(lp.lines())
		_, resp := lp.request(method, map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
		mustSucceed(t, method, resp)
		lp.barrier()
		if sidecar, _ := commandsFor(lp.lines()[from:], lp.sid); !sidecar {
			t.Errorf("after %s: no command list with the sidecar's /reset reached the client; the client got:\n%s", method, lastLines(lp.lines()[from:], 20))
		}
		var res struct {
			Result struct {
				Modes struct {
					CurrentModeID string `json:"currentModeId"`
				} `json:"modes"`
				ConfigOptions []struct {
					ID           string `json:"id"`
					CurrentValue any    `json:"currentValue"`
				} `json:"configOptions"`
			} `json:"result"`
		}
		if err := json.Unmarshal(resp, &res); err != nil {
			t.Fatal(err)
		}
		if got := res.Result.Modes.CurrentModeID; got != "plan" {
			t.Errorf("%s result: modes.currentModeId %q, want plan (restored)", method, got)
		}
		for _, o := range res.Result.ConfigOptions {
			if o.ID == "model" && o.CurrentValue != fakeagent.ModelDeep {
				t.Errorf("%s result: model %v, want %s (restored)", method, o.CurrentValue, fakeagent.ModelDeep)
			}
		}
		presp, text, _ := lp.prompt("after " + method)
		mustSucceed(t, "prompt after "+method, presp)
		if r, ok := fakeagent.ParseReply(text); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
			t.Errorf("reply after %s = %+v (%v), want deep-3 / plan", method, r, ok)
		}
	}
}

// TestForkKeepsTheRealHistory: a fork of the whole conversation on an agent
// that forks is the agent's own session/fork, and needs no handoff; on an
// agent without fork it is a fresh session, handed the conversation. Both
// run on the parent's config, and the client's session/fork works on both.
func TestForkKeepsTheRealHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flags    []string
		native   bool
		wantCall string
	}{
		{"agent forks", []string{"-fork"}, true, "session/fork"},
		{"sidecar forks", nil, false, "session/new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, how := range []string{"_sidecar/fork", "session/fork"} {
				lp := startLadder(t, tc.flags...)
				before := len(readCalls(t, lp.calls))
				params := map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}}
				if how == "_sidecar/fork" {
					params = map[string]any{"sessionId": lp.sid, "atTurn": 0}
				}
				from := len(lp.lines())
				_, resp := lp.request(how, params)
				mustSucceed(t, how, resp)
				child := sessionIDFrom(t, resp)
				calls := readCalls(t, lp.calls)[before:]
				if len(calls) == 0 || calls[0].Method != tc.wantCall {
					t.Errorf("%s: the agent was asked %v, want %s first", how, describeAll(calls), tc.wantCall)
				}
				if how == "session/fork" {
					lp.barrier()
					if sidecar, _ := commandsFor(lp.lines()[from:], child); !sidecar {
						t.Errorf("%s: no command list with the sidecar's commands for the fork", how)
					}
				}
				parent := lp.sid
				lp.sid = child
				presp, text, _ := lp.prompt("echo: on the fork")
				lp.sid = parent
				mustSucceed(t, "prompt on the fork", presp)
				r, ok := fakeagent.ParseReply(text)
				if !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
					t.Fatalf("%s: reply on the fork = %+v (%v), want deep-3 / plan", how, r, ok)
				}
				handedOver := r.Blocks == 2 && len(r.Echo) == 2 && strings.Contains(r.Echo[0], "bravo kept turn")
				switch {
				case tc.native && (r.Blocks != 1 || r.Turns != 3):
					t.Errorf("%s: the agent's fork got %d blocks on turn %d, want the prompt alone on turn 3 (its own history)", how, r.Blocks, r.Turns)
				case !tc.native && !handedOver:
					t.Errorf("%s: the fresh fork got %q, want the conversation handed over, then the prompt", how, r.Echo)
				}
			}
		})
	}
}

// stateOf is the fake agent's state file of a ladder: its sessions, which a
// second agent on the same file can load and resume.
func stateOf(lp *ladderPeer) string { return filepath.Join(filepath.Dir(lp.calls), "state.json") }

// replaceState points a fake agent's argv at another state file.
func replaceState(argv []string, state string) []string {
	out := slices.Clone(argv)
	for i := range out[:len(out)-1] {
		if out[i] == "-state" {
			out[i+1] = state
		}
	}
	return out
}

// TestWhatTheAgentSaysOfTheSidecarsOwnCalls: the agent's words about a call
// the client did not make stay with the sidecar. A resume note (codex-acp
// 2.6.0: "recorded with model X but is resuming with Y") after a crash
// would be untrue once the config is restored, and a title made from the
// handoff that leads a fresh session's first prompt is not the user's. The
// client's own resume still gets the agent's note.
func TestWhatTheAgentSaysOfTheSidecarsOwnCalls(t *testing.T) {
	t.Parallel()
	lp := startLadder(t, "-resume", "-resume-notes", "-info-updates")
	hasNote := func(lines [][]byte) bool {
		for _, l := range lines {
			if u, ok := parseUpdate(l); ok && strings.Contains(u.text, "resumes on the default model") {
				return true
			}
		}
		return false
	}
	handoffTitle := func(lines [][]byte) bool {
		for _, l := range lines {
			if strings.Contains(string(l), `"session_info_update"`) && strings.Contains(string(l), `"title":"[acp-sidecar]`) {
				return true
			}
		}
		return false
	}

	from := len(lp.lines())
	killAgent(t, lp.peer)
	resp, _, _ := lp.prompt("after the crash")
	mustSucceed(t, "prompt after the crash", resp)
	if hasNote(lp.lines()[from:]) {
		t.Error("the agent's note on the sidecar's own resume reached the client")
	}

	from = len(lp.lines())
	resp, _, _ = lp.prompt("/rewind")
	mustSucceed(t, "/rewind", resp)
	resp, text, _ := lp.prompt("echo: after the rewind")
	mustSucceed(t, "prompt after the rewind", resp)
	r, ok := fakeagent.ParseReply(text)
	if !ok || r.Blocks != 2 {
		t.Fatalf("the prompt after /rewind = %+v (%v), want the handoff ahead of it", r, ok)
	}
	rewound := r.Session // the native session behind the client's now
	lp.barrier()
	if handoffTitle(lp.lines()[from:]) {
		t.Error("the title the agent made from the handoff reached the client")
	}
	if !strings.Contains(string(bytes.Join(lp.lines()[from:], nil)), `"session_info_update"`) {
		t.Error("no session_info_update reached the client at all; the check above proves nothing")
	}

	from = len(lp.lines())
	_, resp = lp.request("session/resume", map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
	mustSucceed(t, "the client's own resume", resp)
	lp.barrier()
	if !hasNote(lp.lines()[from:]) {
		t.Error("the agent's note on the client's own resume did not reach the client")
	}
	// The client's resume went to the native session its id maps to, and
	// the session stays there, on its config.
	resp, text, _ = lp.prompt("after the client's resume")
	mustSucceed(t, "prompt after the client's resume", resp)
	if r, ok := fakeagent.ParseReply(text); !ok || r.Session != rewound || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
		t.Errorf("reply after the client's resume = %+v (%v), want native %s on deep-3 / plan", r, ok, rewound)
	}
}

// TestReopenWhereTheAgentCannot: the sidecar promises resume and load in
// initialize whatever the agent has. A session it holds live is resumed
// (its config) and loaded (its recorded history, then its config) by the
// sidecar when the agent has no resume or no load.
func TestReopenWhereTheAgentCannot(t *testing.T) {
	t.Parallel()
	lp := startLadder(t, "-load=false")
	for _, method := range []string{"session/resume", "session/load"} {
		from := len(lp.lines())
		_, resp := lp.request(method, map[string]any{"sessionId": lp.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
		mustSucceed(t, method+" on an agent without it", resp)
		if !strings.Contains(string(resp), `"currentModeId":"plan"`) {
			t.Errorf("%s result = %s, want the session's mode plan", method, clip(resp))
		}
		lp.barrier()
		if sidecar, _ := commandsFor(lp.lines()[from:], lp.sid); !sidecar {
			t.Errorf("after %s: no command list with the sidecar's commands", method)
		}
		if method == "session/load" {
			replayed := false
			for _, l := range lp.lines()[from:] {
				if u, ok := parseUpdate(l); ok && u.sessionID == lp.sid && u.kind == "user_message_chunk" && strings.Contains(u.text, "alpha kept turn") {
					replayed = true
				}
			}
			if !replayed {
				t.Error("session/load on an agent without it did not replay the recorded history")
			}
		}
	}
	presp, text, _ := lp.prompt("after the reopens")
	mustSucceed(t, "prompt after the reopens", presp)
	if r, ok := fakeagent.ParseReply(text); !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
		t.Errorf("reply = %+v (%v), want deep-3 / plan", r, ok)
	}
}

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// The lifecycle tests run the agents editors install today through the
// sidecar binary, offline against the mock LLM, through everything that
// replaces the native session behind a client session: /reset, /rewind, a
// crash of the agent's whole process tree, and a fresh sidecar loading the
// session from the state dir. After each step the mock's log must show the
// turn on the model and effort the client chose, in the mode it chose, with
// exactly the turns the client kept.

// A liveAgent is an agent package as the lifecycle tests run it: how to
// point it at the mock, and the config the test chooses (by category, as
// DESIGN.md locates options) with how each shows in the LLM request.
type liveAgent struct {
	pkg pkg
	env func(t testing.TB, url string) []string

	model     string // the model-category value to choose
	wireModel string // the model id the LLM is asked for on it
	mode      string // the mode-category value to choose
	// modeSeen reports whether a turn request shows the chosen mode.
	modeSeen func(r mockllm.Request) bool
	effort   string // the thought_level value, which the LLM sees as it is
	// nativeRewind: the agent forks at a message (the sidecar's table of
	// agents it knows), so /rewind is its own fork and hands nothing over.
	nativeRewind bool
	// proto is the ACP version the test's client speaks (0: 1).
	proto int
	// transport: "" on stdio, or "http" or "ws" through serve.
	transport string
}

// overServe is la through `acp-sidecar serve`, with the ACP SDK's own
// transport client (transport "http" or "ws") as the client's wire.
func overServe(la liveAgent, transport string) liveAgent {
	la.transport = transport
	return la
}

// inV2 is la for a client of ACP v2.
func inV2(la liveAgent) liveAgent {
	la.proto = 2
	return la
}

// quietReply is the mock's answer in these tests: it names the model and
// effort the request ran on, for the transcript, and never repeats the
// prompt, so that counting a prompt's text in a later request counts the
// turns that carry it.
func quietReply(r mockllm.Request) string {
	return fmt.Sprintf("mock-llm: model=%s effort=%s messages=%d", r.Model, r.Effort, r.Messages())
}

// start starts the sidecar around the agent against a fresh mock, HOME and
// state dir, opens a session, and chooses model, mode and effort, in the
// order the sidecar restores them, each checked in the agent's answer.
func (la liveAgent) start(t *testing.T) *sidecarSession {
	t.Helper()
	argv := la.pkg.argv(t)
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	s, res := startSessionVia(t, max(la.proto, 1), la.transport, argv, la.env(t, url), mock)
	opts := optionsOf(t, res)
	for _, c := range []struct{ category, value string }{{"model", la.model}, {"mode", la.mode}, {"thought_level", la.effort}} {
		id := optionID(t, opts, c.category)
		opts = s.setOption(id, c.value)
	}
	return s
}

// optionID returns the id of the option of category among opts.
func optionID(t *testing.T, opts []configOption, category string) string {
	t.Helper()
	for _, o := range opts {
		if o.Category == category {
			return o.ID
		}
	}
	t.Fatalf("no option of category %s among %+v", category, opts)
	return ""
}

// checkTurn asserts what the LLM was sent for the turn that prompted text:
// the chosen model, effort and mode; each of kept (text included) exactly
// once in the conversation, natively or in a handoff; none of gone; and the
// handoff header handoffs times. It logs what the mock saw, for NOTES.md.
func (s *sidecarSession) checkTurn(la liveAgent, step, text string, kept, gone []string, handoffs int) {
	s.t.Helper()
	r := s.turnRequest(text)
	texts := r.Texts()
	s.t.Logf("%s: the mock saw model=%s effort=%s messages=%d handoffs=%d; kept %d of %d",
		step, r.Model, r.Effort, r.Messages(), countIn(texts, handoffHeader), countKept(texts, kept), len(kept))
	if r.Model != la.wireModel || r.Effort != la.effort {
		s.t.Errorf("%s: the turn ran on model %q effort %q, want %q and %q", step, r.Model, r.Effort, la.wireModel, la.effort)
	}
	if !la.modeSeen(r) {
		s.t.Errorf("%s: the turn request does not show mode %s", step, la.mode)
	}
	for _, k := range kept {
		if n := countIn(texts, k); n != 1 {
			s.t.Errorf("%s: the kept turn %q is in the conversation %d times, want once", step, k, n)
		}
	}
	for _, g := range gone {
		if n := countIn(texts, g); n != 0 {
			s.t.Errorf("%s: the turn %q, which the client took back or reset away, is in the conversation %d times", step, g, n)
		}
	}
	if n := countIn(texts, handoffHeader); n != handoffs {
		s.t.Errorf("%s: the handoff header is in the conversation %d times, want %d", step, n, handoffs)
	}
	if s.t.Failed() {
		for i, txt := range texts {
			s.t.Logf("%s: text %d: %.400q", step, i, txt)
		}
	}
}

func countKept(texts, kept []string) int {
	n := 0
	for _, k := range kept {
		if countIn(texts, k) > 0 {
			n++
		}
	}
	return n
}

// runLifecycle is the whole life of one session on la, through the sidecar:
//
//	choose model, mode, effort; prompt   the turn runs on them
//	/reset; prompt; prompt              a fresh context, on the same config
//	/rewind; prompt                     the rewound turn is gone, the kept
//	                                    one handed over once
//	kill the agent's tree; prompt       no retry, end_turn, same config and turns
//	a fresh sidecar loads it; prompt    same config and turns
//
// A client of ACP v2 (la.proto) runs the same life in v2's words: options
// set with their type, each turn ended by an idle state_update, and the
// fresh sidecar's open a session/resume with replayFrom.
func runLifecycle(t *testing.T, la liveAgent) {
	const (
		p1 = "My favourite colour is teal."
		p2 = "My favourite animal is the otter."
		p3 = "My favourite number is seven."
		p4 = "Which animal did I name?"
		p5 = "And after the crash?"
		p6 = "And after the reload?"
	)
	s := la.start(t)

	s.prompt(p1)
	s.checkTurn(la, "first turn", p1, []string{p1}, nil, 0)

	if text := agentText(t, s.prompt("/reset")); !strings.Contains(text, "reset done") {
		t.Errorf("/reset answered %q, want it to say the reset is done", text)
	}
	s.prompt(p2)
	// A reset clears the context on purpose (DESIGN.md, "Hand over"): no
	// earlier turn, no handoff.
	s.checkTurn(la, "after /reset", p2, []string{p2}, []string{p1}, 0)
	s.prompt(p3)
	s.checkTurn(la, "the turn after", p3, []string{p2, p3}, []string{p1}, 0)

	if text := agentText(t, s.prompt("/rewind")); !strings.Contains(text, "rewound") || !strings.Contains(text, p3) {
		t.Errorf("/rewind answered %q, want it to say the turn %q was taken back", text, p3)
	}
	s.prompt(p4)
	// Natively, the agent's fork holds the kept turn itself; else a fresh
	// session is handed it once.
	handoffs := 1
	if la.nativeRewind {
		handoffs = 0
	}
	s.checkTurn(la, "after /rewind", p4, []string{p2, p4}, []string{p1, p3}, handoffs)

	killed := killTree(t, stepTimeout, s.agentPid())
	t.Logf("killed the agent's tree: %v", killed)
	sent := s.a.frameCount()
	res, err := s.promptCall(p5) // sent at once, and once: the sidecar hides the crash
	if err != nil {
		t.Fatalf("the prompt sent right after the kill: %v\nstderr:\n%s", err, s.a.stderr.String())
	}
	checkEndTurn(t, p5, res)
	s.checkOnlyItsTurn("the prompt sent right after the kill", s.a.framesSince(sent), p5)
	// Back natively (the agent's resume brings the handed-over turn with
	// it) or handed over again: either way the handoff is there once.
	s.checkTurn(la, "after the kill", p5, []string{p2, p4, p5}, []string{p1, p3}, handoffs)

	st := s.status()
	t.Logf("after the kill: native %s, history %v, live %v", st.NativeSessionID, st.NativeHistory, st.Live)
	checkSessionIDs(t, s.a.framesSince(0), s.sid)
	s.closeClient()

	r := s.reopen(t)
	n := r.a.frameCount()
	r.open()
	t.Logf("the open (v%d) replayed %d frames", r.proto, len(r.a.framesSince(n)))
	r.prompt(p6)
	r.checkTurn(la, "after the load in a fresh sidecar", p6, []string{p2, p4, p5, p6}, []string{p1, p3}, handoffs)
	checkSessionIDs(t, r.a.framesSince(0), r.sid)

	// The sidecar answers its slash commands itself: no agent ever ran one.
	for _, req := range s.mock.TurnRequests() {
		t.Logf("the mock saw %s model=%s effort=%s messages=%d last=%.60q",
			req.Path, req.Model, req.Effort, req.Messages(), req.LastUserText())
		if u := req.UserTexts(); slices.Contains(u, "/reset") || slices.Contains(u, "/rewind") {
			t.Errorf("a slash command reached the LLM: %.300q", u)
		}
	}
}

// checkOnlyItsTurn asserts that what the client got from a prompt's send
// to its turn's end (frames) is that turn and nothing of the rebuild the
// prompt waited through: the agent's answers to the sidecar's own resume,
// load or new stay the sidecar's (DESIGN.md "The sidecar's voice"). In v2
// the turn's states are exactly running, idle, and no idle comes before
// the prompt's acceptance (claude-agent-acp 0.101.0 and codex-acp 2.6.0
// end their resume with an idle). codex-acp 2.6.0 reports running, and
// echoes the prompt as a user_message_chunk, before it answers the prompt:
// that is its turn. No message but the prompt's own echo is the user's: in
// v1, no replay of the sidecar's own load reaches the client.
func (s *sidecarSession) checkOnlyItsTurn(step string, frames []frame, text string) {
	s.t.Helper()
	var states []string
	accepted := false
	for _, f := range frames {
		if f.Method == "" && f.Result != nil && bytes.Contains(f.Result, []byte(`"messageId"`)) {
			accepted = true
			continue
		}
		if f.Method != "session/update" || sessionOf(f) != s.sid {
			continue
		}
		var p struct {
			Update json.RawMessage `json:"update"`
		}
		_ = json.Unmarshal(f.Params, &p) // not an update: no kind
		switch kind := updateKind(p.Update); kind {
		case "state_update":
			if st := stateOf(f); st == "idle" && !accepted {
				s.t.Errorf("%s: the client got an idle state before the prompt's acceptance: %s", step, f.Raw)
			}
			states = append(states, stateOf(f))
		case "user_message_chunk", "user_message":
			if !bytes.Contains(f.Params, []byte(text)) {
				s.t.Errorf("%s: the client got a user message that is not its prompt's (a replay of the rebuild's): %s", step, f.Raw)
			}
		}
	}
	if s.proto >= 2 && !slices.Equal(states, []string{"running", "idle"}) {
		s.t.Errorf("%s: the turn's states were %q, want exactly running, idle", step, states)
	}
}

// commandsBound bounds the wait for the sidecar's command list after a
// resume. It is a hang guard: the list is due with the resume.
const commandsBound = 30 * time.Second

// runCommandsAfterResume: the sidecar's slash commands reach the client
// after session/resume in a fresh sidecar, and after session/list then
// session/resume, the way Emacs agent-shell resumes (DESIGN.md, "A
// session's whole life": its commands reach the client after every session
// the client opens).
func runCommandsAfterResume(t *testing.T, la liveAgent) {
	s := la.start(t)
	s.prompt("A turn to resume.")
	s.closeClient()

	resume := func(r *sidecarSession) {
		r.t.Helper()
		n := r.a.frameCount()
		step(r.t, r.a, "session/resume", map[string]any{"sessionId": r.sid, "cwd": r.cwd, "mcpServers": []any{}})
		r.waitCommands(n)
		r.closeClient()
		r.checkLastCommands()
	}
	t.Run("resume", func(t *testing.T) { resume(s.reopen(t)) })
	t.Run("list then resume", func(t *testing.T) {
		r := s.reopen(t)
		res := step(t, r.a, "session/list", map[string]any{"cwd": r.cwd})
		var list struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal(res.Result, &list); err != nil {
			t.Fatalf("session/list result %s: %v", res.Result, err)
		}
		listed := false
		for _, e := range list.Sessions {
			listed = listed || e.SessionID == r.sid
		}
		if !listed {
			t.Errorf("session/list does not list %s: %s", r.sid, res.Result)
		}
		resume(r)
	})
}

// waitCommands waits, after the first n frames, for an
// available_commands_update for the session that holds the sidecar's
// /reset and /rewind.
func (s *sidecarSession) waitCommands(n int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), commandsBound)
	defer cancel()
	f, err := s.a.waitFrame(ctx, n, func(f frame) bool {
		names := commandNames(f)
		return slices.Contains(names, "reset") && slices.Contains(names, "rewind") && sessionOf(f) == s.sid
	})
	if err != nil {
		var got []string
		for _, f := range s.a.framesSince(n) {
			if isCommandsUpdate(f) {
				got = append(got, fmt.Sprintf("%q", commandNames(f)))
			}
		}
		s.t.Fatalf("no available_commands_update with /reset and /rewind for %s within %v (%v); command lists after the request: %v",
			s.sid, commandsBound, err, got)
	}
	names := commandNames(f)
	own := !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(sidecarCommands, n) })
	s.t.Logf("commands after the resume (the sidecar's own list: %v): %q", own, names)
}

// checkLastCommands asserts that the last available_commands_update the
// client received still holds /reset and /rewind: each update replaces the
// client's list, so a later list without them would take them away.
func (s *sidecarSession) checkLastCommands() {
	s.t.Helper()
	var last []string
	for _, f := range s.a.framesSince(0) {
		if isCommandsUpdate(f) {
			last = commandNames(f)
		}
	}
	if !slices.Contains(last, "reset") || !slices.Contains(last, "rewind") {
		s.t.Errorf("the last command list the client got lacks /reset or /rewind: %q", last)
	}
}

// commandNames returns the command names of an available_commands_update,
// or nil for any other frame.
func commandNames(f frame) []string {
	if !isCommandsUpdate(f) {
		return nil
	}
	var p struct {
		Update struct {
			AvailableCommands []struct {
				Name string `json:"name"`
			} `json:"availableCommands"`
		} `json:"update"`
	}
	if json.Unmarshal(f.Params, &p) != nil {
		return nil
	}
	var names []string
	for _, c := range p.Update.AvailableCommands {
		names = append(names, c.Name)
	}
	return names
}

// sessionOf returns the params.sessionId of a frame, or "".
func sessionOf(f frame) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(f.Params, &p) // no params, no session
	return p.SessionID
}

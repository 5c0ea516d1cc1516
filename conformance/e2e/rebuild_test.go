//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// These tests run real claude-agent-acp through the sidecar against the mock
// LLM and check what DESIGN.md promises when the native session behind a
// client session is replaced: the record (`show --json`), /reset, /rewind
// and an agent crash. What reached the LLM is read from the mock's log: it
// is what the agent really did, whatever either side reported over ACP.

// startClaudeSession starts the sidecar around claude-agent-acp with a fresh
// mock, HOME and state dir, and runs initialize and session/new.
func startClaudeSession(t *testing.T) *sidecarSession {
	t.Helper()
	argv, env, mock := ClaudeAgentMock(t)
	state := t.TempDir()
	a := startSidecarState(t, argv, env, t.TempDir(), state, "--grace", "1s")
	s := &sidecarSession{t: t, a: a, mock: mock, argv: argv, state: state}
	s.sid, _ = openSession(t, a)
	return s
}

// requestSession returns the session id claude puts in each request's
// metadata.user_id: the native session that sent it.
func requestSession(t *testing.T, r mockllm.Request) string {
	t.Helper()
	var body struct {
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("decode messages request body: %v", err)
	}
	// claude-cli 2.1.83 sends a JSON object as a string:
	// {"device_id":…,"account_uuid":…,"session_id":"<uuid>"}.
	var user struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal([]byte(body.Metadata.UserID), &user); err != nil || user.SessionID == "" {
		t.Fatalf("request metadata.user_id %q names no session (%v)", body.Metadata.UserID, err)
	}
	return user.SessionID
}

// planReminder is how plan mode reaches the LLM (NOTES.md): a user text
// block, not the system prompt.
const planReminder = "<system-reminder>\nPlan mode is active."

func hasPlanReminder(r mockllm.Request) bool {
	return slices.ContainsFunc(r.UserTexts(), func(s string) bool { return strings.HasPrefix(s, planReminder) })
}

// TestSidecarRecordShowJSON: the record `show --json` prints after the client
// has gone holds the agent's own option ids and categories, the live values
// the client chose, the defaults as baseline and original, and the turn.
func TestSidecarRecordShowJSON(t *testing.T) {
	s := startClaudeSession(t)
	s.setOption("model", "opus[1m]")
	s.setMode("plan")
	const text = "hello record"
	reply := agentText(t, s.prompt(text))
	s.closeClient()

	rec := s.show()
	if rec.SessionID != s.sid {
		t.Errorf("sessionId %q, want %q", rec.SessionID, s.sid)
	}
	if rec.NativeSessionID == "" || !slices.Equal(rec.NativeHistory, []string{rec.NativeSessionID}) {
		t.Errorf("nativeSessionId %q, nativeHistory %q: want one native session", rec.NativeSessionID, rec.NativeHistory)
	}
	if !slices.Equal(rec.Agent, s.argv) {
		t.Errorf("agent %q, want %q", rec.Agent, s.argv)
	}
	want := map[string]struct{ live, def string }{"model": {"opus[1m]", "default"}, "mode": {"plan", "default"}}
	for name, l := range map[string]*showLayer{"baseline": rec.Baseline, "original": rec.Original, "live": rec.Live} {
		if l == nil {
			t.Errorf("%s layer is null", name)
			continue
		}
		for id, w := range want {
			// claude-agent-acp's option ids are the category names.
			if got := l.Categories[id]; got != id {
				t.Errorf("%s.categories[%s] = %q, want %q", name, id, got, id)
			}
			v := w.def
			if name == "live" {
				v = w.live
			}
			if got := l.value(id); got != v {
				t.Errorf("%s.values[%s] = %s, want %q", name, id, l.Values[id], v)
			}
		}
		if len(l.Values) != 2 {
			t.Errorf("%s.values %v: want exactly model and mode (NOTES.md: no other options)", name, l.Values)
		}
	}
	// claude also speaks the legacy modes API, and the client used it.
	if l := rec.Live; l != nil && l.Mode != "plan" {
		t.Errorf("live legacy mode %q, want plan (set by session/set_mode)", l.Mode)
	}
	changed := map[string]string{}
	for _, c := range rec.Changed {
		if !c.Legacy {
			changed[c.OptionID] = c.Category + ":" + string(c.From) + "->" + string(c.To)
		}
	}
	if want := map[string]string{"model": `model:"default"->"opus[1m]"`, "mode": `mode:"default"->"plan"`}; !equalMaps(changed, want) {
		t.Errorf("changed options %v, want %v", changed, want)
	}
	var overrides []string
	for _, o := range rec.Overrides {
		overrides = append(overrides, o.OptionID+"/"+o.Category+"="+string(o.Value))
	}
	if want := []string{`model/model="opus[1m]"`, `mode/mode="plan"`}; !slices.Equal(overrides, want) {
		t.Errorf("overrides %q, want %q", overrides, want)
	}
	if len(rec.Blocked) != 0 && string(rec.Blocked) != "null" {
		t.Errorf("blocked %s, want null", rec.Blocked)
	}
	if len(rec.Turns) != 1 {
		t.Fatalf("%d turns recorded, want 1", len(rec.Turns))
	}
	tr := rec.Turns[0]
	if tr.Index != 1 || tr.Status != "completed" || tr.StopReason != "end_turn" || tr.Prompt != text || tr.NativeSessionID != rec.NativeSessionID {
		t.Errorf("turn %+v, want index 1, completed, end_turn, prompt %q, native %q", tr, text, rec.NativeSessionID)
	}
	// The answer is what the client was shown: the mock's reply, which
	// names the model the LLM was asked for.
	if tr.Answer != reply || !strings.Contains(tr.Answer, "model=claude-opus-4-6") {
		t.Errorf("turn answer %q, want the client's %q naming claude-opus-4-6", tr.Answer, reply)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSidecarResetKeepsConfig: /reset, answered by the sidecar, gives the
// session a fresh native session (a new claude session id, an empty
// conversation) that still runs opus in plan mode, and the client's session
// id never changes.
func TestSidecarResetKeepsConfig(t *testing.T) {
	s := startClaudeSession(t)
	s.setOption("model", "opus[1m]")
	s.setMode("plan")
	s.prompt("before the reset")
	before := s.status()

	frames := s.prompt("/reset")
	if text := agentText(t, frames); !strings.Contains(text, "reset done") {
		t.Errorf("/reset answered %q, want a message saying the reset is done", text)
	}
	s.prompt("after the reset")

	for _, r := range s.mock.MessageRequests() {
		if strings.Contains(r.LastUserText(), "/reset") {
			t.Errorf("/reset reached the LLM: %q", r.LastUserText())
		}
	}
	pre, post := s.turnRequest("before the reset"), s.turnRequest("after the reset")
	if post.Model != "claude-opus-4-6" {
		t.Errorf("post-reset request asks for %q, want claude-opus-4-6", post.Model)
	}
	if !hasPlanReminder(post) {
		t.Errorf("post-reset request carries no plan-mode reminder; user texts %q", post.UserTexts())
	}
	// A reset clears the context on purpose: no earlier turn, no handoff.
	if n := post.Messages(); n != 1 {
		t.Errorf("post-reset request has %d messages, want 1 (a fresh conversation)", n)
	}
	for _, txt := range post.Texts() {
		if strings.Contains(txt, "before the reset") || strings.Contains(txt, "[acp-sidecar]") {
			t.Errorf("post-reset request carries earlier conversation: %.200q", txt)
		}
	}
	preSess, postSess := requestSession(t, pre), requestSession(t, post)
	t.Logf("claude session markers: before %s, after %s", preSess, postSess)
	if preSess == postSess {
		t.Errorf("the post-reset request came from the same claude session %s", preSess)
	}

	after := s.status()
	if after.SessionID != s.sid || before.SessionID != s.sid {
		t.Errorf("_sidecar/status sessionId %q / %q, want %q", before.SessionID, after.SessionID, s.sid)
	}
	if after.NativeSessionID == before.NativeSessionID || after.NativeSessionID == s.sid {
		t.Errorf("native session %q before and %q after the reset; want a fresh one", before.NativeSessionID, after.NativeSessionID)
	}
	if after.NativeSessionID != postSess || before.NativeSessionID != preSess {
		t.Errorf("native sessions %q → %q, but the LLM saw claude sessions %q → %q", before.NativeSessionID, after.NativeSessionID, preSess, postSess)
	}
	if after.Live["model"] != "opus[1m]" || after.Live["mode"] != "plan" {
		t.Errorf("live config after the reset %v, want model opus[1m], mode plan", after.Live)
	}
	checkSessionIDs(t, s.a.framesSince(0), s.sid)

	rec := s.show() // through the running sidecar's socket
	if want := []string{before.NativeSessionID, after.NativeSessionID}; !slices.Equal(rec.NativeHistory, want) || rec.NativeSessionID != want[1] {
		t.Errorf("record native %q history %q, want %q", rec.NativeSessionID, rec.NativeHistory, want)
	}
	if rec.Live.value("model") != "opus[1m]" || rec.Live.value("mode") != "plan" {
		t.Errorf("record live %v, want model opus[1m], mode plan", rec.Live.Values)
	}
	var turns []string
	for _, tr := range rec.Turns {
		turns = append(turns, tr.Prompt+"@"+tr.NativeSessionID)
	}
	if want := []string{"before the reset@" + before.NativeSessionID, "after the reset@" + after.NativeSessionID}; !slices.Equal(turns, want) {
		t.Errorf("recorded turns %q, want %q", turns, want)
	}
}

// handoffHeader starts the text block a fresh native session gets with the
// kept turns (replay/handoff.go).
const handoffHeader = "[acp-sidecar] What follows is the earlier conversation"

// TestSidecarRewindHandsOverKeptTurns: after /rewind the agent knows the kept
// turn (teal) and not the rewound one (otter), and gets the handoff once.
func TestSidecarRewindHandsOverKeptTurns(t *testing.T) {
	s := startClaudeSession(t)
	const (
		teal  = "My favourite colour is teal"
		otter = "My favourite animal is an otter"
		ask   = "What did I say first?"
		done  = "Thanks"
	)
	s.prompt(teal)
	s.prompt(otter)
	if text := agentText(t, s.prompt("/rewind")); !strings.Contains(text, "rewound") || !strings.Contains(text, otter) {
		t.Errorf("/rewind answered %q, want it to say the otter turn was taken back", text)
	}
	s.prompt(ask)
	s.prompt(done)

	r3, r4 := s.turnRequest(ask), s.turnRequest(done)
	t3 := r3.Texts()
	if !slices.ContainsFunc(t3, func(s string) bool { return strings.Contains(s, teal) }) {
		t.Errorf("turn 3 request lacks the teal turn; texts %q", t3)
	}
	for _, txt := range t3 {
		if strings.Contains(strings.ToLower(txt), "otter") {
			t.Errorf("turn 3 request carries the rewound turn: %.300q", txt)
		}
	}
	if n := countIn(t3, handoffHeader); n != 1 {
		t.Errorf("turn 3 request carries the handoff header %d times, want 1", n)
	}
	t4 := r4.Texts()
	if n := countIn(t4, handoffHeader); n != 1 {
		t.Errorf("turn 4 request carries the handoff header %d times, want 1 (turn 3's history only)", n)
	}
	for _, txt := range t4 {
		if strings.Contains(strings.ToLower(txt), "otter") {
			t.Errorf("turn 4 request carries the rewound turn: %.300q", txt)
		}
	}
	if s3, s4, s1 := requestSession(t, r3), requestSession(t, r4), requestSession(t, s.turnRequest(teal)); s3 != s4 || s3 == s1 {
		t.Errorf("claude sessions: turn 1 %s, turn 3 %s, turn 4 %s; want 3 and 4 in one fresh session", s1, s3, s4)
	}
	checkSessionIDs(t, s.a.framesSince(0), s.sid)

	rec := s.show()
	var turns []string
	for _, tr := range rec.Turns {
		turns = append(turns, tr.Status+":"+tr.Prompt)
	}
	if want := []string{"completed:" + teal, "rolled_back:" + otter, "completed:" + ask, "completed:" + done}; !slices.Equal(turns, want) {
		t.Errorf("recorded turns %q, want %q", turns, want)
	}
	if h := rec.Handoff; h == nil || h.Kept != 1 || h.NativeSessionID != rec.NativeSessionID {
		t.Errorf("record handoff %+v, want 1 kept turn delivered to native session %s", h, rec.NativeSessionID)
	}
}

// countIn counts the occurrences of sub across texts.
func countIn(texts []string, sub string) int {
	n := 0
	for _, s := range texts {
		n += strings.Count(s, sub)
	}
	return n
}

// TestSidecarAgentCrashRecovery: kill -9 claude-agent-acp between turns and
// send the next prompt at once, while the agent restarts: it waits, and
// succeeds on haiku in acceptEdits mode, which the sidecar restored on the
// restarted agent, with no error to send it again (DESIGN.md "While the
// agent's side is being rebuilt, the client waits").
func TestSidecarAgentCrashRecovery(t *testing.T) {
	s := startClaudeSession(t)
	s.setOption("model", "haiku")
	s.setMode("acceptEdits")
	s.prompt("first turn")
	s.prompt("second turn")

	old := s.agentPid()
	t.Logf("killing claude-agent-acp pid %d", old)
	killAndWait(t, stepTimeout, old)
	n := s.a.frameCount()
	const text = "after the crash"
	res, err := s.promptCall(text)
	if err != nil {
		t.Fatalf("prompt sent right after the kill: %v\nstderr:\n%s", err, s.a.stderr.String())
	}
	checkEndTurn(t, text, res)
	since := s.a.framesSince(n)

	r := s.turnRequest(text)
	if r.Model != "claude-haiku-4-5-20251001" {
		t.Errorf("post-crash request asks for %q, want claude-haiku-4-5-20251001", r.Model)
	}
	// The conversation survived: natively (resume, load) or handed over.
	// claude writes its session file behind the turn, so a kill -9 right
	// after a turn can leave that turn out of what its own resume brings
	// back; the sidecar trusts a resume that succeeds (DESIGN.md, "Hand
	// over"). The first turn must be there; the last is logged.
	texts := r.Texts()
	has := func(want string) bool {
		return slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, want) })
	}
	if !has("first turn") {
		t.Errorf("post-crash request lacks the earlier prompt %q; texts %q", "first turn", texts)
	}
	if !has("second turn") {
		t.Logf("claude's own resume came back without the turn before the kill (its session file lags); texts %q", texts)
	}

	// The mode as the client was told it after the crash.
	modeSeen := false
	for _, f := range since {
		var p struct {
			Update json.RawMessage `json:"update"`
		}
		if f.Method != "session/update" || json.Unmarshal(f.Params, &p) != nil {
			continue
		}
		switch updateKind(p.Update) {
		case "config_option_update":
			if v := currentValue(t, p.Update, "mode"); v != "" {
				modeSeen = v == "acceptEdits"
				t.Logf("after the crash: config_option_update mode %s", v)
			}
		case "current_mode_update":
			var u struct {
				CurrentModeID string `json:"currentModeId"`
			}
			json.Unmarshal(p.Update, &u)
			modeSeen = u.CurrentModeID == "acceptEdits"
			t.Logf("after the crash: current_mode_update %s", u.CurrentModeID)
		}
	}
	if !modeSeen {
		t.Errorf("the client was not told mode acceptEdits after the crash")
	}
	st := s.status()
	if st.Live["model"] != "haiku" || st.Live["mode"] != "acceptEdits" {
		t.Errorf("live config after the crash %v, want model haiku, mode acceptEdits", st.Live)
	}
	checkSessionIDs(t, s.a.framesSince(0), s.sid)
	rec := s.show()
	if rec.Live.value("model") != "haiku" || rec.Live.value("mode") != "acceptEdits" {
		t.Errorf("record live %v, want model haiku, mode acceptEdits", rec.Live.Values)
	}
	var turns []string
	for _, tr := range rec.Turns {
		turns = append(turns, tr.Status+":"+tr.Prompt)
	}
	if want := []string{"completed:first turn", "completed:second turn", "completed:" + text}; !slices.Equal(turns, want) {
		t.Errorf("recorded turns %q, want %q", turns, want)
	}
}

// TestSidecarAgentKilledMidTurn: kill -9 claude-agent-acp while its turn
// waits on the LLM. That prompt gets a clear error (the agent had it and may
// have started work, so it is never resent), and the prompt sent right
// after it waits for the restart and ends end_turn on the recorded config.
func TestSidecarAgentKilledMidTurn(t *testing.T) {
	s := startClaudeSession(t)
	s.setOption("model", "haiku")
	s.setMode("acceptEdits")
	s.prompt("first turn")

	stalled := make(chan error, 1)
	go func() {
		_, err := s.promptCall("this turn dies " + mockllm.StallMarker)
		stalled <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	if _, err := s.mock.WaitRequest(ctx, func(r mockllm.Request) bool {
		return strings.Contains(r.LastUserText(), mockllm.StallMarker)
	}); err != nil {
		t.Fatalf("the stalling turn never reached the mock LLM within %v: %v", stepTimeout, err)
	}
	killAndWait(t, stepTimeout, s.agentPid())
	var rerr *rpcError
	if err := <-stalled; !errors.As(err, &rerr) || rerr.Code != -32012 || !strings.Contains(rerr.Message, "exited") {
		t.Fatalf("the prompt the agent died under got %v, want a -32012 error saying the agent exited", err)
	}
	const text = "right after the mid-turn kill"
	res, err := s.promptCall(text)
	if err != nil {
		t.Fatalf("prompt sent right after the mid-turn kill: %v\nstderr:\n%s", err, s.a.stderr.String())
	}
	checkEndTurn(t, text, res)
	if r := s.turnRequest(text); r.Model != "claude-haiku-4-5-20251001" {
		t.Errorf("the prompt after the kill asks for %q, want claude-haiku-4-5-20251001", r.Model)
	}
	if st := s.status(); st.Live["model"] != "haiku" || st.Live["mode"] != "acceptEdits" {
		t.Errorf("live config after the kill %v, want model haiku, mode acceptEdits", st.Live)
	}
}

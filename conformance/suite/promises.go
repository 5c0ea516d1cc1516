package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sidecar's promises beyond record and restore (DESIGN.md "While the
// agent's side is being rebuilt", "A session's whole life", "Data flow"
// 5), each as a check.

// tracedPrompt sends one text block and returns the request's id with the
// stop reason and the agent's text, so that the trace can tell what the
// prompt ran on.
func tracedPrompt(ctx context.Context, c *conn, sid, text string) (id, stop, got string, err error) {
	id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": text}}})
	if err != nil {
		return "", "", "", err
	}
	mark := c.mark()
	stop, err = c.promptLine(ctx, sid, id, line)
	return id, stop, agentText(c.since(mark), sid), err
}

// ranOnWant reads the trace for the config the agent had reported for the
// native session that prompt id reached, and compares it with want.
func ranOnWant(ctx context.Context, ru *run, id string, want *sessionConfig) (string, error) {
	nudgeTrace(ctx, ru.c)
	var native string
	var got *sessionConfig
	var err error
	waitUntil(ctx, 3*time.Second, func() bool {
		var entries []traceEntry
		if entries, err = readTrace(ru.trace); err != nil {
			return false
		}
		native, got, err = ranOn(entries, id)
		return err == nil
	})
	if err != nil {
		return "", err
	}
	if d := diffView(want.view(), got.view()); len(d) > 0 {
		return "", fmt.Errorf("the prompt ran on native session %s with a config other than the recorded one, by the agent's own reports: %s", native, strings.Join(d, "; "))
	}
	return native, nil
}

// heldConfig checks what every recovery promises once a prompt ran: the
// sidecar's live config is want and the session is not blocked, and the
// built-in fake agent's reply line shows want.
func heldConfig(ctx context.Context, c *conn, sid, after, reply string, want *sessionConfig) (status, error) {
	st, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return st, err
	}
	if d := diffView(want.view(), st.Live); len(d) > 0 {
		return st, fmt.Errorf("after %s `_sidecar/status` live differs from the recorded config: %s", after, strings.Join(d, "; "))
	}
	if !isNull(st.Blocked) {
		return st, fmt.Errorf("after %s the session is blocked: %s", after, st.Blocked)
	}
	if ok, d := replyMatches(reply, want); ok && len(d) > 0 {
		return st, fmt.Errorf("after %s the agent ran the prompt on a different config: %s", after, strings.Join(d, "; "))
	}
	return st, nil
}

// ---- reset-kill

// checkResetKill kills the agent while the sidecar restores the config on
// the fresh native session of a /reset: at the first config report the
// client gets after /reset, which comes as the restore goes (or at the
// reset's answer, if that comes first). The prompt sent right after must
// run on the whole recorded config: by the trace, the agent's own reports
// for the native session it reached show every value.
func checkResetKill(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, did, err := changedSession(ctx, r, pr)
	if err != nil {
		return err
	}
	c := ru.c
	want := c.configs.of(sid)
	id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": "/reset"}}})
	if err != nil {
		return err
	}
	mark := c.mark()
	t, err := c.startTurn(sid, id, line)
	if err != nil {
		return err
	}
	// In v2 the /reset is answered at once (its messageId); its end, as
	// v1's answer, is the idle state_update of its turn.
	if _, err := c.await(ctx, mark, "a config report or the end of /reset", func(e envelope) bool {
		var p configUpdate
		return t.ended() || e.Method == "session/update" && json.Unmarshal(e.Params, &p) == nil && p.SessionID == sid &&
			(p.Update.Kind == "config_option_update" || p.Update.Kind == "current_mode_update")
	}); err != nil {
		return err
	}
	when := "at the first config report after /reset"
	if t.ended() {
		when = "after /reset was answered (no config report came first)"
	}
	kids, err := killAgent(ctx, ru)
	if err != nil {
		return err
	}
	_, resetErr := t.wait(ctx)
	pid, stop, text, err := tracedPrompt(ctx, c, sid, "Say OK. (conformance-after-reset-kill)")
	if err != nil {
		return fmt.Errorf("the first prompt after the agent was killed during /reset: %w", err)
	}
	if stop != "end_turn" {
		return fmt.Errorf("the first prompt after the agent was killed during /reset: stopReason %q, want end_turn", stop)
	}
	if _, err := heldConfig(ctx, c, sid, "the kill during /reset", text, want); err != nil {
		return err
	}
	native, err := ranOnWant(ctx, ru, pid, want)
	if err != nil {
		return err
	}
	said := "answered"
	if resetErr != nil {
		said = "answered with an error (" + oneLine(resetErr.Error(), 120) + ")"
	}
	r.note("set %s; killed the agent (pid %v) %s; /reset was %s; the next prompt ended end_turn on native %s with every recorded value (%s)",
		strings.Join(did, " "), kids, when, said, native, formatView(want.view()))
	return nil
}

// ---- reopen-config

// checkReopenConfig opens a session with every option changed, then sends
// the agent's own session/load and session/resume (those it advertises; in
// v2 session/resume with replayFrom and without, both baseline):
// claude-agent-acp, codex-acp and gemini-cli go back to their defaults on
// load (agents.md), and the sidecar puts the config back before the client
// sees the result.
func checkReopenConfig(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, did, err := changedSession(ctx, r, pr)
	if err != nil {
		return err
	}
	c := ru.c
	want := c.configs.of(sid)
	if _, err := promptOK(ctx, c, sid, "Say OK. (conformance-turn-1)"); err != nil {
		return err
	}
	var ways []reopen
	if pr.can.history() {
		ways = append(ways, c.dialect.withHistory())
	}
	if pr.can.session("resume") {
		ways = append(ways, plainResume)
	}
	var names []string
	for _, how := range ways {
		m := how.name
		names = append(names, m)
		if _, err := c.reopen(ctx, how, sid, ru.cwd); err != nil {
			return err
		}
		if d := diffView(want.view(), c.configs.of(sid).view()); len(d) > 0 {
			return fmt.Errorf("after the agent's own %s the config the client sees differs from the recorded one: %s", m, strings.Join(d, "; "))
		}
		id, stop, text, err := tracedPrompt(ctx, c, sid, "Say OK. (after "+m+")")
		if err != nil || stop != "end_turn" {
			return fmt.Errorf("the prompt after %s: stopReason %q, err %v", m, stop, err)
		}
		if _, err := heldConfig(ctx, c, sid, m, text, want); err != nil {
			return err
		}
		if _, err := ranOnWant(ctx, ru, id, want); err != nil {
			return fmt.Errorf("after %s: %w", m, err)
		}
	}
	entries, err := readTrace(ru.trace)
	if err != nil {
		return err
	}
	for _, how := range ways {
		if !agentAnswered(entries, how.method) {
			return fmt.Errorf("the client's %s never reached the agent, which advertises it: the sidecar emulated it instead of using the agent's own", how.name)
		}
	}
	r.note("set %s; after the agent's own %s the client saw, the sidecar kept and the next prompt ran on the same config (%s)",
		strings.Join(did, " "), strings.Join(names, " and "), formatView(want.view()))
	return nil
}

// ---- close

// endSession sends session/NAME for sid, which must answer an object and
// reach the agent exactly when the agent advertises NAME; it notes who did
// it and returns the trace up to the answer.
func (r *checkRun) endSession(ctx context.Context, ru *run, pr probeResult, sid, name, done string) ([]traceEntry, error) {
	res, err := ru.c.call(ctx, "session/"+name, map[string]any{"sessionId": sid})
	if err != nil {
		return nil, err
	}
	if _, err := object("the session/"+name+" result", res); err != nil {
		return nil, err
	}
	nudgeTrace(ctx, ru.c)
	entries, err := readTrace(ru.trace)
	if err != nil {
		return nil, err
	}
	switch forwarded := agentAnswered(entries, "session/"+name); {
	case pr.can.session(name) && !forwarded:
		return nil, fmt.Errorf("the agent advertises session/%s, but the client's %s never reached it", name, name)
	case !pr.can.session(name) && forwarded:
		return nil, fmt.Errorf("the agent does not advertise session/%s, but the sidecar passed the client's %s to it", name, name)
	case forwarded:
		r.note("%s by the agent", done)
	default:
		r.note("%s by the sidecar (the agent has no %s)", done, name)
	}
	return entries, nil
}

// checkClose closes a session, then kills the agent: the sidecar must not
// rebuild the closed session (a prompt on it does not run, and the trace
// shows no open of the sidecar's own), and the client's session/resume
// reopens it from the record with its config.
func checkClose(ctx context.Context, r *checkRun, pr probeResult) error {
	t, err := r.turnedSession(ctx)
	if err != nil {
		return err
	}
	ru, c, sid, want := t.ru, t.c, t.sid, t.want
	entries, err := r.endSession(ctx, ru, pr, sid, "close", "closed")
	if err != nil {
		return err
	}
	if e, _, err := r.listed(ctx, sid); err != nil {
		return err
	} else if closed, ok := e["closed"]; !ok {
		r.note("`sessions --json` has no closed field in this build: not checked")
	} else if isNull(closed) {
		return fmt.Errorf("`sessions --json` shows %s with closed %s after session/close", sid, closed)
	}
	before := len(entries)
	kids, err := killAgent(ctx, ru)
	if err != nil {
		return err
	}
	r.note("killed the agent (pid %v)", kids)
	if stop, _, err := prompt(ctx, c, sid, "Say OK. (conformance-closed)"); err == nil {
		return fmt.Errorf("a prompt on the closed session ran (stopReason %q): the sidecar rebuilt it behind the client's back", stop)
	} else if errCode(err) == 0 {
		return fmt.Errorf("the prompt on the closed session: %w", err)
	} else {
		r.note("a prompt on it got error %d", errCode(err))
	}
	nudgeTrace(ctx, c)
	if entries, err = readTrace(ru.trace); err != nil {
		return err
	}
	if opens := sidecarOpens(entries[min(before, len(entries)):]); len(opens) > 0 {
		return fmt.Errorf("after the agent died the sidecar opened a session on its own for the closed one (%s): a closed session is never rebuilt", strings.Join(opens, ", "))
	}
	if _, err := c.reopen(ctx, plainResume, sid, ru.cwd); err != nil {
		return fmt.Errorf("session/resume of the closed session: %w", err)
	}
	text, err := promptOK(ctx, c, sid, "Say OK. (conformance-reopened)")
	if err != nil {
		return fmt.Errorf("the prompt after reopening the closed session: %w", err)
	}
	if _, err := heldConfig(ctx, c, sid, "reopening the closed session", text, want); err != nil {
		return err
	}
	r.note("nothing rebuilt it; session/resume reopened it from the record with its config (%s)", formatView(want.view()))
	return nil
}

// ---- delete

// unknownSession is a session id no agent or record has.
const unknownSession = "acp-conformance-no-such-session"

// checkDelete deletes a session with a turn: it goes to the agent when the
// agent can delete, else the sidecar answers; either way `show` no longer
// finds it and `sessions` omits it. Deleting a session nobody knows
// succeeds too.
func checkDelete(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return err
	}
	c := ru.c
	if _, err := promptOK(ctx, c, sid, "Say OK. (conformance-turn-1)"); err != nil {
		return err
	}
	if _, err := r.endSession(ctx, ru, pr, sid, "delete", "deleted"); err != nil {
		return err
	}
	// Not found: show fails on it as on a session that never was.
	_, gone := r.cli(ctx, "show", sid, "--json")
	if gone == nil {
		return fmt.Errorf("`acp-sidecar show %s` still finds the deleted session", sid)
	}
	_, never := r.cli(ctx, "show", unknownSession, "--json")
	if never == nil {
		return fmt.Errorf("`acp-sidecar show %s` finds a session nobody made", unknownSession)
	}
	if a, b := strings.ReplaceAll(gone.Error(), sid, "SESSION"), strings.ReplaceAll(never.Error(), unknownSession, "SESSION"); a != b {
		return fmt.Errorf("`acp-sidecar show` of the deleted session fails otherwise than for a session that never was: %q, not %q", a, b)
	}
	if e, n, err := r.listed(ctx, sid); err != nil {
		return err
	} else if e != nil {
		return fmt.Errorf("`acp-sidecar sessions --json` still lists the deleted session (%d listed)", n)
	}
	if _, err := c.call(ctx, "session/delete", map[string]any{"sessionId": unknownSession}); err != nil {
		return fmt.Errorf("session/delete of a session nobody knows: %w", err)
	}
	r.note("`show` finds it no more, `sessions` omits it, and a session nobody knows is deleted too")
	return nil
}

// ---- commands

// checkCommands opens sessions every way a client can through the
// sidecar (new, a fork of it, then resume and load of it once closed) and
// wants the sidecar's
// slash commands in an available_commands_update for the opened session by
// the time the agent answers the next request: the sidecar sends its own
// list right after the open's answer when the agent has sent none, and
// merges them into the agent's list otherwise.
func checkCommands(ctx context.Context, r *checkRun, _ probeResult) error {
	ru, err := r.sidecar(ctx)
	if err != nil {
		return err
	}
	c := ru.c
	if _, err := c.initialize(ctx); err != nil {
		return err
	}
	got := func(what, sid string, mark int) error {
		// A round trip through the agent: what it sent before its answer
		// reaches the client first, the sidecar keeping each peer's
		// order. An answer of the sidecar's own could overtake the agent's
		// list, which the sidecar merges its commands into in stream order.
		if _, err := c.call(ctx, "_acp-conformance/sync", map[string]any{}); err != nil && errCode(err) == 0 {
			return err
		}
		lines := c.since(mark)
		if !slices.ContainsFunc(lines, func(e envelope) bool { return hasSidecarCommands(e, sid) || listsSidecarCommands(e) }) {
			return fmt.Errorf("after %s no available_commands_update for %s carried the sidecar's commands (%s)", what, sid, strings.Join(sidecarCommands, ", "))
		}
		if lost, n := lostCommands(lines, sid); len(lost) > 0 {
			return fmt.Errorf("after %s the client's command list lacks %d of the agent's %d commands (%s): the %s result listed them (availableCommands) and a later available_commands_update, which replaces that list, left them out",
				what, len(lost), n, strings.Join(clipList(lost, 5), ", "), what)
		}
		return nil
	}
	mark := c.mark()
	sid, err := newSession(ctx, c, ru.cwd)
	if err != nil {
		return err
	}
	if err := got("session/new", sid, mark); err != nil {
		return err
	}
	if _, err := promptOK(ctx, c, sid, "Say OK. (conformance-turn-1)"); err != nil {
		return err
	}
	mark = c.mark()
	fork, err := forkSession(ctx, c, sid, ru.cwd)
	if err != nil {
		return err
	}
	if err := got("session/fork", fork, mark); err != nil {
		return err
	}
	// An editor reopens a session it closed (or had open before a
	// restart); it does not resume a session it has open.
	var names []string
	for _, how := range []reopen{plainResume, c.dialect.withHistory()} {
		names = append(names, how.name)
		if _, err := c.call(ctx, "session/close", map[string]any{"sessionId": sid}); err != nil {
			return err
		}
		mark := c.mark()
		if _, err := c.reopen(ctx, how, sid, ru.cwd); err != nil {
			return fmt.Errorf("%s of the closed session: %w", how.name, err)
		}
		if err := got(how.name, sid, mark); err != nil {
			return err
		}
	}
	r.note("the sidecar's commands came after session/new, session/fork, and %s of the closed session", strings.Join(names, " and "))
	return nil
}

// lostCommands are the agent's commands a client no longer has among
// lines, which begin with an open of sid: v2's open results list the
// agent's commands (availableCommands), and each available_commands_update
// replaces the list the client has. The agent's word is the open's result,
// or a later list holding commands other than the sidecar's (the agent's
// own, the sidecar's merged in); the client's list is the last one. It
// returns the commands of the agent's last word missing from the client's
// list, and how many that word had.
func lostCommands(lines []envelope, sid string) ([]string, int) {
	var agent, client []string
	for _, e := range lines {
		if isResponse(e) && e.Result != nil {
			var r struct {
				AvailableCommands []struct {
					Name string `json:"name"`
				} `json:"availableCommands"`
			}
			_ = json.Unmarshal(e.Result, &r) // a result without them lists none
			for _, c := range r.AvailableCommands {
				agent = append(agent, c.Name)
			}
			client = agent
			break
		}
	}
	if len(agent) == 0 {
		return nil, 0
	}
	for _, e := range lines {
		names, ok := commandNames(e, sid)
		if !ok {
			continue
		}
		client = names
		if own := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(sidecarCommands, n) }); len(own) > 0 {
			agent = own
		}
	}
	var lost []string
	for _, n := range agent {
		if !slices.Contains(client, n) {
			lost = append(lost, n)
		}
	}
	return lost, len(agent)
}

// clipList is the first n of ss, and "…" if there are more.
func clipList(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(slices.Clone(ss[:n]), "…")
}

// commandNames are the names an available_commands_update for sid lists;
// false for any other frame.
func commandNames(e envelope, sid string) ([]string, bool) {
	if e.Method != "session/update" {
		return nil, false
	}
	var u struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind     string `json:"sessionUpdate"`
			Commands []struct {
				Name string `json:"name"`
			} `json:"availableCommands"`
		} `json:"update"`
	}
	if json.Unmarshal(e.Params, &u) != nil || u.SessionID != sid || u.Update.Kind != "available_commands_update" {
		return nil, false
	}
	names := []string{}
	for _, c := range u.Update.Commands {
		names = append(names, c.Name)
	}
	return names, true
}

// listsSidecarCommands says whether e is a response whose result lists
// every one of the sidecar's commands: in v2 an open's result lists the
// commands (availableCommands), and the sidecar merges its own into it.
func listsSidecarCommands(e envelope) bool {
	if !isResponse(e) || e.Result == nil {
		return false
	}
	var r struct {
		AvailableCommands []struct {
			Name string `json:"name"`
		} `json:"availableCommands"`
	}
	if json.Unmarshal(e.Result, &r) != nil {
		return false
	}
	var names []string
	for _, c := range r.AvailableCommands {
		names = append(names, c.Name)
	}
	for _, want := range sidecarCommands {
		if !slices.Contains(names, want) {
			return false
		}
	}
	return true
}

func hasSidecarCommands(e envelope, sid string) bool {
	names, ok := commandNames(e, sid)
	if !ok {
		return false
	}
	for _, want := range sidecarCommands {
		if !slices.Contains(names, want) {
			return false
		}
	}
	return true
}

// ---- hostile

// hostileMaxFrame is the --max-frame the hostile check starts the sidecar
// with: small enough to cross cheaply, large enough for 100 000 levels of
// nesting to be judged on depth (as intercept/hostile_test.go has it).
const hostileMaxFrame = 1 << 20

// hostileMark is in every hostile frame, so the trace shows whether one
// went on to the agent.
const hostileMark = "acp-conformance-hostile"

// hostileFrames are the lines the hostile check sends, each with the id
// its error must carry ("null" for a line whose id cannot be read).
func hostileFrames(sid string) []struct{ what, id, line string } {
	q := strconv.Quote(sid)
	promptLine := func(id, text, extra string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":` + q +
			`,"prompt":[{"type":"text","text":"` + text + `"}]` + extra + `}}`
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	return []struct{ what, id, line string }{
		{"a line that is not JSON", "null", hostileMark + "-1: not JSON {"},
		{"invalid UTF-8 with a readable id", `"hostile-2"`, promptLine(`"hostile-2"`, hostileMark+"-2 \xff\xfe", "")},
		{"100 000 levels of nesting", `"hostile-3"`, promptLine(`"hostile-3"`, hostileMark+"-3", `,"_meta":{"x":`+deep+`}`)},
		{"a frame over --max-frame", `"hostile-4"`, promptLine(`"hostile-4"`, hostileMark+"-4 "+strings.Repeat("x", hostileMaxFrame+hostileMaxFrame/2), "")},
	}
}

// checkHostile sends each hostile frame to the sidecar: each must get an
// error carrying its id, none may reach the agent, and the session must
// take a prompt afterwards.
func checkHostile(ctx context.Context, r *checkRun, _ probeResult) error {
	ru, sid, err := r.openSidecar(ctx, "--max-frame", strconv.Itoa(hostileMaxFrame))
	if err != nil {
		return err
	}
	c := ru.c
	var codes []string
	for _, h := range hostileFrames(sid) {
		mark := c.mark()
		if err := c.write([]byte(h.line)); err != nil {
			return fmt.Errorf("send %s: %w", h.what, err)
		}
		e, err := c.await(ctx, mark, "answer to "+h.what, isResponse)
		if err != nil {
			return err
		}
		if e.Error == nil {
			return fmt.Errorf("%s was answered with a result: %s", h.what, oneLine(string(e.Result), 200))
		}
		if got := orNull(e.ID); got != h.id {
			return fmt.Errorf("%s was answered error %d with id %s, want id %s", h.what, e.Error.Code, got, h.id)
		}
		codes = append(codes, fmt.Sprintf("%s: %d", h.what, e.Error.Code))
	}
	if _, err := promptOK(ctx, c, sid, "Say OK. (after the hostile frames)"); err != nil {
		return fmt.Errorf("the session after the hostile frames: %w", err)
	}
	nudgeTrace(ctx, c)
	entries, err := readTrace(ru.trace)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Dir == "client->agent" && strings.Contains(string(e.Frame), hostileMark) {
			return fmt.Errorf("a hostile frame went on to the agent: %s", oneLine(string(e.Frame), 200))
		}
	}
	for _, id := range []string{`"hostile-1"`, `"hostile-2"`, `"hostile-3"`, `"hostile-4"`} {
		if agentAnsweredID(entries, id) {
			return fmt.Errorf("the agent answered %s: it saw a hostile frame", id)
		}
	}
	r.note("each got an error with its id (%s); none reached the agent; the session took the next prompt", strings.Join(codes, ", "))
	return nil
}

func orNull(id json.RawMessage) string {
	if len(id) == 0 {
		return "null"
	}
	return string(id)
}

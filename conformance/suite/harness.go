package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// closeTimeout is how long a peer gets to exit after its stdin is closed
// before its process group is killed. Agents that ignore EOF (claude,
// codex) would otherwise cost the sidecar's whole --grace each time.
const closeTimeout = 2 * time.Second

// skipError makes a check's verdict skip, with the reason.
type skipError struct{ reason string }

func (s skipError) Error() string { return s.reason }

func skipf(format string, args ...any) error { return skipError{fmt.Sprintf(format, args...)} }

// run is one started peer of a check: the agent directly or the sidecar in
// front of it, in its own world.
type run struct {
	name  string
	c     *conn
	cwd   string // the world's cwd: the peer's working dir and every session's
	world *world
	trace string // the sidecar's --trace file, "" for a direct run
	errs  *acpclient.Buffer
}

// checkRun is the context of one check: its own directory and sidecar state
// dir, and every peer it started.
type checkRun struct {
	cfg   *config
	id    string
	dir   string
	state string
	runs  []*run
	notes []string
	sides *Sides // set by the checks run both ways
	// transcript is the file name in cfg.transcripts of the transcript a
	// check that started nothing wrote itself (schema); "" for none.
	transcript string
}

func (r *checkRun) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// runName is the next name for a run of kind ("direct", "sidecar"):
// "direct", "direct-2", …; "sidecar-1", "sidecar-2", ….
func (r *checkRun) runName(kind string) string {
	n := 1
	for _, ru := range r.runs {
		if ru.name == kind || strings.HasPrefix(ru.name, kind+"-") {
			n++
		}
	}
	if kind == "direct" && n == 1 {
		return kind
	}
	return fmt.Sprintf("%s-%d", kind, n)
}

// start starts argv in w, or in a fresh world of its own when w is nil.
func (r *checkRun) start(ctx context.Context, name string, argv []string, trace string, w *world) (*run, error) {
	if w == nil {
		var err error
		if w, err = newWorld(r.cfg, filepath.Join(r.dir, name)); err != nil {
			return nil, err
		}
	}
	// The end of a peer's stderr says why it failed; 64 KiB holds a Go
	// peer's goroutine dump whole (hangReport).
	errs := &acpclient.Buffer{Max: 64 << 10}
	rc, err := acpclient.StartRaw(ctx, argv, acpclient.Options{
		Stderr: errs, Env: w.env, Dir: w.cwd, CloseTimeout: closeTimeout,
	})
	if err != nil {
		return nil, err
	}
	ru := &run{name: name, c: newConn(name, r.cfg.protocol, rc, errs), cwd: w.cwd, world: w, trace: trace, errs: errs}
	r.runs = append(r.runs, ru)
	return ru, nil
}

// direct starts the agent with no sidecar.
func (r *checkRun) direct(ctx context.Context) (*run, error) {
	return r.start(ctx, r.runName("direct"), r.cfg.agent, "", nil)
}

// sidecar starts `exe --state-dir … --trace … [flags] -- AGENT…` on the
// check's state dir, in a fresh world.
func (r *checkRun) sidecar(ctx context.Context, flags ...string) (*run, error) {
	return r.sidecarIn(ctx, nil, flags...)
}

// sidecarIn starts a sidecar in w (nil: a fresh world). A check that
// restarts the sidecar passes the first one's world: the same user
// restarting the editor, whose agent keeps its home and cwd. Under
// --protocol 2 the sidecar gets --max-protocol 2, which lets a v2 client
// speak v2 with the agent (docs/v2.md).
func (r *checkRun) sidecarIn(ctx context.Context, w *world, flags ...string) (*run, error) {
	name := r.runName("sidecar")
	trace := filepath.Join(r.dir, name+".trace.jsonl")
	argv := append([]string{r.cfg.exe}, r.cfg.sidecarArgs...)
	argv = append(argv, "--state-dir", r.state, "--log-file", filepath.Join(r.dir, name+".log"), "--trace", trace)
	if r.cfg.protocol >= protoV2 {
		argv = append(argv, "--max-protocol", strconv.Itoa(r.cfg.protocol))
	}
	argv = append(append(append(argv, flags...), "--"), r.cfg.agent...)
	return r.start(ctx, name, argv, trace, w)
}

// closeAll ends every peer the check started, side by side: an agent that
// ignores EOF costs each of them the close timeout, and they need not pay
// it one after the other. It returns once all have ended.
func (r *checkRun) closeAll() {
	var wg sync.WaitGroup
	for _, ru := range r.runs {
		wg.Go(ru.c.close)
	}
	wg.Wait()
}

// newSession sends session/new and returns the session id.
func newSession(ctx context.Context, c *conn, cwd string) (string, error) {
	res, err := c.call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("%s: session/new result has no sessionId: %s", c.name, oneLine(string(res), 200))
	}
	return r.SessionID, nil
}

// reopenParams are the params of a session/load, resume or fork of sid.
func reopenParams(sid, cwd string) map[string]any {
	return map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
}

// forkSession forks sid and returns the fork's id.
func forkSession(ctx context.Context, c *conn, sid, cwd string) (string, error) {
	res, err := c.call(ctx, "session/fork", reopenParams(sid, cwd))
	if err != nil {
		return "", err
	}
	var f struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(res, &f) != nil || f.SessionID == "" {
		return "", fmt.Errorf("the session/fork result has no sessionId: %s", oneLine(string(res), 200))
	}
	return f.SessionID, nil
}

// openSidecar starts a sidecar, initializes it and opens a session.
func (r *checkRun) openSidecar(ctx context.Context, flags ...string) (*run, string, error) {
	ru, err := r.sidecar(ctx, flags...)
	if err != nil {
		return nil, "", err
	}
	if _, err := ru.c.initialize(ctx); err != nil {
		return nil, "", err
	}
	sid, err := newSession(ctx, ru.c, ru.cwd)
	return ru, sid, err
}

// turned is a session through the sidecar with every option changed and a
// first turn run: the start of the checks that take a session through a
// crash, a restart or a close.
type turned struct {
	ru     *run
	c      *conn
	sid    string
	want   *sessionConfig // the config the session must keep
	answer string         // the agent's text of the first turn
	// prompted is the user message of the first turn, as the client got
	// it (in v2 with the messageId its prompt was answered with).
	prompted message
}

// turn1 is the first turn's prompt of a turned session.
const turn1 = "Say OK. (conformance-turn-1)"

func (r *checkRun) turnedSession(ctx context.Context) (turned, error) {
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return turned{}, err
	}
	if _, err := changeAll(ctx, ru.c, sid, false, nil); err != nil {
		return turned{}, err
	}
	t := turned{ru: ru, c: ru.c, sid: sid, want: ru.c.configs.of(sid)}
	mark := ru.c.mark()
	if t.answer, err = promptOK(ctx, ru.c, sid, turn1); err != nil {
		return turned{}, err
	}
	if m := messages(ru.c.since(mark), sid, "user"); len(m) > 0 {
		t.prompted = m[len(m)-1]
	}
	return t, nil
}

// prompt sends one text block and returns the stop reason and the agent's
// text of the turn.
func prompt(ctx context.Context, c *conn, sid, text string) (string, string, error) {
	return promptParams(ctx, c, sid, map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": text}}})
}

// promptParams runs a session/prompt with params on sid to the end of its
// turn (proto.go) and returns the stop reason and the agent's text of the
// turn.
func promptParams(ctx context.Context, c *conn, sid string, params any) (string, string, error) {
	id, line, err := c.request("session/prompt", params)
	if err != nil {
		return "", "", err
	}
	mark := c.mark()
	stop, err := c.promptLine(ctx, sid, id, line)
	return stop, agentText(c.since(mark), sid), err
}

// promptOK is prompt that wants stopReason end_turn.
func promptOK(ctx context.Context, c *conn, sid, text string) (string, error) {
	stop, got, err := prompt(ctx, c, sid, text)
	if err != nil {
		return got, err
	}
	if stop != "end_turn" {
		return got, fmt.Errorf("%s: prompt %q: stopReason %q, want end_turn (text %q)", c.name, text, stop, oneLine(got, 200))
	}
	return got, nil
}

type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind      string          `json:"sessionUpdate"`
		MessageID string          `json:"messageId"`
		Content   json.RawMessage `json:"content"` // a chunk's block; a v2 upsert's list of blocks
	} `json:"update"`
}

// agentText joins the text of the agent's messages for sid among lines.
func agentText(lines []envelope, sid string) string {
	return messageText(lines, sid, "agent")
}

// userText joins the text of the user's messages for sid among lines.
func userText(lines []envelope, sid string) string {
	return messageText(lines, sid, "user")
}

// message is one message of a session as a client shows it: its
// messageId ("" for a v1 peer's chunks, which carry none) and its text.
type message struct {
	id   string
	text string
}

// messages are sid's messages of role ("agent", "user") among lines, each
// in the order it first appears: the text blocks of its chunks
// (ROLE_message_chunk) as they come, where a whole-message upsert of v2
// (ROLE_message, its content a list of blocks) sets the message with its
// messageId to its content, as a v2 client shows it. A v1 peer sends
// chunks alone, and those without a messageId are one message.
func messages(lines []envelope, sid, role string) []message {
	var order []*strings.Builder
	var ids []string
	byID := map[string]*strings.Builder{}
	get := func(id string) *strings.Builder {
		b := byID[id]
		if b == nil {
			b = &strings.Builder{}
			byID[id] = b
			order, ids = append(order, b), append(ids, id)
		}
		return b
	}
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	for _, e := range lines {
		if e.Method != "session/update" {
			continue
		}
		var u update
		if json.Unmarshal(e.Params, &u) != nil || u.SessionID != sid {
			continue
		}
		switch u.Update.Kind {
		case role + "_message_chunk":
			var b block
			if json.Unmarshal(u.Update.Content, &b) == nil && b.Type == "text" {
				get(u.Update.MessageID).WriteString(b.Text)
			}
		case role + "_message":
			var blocks []block
			_ = json.Unmarshal(u.Update.Content, &blocks) // not a list: no text
			m := get(u.Update.MessageID)
			m.Reset()
			for _, b := range blocks {
				if b.Type == "text" {
					m.WriteString(b.Text)
				}
			}
		}
	}
	out := make([]message, len(order))
	for i, b := range order {
		out[i] = message{id: ids[i], text: b.String()}
	}
	return out
}

// messageText joins the text of sid's messages of role among lines
// (messages).
func messageText(lines []envelope, sid, role string) string {
	var b strings.Builder
	for _, m := range messages(lines, sid, role) {
		b.WriteString(m.text)
	}
	return b.String()
}

// status is the `_sidecar/status` result.
type status struct {
	SessionID       string            `json:"sessionId"`
	NativeSessionID string            `json:"nativeSessionId"`
	NativeHistory   []string          `json:"nativeHistory"`
	Live            map[string]string `json:"live"`
	Blocked         json.RawMessage   `json:"blocked"`
	Turns           int               `json:"turns"`
	KeptTurns       int               `json:"keptTurns"`
}

func sidecarStatus(ctx context.Context, c *conn, sid string) (status, error) {
	var st status
	res, err := c.call(ctx, "_sidecar/status", map[string]string{"sessionId": sid})
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(res, &st); err != nil {
		return st, fmt.Errorf("_sidecar/status result %s: %w", oneLine(string(res), 200), err)
	}
	if st.Live == nil {
		st.Live = map[string]string{}
	}
	return st, nil
}

// rebuiltStatus reads the status after a rebuild (what: "/reset",
// "/rewind") and checks what every rebuild promises: a fresh native
// session, live equal to want, and no block. msg is what the sidecar said.
func rebuiltStatus(ctx context.Context, c *conn, sid, what string, before status, want map[string]string, msg string) (status, error) {
	st, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return st, err
	}
	if len(st.NativeHistory) <= len(before.NativeHistory) {
		return st, fmt.Errorf("after %s no fresh native session: nativeHistory %q before, %q after; the sidecar said %q", what, before.NativeHistory, st.NativeHistory, oneLine(msg, 200))
	}
	if d := diffView(want, st.Live); len(d) > 0 {
		return st, fmt.Errorf("after %s `_sidecar/status` live differs from the config before: %s", what, strings.Join(d, "; "))
	}
	if !isNull(st.Blocked) {
		return st, fmt.Errorf("after %s the session is blocked: %s", what, st.Blocked)
	}
	return st, nil
}

// shown is the part of `show SESSION --json` the checks read.
type shown struct {
	Live *struct {
		Values     map[string]json.RawMessage `json:"values"`
		Categories map[string]string          `json:"categories"`
		Mode       *string                    `json:"mode"`
		Model      *string                    `json:"model"`
	} `json:"live"`
	SetErrors []struct {
		OptionID string          `json:"optionId"`
		Value    json.RawMessage `json:"value"`
		Error    string          `json:"error"`
	} `json:"setErrors"`
	NativeHistory []string `json:"nativeHistory"`
}

// liveView is show's live layer in the shape of sessionConfig.view.
func (s shown) liveView() map[string]string {
	out := map[string]string{}
	if s.Live == nil {
		return out
	}
	hasCat := map[string]bool{}
	for id, v := range s.Live.Values {
		out[id] = unquote(v)
		hasCat[s.Live.Categories[id]] = true
	}
	if s.Live.Model != nil && !hasCat["model"] {
		out["model"] = *s.Live.Model
	}
	if s.Live.Mode != nil && !hasCat["mode"] {
		out["mode"] = *s.Live.Mode
	}
	return out
}

// cli runs `exe ARGS... --state-dir DIR` on the check's state dir and
// returns its stdout; an error carries the tail of its stderr.
func (r *checkRun) cli(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.exe, append(args, "--state-dir", r.state)...)
	cmd.Env = r.cfg.env
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("acp-sidecar %s: %w: %s", strings.Join(args, " "), err, oneLine(errb.String(), 300))
	}
	return out, nil
}

// show runs `exe show SESSION --json`.
func (r *checkRun) show(ctx context.Context, sid string) (shown, error) {
	var s shown
	out, err := r.cli(ctx, "show", sid, "--json")
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("acp-sidecar show %s --json: %w", sid, err)
	}
	return s, nil
}

// listed runs `exe sessions --json` and returns the entry of sid (nil when
// it is not listed) and how many sessions it lists.
func (r *checkRun) listed(ctx context.Context, sid string) (map[string]json.RawMessage, int, error) {
	out, err := r.cli(ctx, "sessions", "--json")
	if err != nil {
		return nil, 0, err
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, 0, fmt.Errorf("acp-sidecar sessions --json: %w", err)
	}
	for _, e := range list {
		var id string
		if json.Unmarshal(e["sessionId"], &id) == nil && id == sid {
			return e, len(list), nil
		}
	}
	return nil, len(list), nil
}

// changeAll sets every advertised config field to a non-current offered
// value, in the order the sidecar restores them: the model, then the mode,
// then the other options by id, re-reading the catalog after each call.
// strict: a call answered with success must show the value in the agent's
// own report, or the agent does not conform. It returns what it set.
func changeAll(ctx context.Context, c *conn, sid string, strict bool, after func(what string) error) ([]string, error) {
	var did []string
	done := func(what string) error {
		did = append(did, what)
		if after != nil {
			return after(what)
		}
		return nil
	}
	setOpt := func(o option) error {
		v, ok := nextValue(o.Values, unquote(o.Current))
		if !ok || (o.Type != "" && o.Type != "select") {
			return nil
		}
		if _, err := c.setOption(ctx, sid, o.ID, v); err != nil {
			return err
		}
		if got := c.configs.of(sid).byID(o.ID); strict && (got == nil || unquote(got.Current) != v) {
			now := "(option gone)"
			if got != nil {
				now = unquote(got.Current)
			}
			return fmt.Errorf("the agent answered session/set_config_option %s=%s with success, but its own report says %s=%s: it accepted a change it did not make", o.ID, v, o.ID, now)
		}
		return done(o.ID + "=" + v)
	}
	setLegacy := func(method, key string, l *legacy) error {
		v, ok := nextValue(l.Values, l.Current)
		if !ok {
			return nil
		}
		if _, err := c.call(ctx, method, map[string]any{"sessionId": sid, key: v}); err != nil {
			return err
		}
		return done(strings.TrimPrefix(method, "session/") + "=" + v)
	}
	cfg := c.configs.of(sid)
	if cfg == nil {
		return nil, fmt.Errorf("no config recorded for session %s", sid)
	}
	if o := cfg.byCategory("model"); o != nil {
		if err := setOpt(*o); err != nil {
			return did, err
		}
	} else if cfg.Models != nil {
		if err := setLegacy("session/set_model", "modelId", cfg.Models); err != nil {
			return did, err
		}
	}
	cfg = c.configs.of(sid)
	if o := cfg.byCategory("mode"); o != nil {
		if err := setOpt(*o); err != nil {
			return did, err
		}
	} else if cfg.Modes != nil {
		if err := setLegacy("session/set_mode", "modeId", cfg.Modes); err != nil {
			return did, err
		}
	}
	cfg = c.configs.of(sid)
	var ids []string
	for _, o := range cfg.Options {
		if o.Category != "model" && o.Category != "mode" {
			ids = append(ids, o.ID)
		}
	}
	slicesSort(ids)
	for _, id := range ids {
		if o := c.configs.of(sid).byID(id); o != nil {
			if err := setOpt(*o); err != nil {
				return did, err
			}
		}
	}
	c.settle(ctx, 200*time.Millisecond, 2*time.Second)
	return did, nil
}

// replyMatches compares what the built-in fake agent says it ran on (its
// reply line) with a config; other agents have no reply line and nothing is
// compared.
func replyMatches(text string, cfg *sessionConfig) (bool, []string) {
	rep, ok := fakeagent.ParseReply(text)
	if !ok || cfg == nil {
		return false, nil
	}
	var diffs []string
	cmp := func(what, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s %s, want %s", what, got, want))
		}
	}
	if o := cfg.byCategory("model"); o != nil {
		cmp("model", rep.Model, unquote(o.Current))
	} else if cfg.Models != nil {
		cmp("model", rep.Model, cfg.Models.Current)
	}
	if o := cfg.byCategory("mode"); o != nil {
		cmp("mode", rep.Mode, unquote(o.Current))
	} else if cfg.Modes != nil {
		cmp("mode", rep.Mode, cfg.Modes.Current)
	}
	if o := cfg.byCategory("thought_level"); o != nil {
		cmp("effort", rep.Effort, unquote(o.Current))
	}
	if o := cfg.byID("verbosity"); o != nil {
		cmp("verbosity", rep.Verbosity, unquote(o.Current))
	}
	return true, diffs
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(stat)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil && pp == pid {
			out = append(out, p)
		}
	}
	return out
}

// sidecarProcess is the pid of the sidecar itself among the processes a
// sidecar run started: the run's own pid. The tests replace it when they
// put a double in front of the sidecar.
var sidecarProcess = func(pid int) int { return pid }

// killAgent SIGKILLs the sidecar's agent (its child processes) and waits
// until they are reaped. It returns their pids.
func killAgent(ctx context.Context, ru *run) ([]int, error) {
	sc := sidecarProcess(ru.c.rc.Pid())
	kids := childrenOf(sc)
	if len(kids) == 0 {
		return nil, fmt.Errorf("the sidecar (pid %d) has no child process to kill", sc)
	}
	for _, pid := range kids {
		if err := kill(pid); err != nil {
			return nil, fmt.Errorf("kill the agent (pid %d): %w", pid, err)
		}
	}
	if !waitUntil(ctx, 10*time.Second, func() bool {
		return !slices.ContainsFunc(kids, func(pid int) bool { return !reaped(pid) })
	}) {
		return nil, fmt.Errorf("the agent (pids %v) is not reaped 10s after SIGKILL", kids)
	}
	return kids, nil
}

// reaped reports whether pid is gone from /proc. A zombie is not enough
// for a killed agent to be done: a multi-threaded process's leader shows Z
// while its other threads still exit, holding its stdin, and one of them
// may still read a line written then.
func reaped(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, fs.ErrNotExist)
}

// waitUntil polls cond every 50ms until it holds or ctx or the bound ends.
func waitUntil(ctx context.Context, bound time.Duration, cond func() bool) bool {
	end := time.Now().Add(bound)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// traceEntry is one line of the sidecar's --trace.
type traceEntry struct {
	T     string          `json:"t"`
	Dir   string          `json:"dir"`
	From  string          `json:"from"`
	Frame json.RawMessage `json:"frame"`
}

func readTrace(path string) ([]traceEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the sidecar's trace: %w", err)
	}
	var out []traceEntry
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e traceEntry
		if json.Unmarshal([]byte(line), &e) == nil && len(e.Frame) > 0 {
			out = append(out, e)
		}
	}
	return out, nil
}

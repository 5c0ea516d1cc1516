package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// The spec-level checks judge what the protocol asks of every agent. Each
// runs twice, on a fresh agent directly and on a fresh sidecar in front of
// one: the sidecar never turns a passing agent check into a failing one
// (issue 16). It may turn a failing one into a passing one, when it makes
// up for the agent (it answers a session/load the agent refuses): that is
// the sidecar absorbing the agent's failure, not a failure of anyone's.

// specFunc runs one spec-level check on a started peer, directly or through
// the sidecar alike, and returns what it saw.
type specFunc func(ctx context.Context, r *checkRun, ru *run, pr probeResult) (string, error)

// absorbedError makes a check's verdict absorbed: the agent alone does not
// pass it, and through the sidecar it passes. It counts as a pass, whatever
// the check's tier.
type absorbedError struct{ detail string }

func (a absorbedError) Error() string { return a.detail }

// bothWays makes a check of spec: run directly, then through the sidecar.
// The verdict follows the two ways' (the report keeps both, as Sides):
//
//	directly  through the sidecar  verdict
//	pass      pass                 pass
//	skip      skip                 skip
//	pass      fail or skip         fail (warn if advisory): the sidecar's failure
//	fail      pass                 absorbed: the sidecar makes up for the agent
//	skip      pass                 absorbed: likewise, where the agent alone cannot be judged
//	fail      fail or skip         fail (warn if advisory): the agent's failure
//	skip      fail                 fail (warn if advisory)
//
// Only the third row is the sidecar's doing; the detail says which way
// failed in every row but the first two.
func bothWays(spec specFunc) func(context.Context, *checkRun, probeResult) error {
	return func(ctx context.Context, r *checkRun, pr probeResult) error {
		side := func(start func(context.Context) (*run, error)) Side {
			ru, err := start(ctx)
			if err != nil {
				return sideOf("", err)
			}
			note, err := spec(ctx, r, ru, pr)
			ru.c.kill() // nothing is judged on its end, and claude ignores EOF
			return sideOf(note, err)
		}
		d := side(r.direct)
		v := side(func(ctx context.Context) (*run, error) { return r.sidecar(ctx) })
		r.sides = &Sides{Direct: d, Sidecar: v}
		switch {
		case d.Verdict == Pass && v.Verdict == Pass:
			if d.Detail == v.Detail {
				r.note("both ways: %s", d.Detail)
			} else {
				r.note("directly: %s; through the sidecar: %s", d.Detail, v.Detail)
			}
			return nil
		case d.Verdict == Skip && v.Verdict == Skip:
			return skipf("%s", d.Detail)
		case d.Verdict == Pass:
			return fmt.Errorf("passes directly, but through the sidecar it is %s: %s", v.Verdict, v.Detail)
		case v.Verdict == Pass && d.Verdict == Skip:
			return absorbedError{fmt.Sprintf("directly the agent cannot be judged (%s); through the sidecar it passes: %s", d.Detail, v.Detail)}
		case v.Verdict == Pass:
			return absorbedError{fmt.Sprintf("the agent fails it directly (%s); through the sidecar it passes: %s", d.Detail, v.Detail)}
		case d.Verdict == Skip:
			return fmt.Errorf("directly the agent cannot be judged (%s); through the sidecar it is %s: %s", d.Detail, v.Verdict, v.Detail)
		case v.Verdict == Skip:
			return fmt.Errorf("the agent fails it directly (%s); through the sidecar it cannot be judged (%s)", d.Detail, v.Detail)
		default:
			return fmt.Errorf("the agent fails it directly and through the sidecar: directly %s: %s; through the sidecar %s: %s", d.Verdict, d.Detail, v.Verdict, v.Detail)
		}
	}
}

func sideOf(note string, err error) Side {
	var se skipError
	switch {
	case err == nil:
		return Side{Verdict: Pass, Detail: note}
	case errors.As(err, &se):
		return Side{Verdict: Skip, Detail: se.reason}
	}
	return Side{Verdict: Fail, Detail: err.Error()}
}

// readyWithTurn is ready, then a first turn on the session.
func readyWithTurn(ctx context.Context, ru *run) (string, error) {
	sid, err := ready(ctx, ru)
	if err != nil {
		return "", err
	}
	if _, err := promptOK(ctx, ru.c, sid, specTurn); err != nil {
		return "", err
	}
	return sid, nil
}

// ready initializes ru and opens a session in its cwd.
func ready(ctx context.Context, ru *run) (string, error) {
	if _, err := ru.c.initialize(ctx); err != nil {
		return "", err
	}
	return newSession(ctx, ru.c, ru.cwd)
}

// object decodes raw as a JSON object, or says what it is instead.
func object(what string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s is not an object: %s", what, oneLine(string(raw), 200))
	}
	return m, nil
}

// jsonType names the JSON type of raw: object, array, string, number,
// boolean or null.
func jsonType(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// wantTypes checks that each field of m that is present has the type named.
func wantTypes(what string, m map[string]json.RawMessage, types map[string]string) error {
	keys := make([]string, 0, len(types))
	for k := range types {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := m[k]; ok && jsonType(v) != types[k] {
			return fmt.Errorf("%s.%s is a %s, want a %s: %s", what, k, jsonType(v), types[k], oneLine(string(v), 120))
		}
	}
	return nil
}

// ---- initialize

func specInitialize(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	res, err := ru.c.initialize(ctx)
	if err != nil {
		return "", err
	}
	m, err := object("the initialize result", res)
	if err != nil {
		return "", err
	}
	if ru.c.dialect.proto >= protoV2 {
		return initializeV2(m)
	}
	if v := m["protocolVersion"]; string(v) != "1" {
		return "", fmt.Errorf("the initialize result's protocolVersion is %s, want 1 (the client asked for 1, which a version-1 agent must answer as it is)", orMissing(v))
	}
	if err := wantTypes("the initialize result", m, map[string]string{"agentCapabilities": "object", "authMethods": "array", "agentInfo": "object"}); err != nil {
		return "", err
	}
	if caps, ok := m["agentCapabilities"]; ok {
		c, _ := object("agentCapabilities", caps)
		if err := wantTypes("agentCapabilities", c, map[string]string{"loadSession": "boolean", "promptCapabilities": "object", "mcpCapabilities": "object", "sessionCapabilities": "object"}); err != nil {
			return "", err
		}
		if sc, ok := c["sessionCapabilities"]; ok {
			s, _ := object("sessionCapabilities", sc)
			for k, v := range s {
				if t := jsonType(v); t != "object" && t != "null" {
					return "", fmt.Errorf("agentCapabilities.sessionCapabilities.%s is a %s, want an object", k, t)
				}
			}
		}
	}
	if err := authMethods(m, "id"); err != nil {
		return "", err
	}
	if info, ok := m["agentInfo"]; ok {
		in, _ := object("agentInfo", info)
		if err := wantTypes("agentInfo", in, map[string]string{"name": "string", "version": "string", "title": "string"}); err != nil {
			return "", err
		}
	}
	return "protocol version 1, capabilities well formed", nil
}

// initializeV2 judges a v2 initialize result (ru.c.initialize has seen
// protocolVersion 2): info, which v2 requires, with a name and a version;
// capabilities, whose session capability and each of its members is an
// object; authMethods, each named by its methodId.
func initializeV2(m map[string]json.RawMessage) (string, error) {
	if err := wantTypes("the initialize result", m, map[string]string{"capabilities": "object", "authMethods": "array", "info": "object"}); err != nil {
		return "", err
	}
	info, ok := m["info"]
	if !ok {
		return "", errors.New("the initialize result has no info, which v2 requires")
	}
	in, _ := object("info", info)
	if err := wantTypes("info", in, map[string]string{"name": "string", "version": "string", "title": "string"}); err != nil {
		return "", err
	}
	for _, k := range []string{"name", "version"} {
		if _, ok := in[k]; !ok {
			return "", fmt.Errorf("the initialize result's info has no %s, which v2 requires", k)
		}
	}
	if caps, ok := m["capabilities"]; ok {
		c, _ := object("capabilities", caps)
		if t := jsonType(c["session"]); c["session"] != nil && t != "object" && t != "null" {
			return "", fmt.Errorf("capabilities.session is a %s, want an object", t)
		}
		if sc := c["session"]; jsonType(sc) == "object" {
			s, _ := object("capabilities.session", sc)
			for k, v := range s {
				if t := jsonType(v); t != "object" && t != "null" {
					return "", fmt.Errorf("capabilities.session.%s is a %s, want an object", k, t)
				}
			}
		}
	}
	if err := authMethods(m, "methodId"); err != nil {
		return "", err
	}
	return "protocol version 2, capabilities well formed", nil
}

// authMethods checks that every entry of m's authMethods is an object with
// a string key (v1's id, v2's methodId).
func authMethods(m map[string]json.RawMessage, key string) error {
	var auth []map[string]json.RawMessage
	if a, ok := m["authMethods"]; ok && json.Unmarshal(a, &auth) != nil {
		return fmt.Errorf("authMethods holds something other than objects: %s", oneLine(string(a), 200))
	}
	for i, a := range auth {
		if jsonType(a[key]) != "string" {
			return fmt.Errorf("authMethods[%d] has no string %s: %s", i, key, oneLine(string(m["authMethods"]), 200))
		}
	}
	return nil
}

func orMissing(v json.RawMessage) string {
	if v == nil {
		return "missing"
	}
	return oneLine(string(v), 60)
}

// ---- session/new

func specSessionNew(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	if _, err := ru.c.initialize(ctx); err != nil {
		return "", err
	}
	res, err := ru.c.call(ctx, "session/new", map[string]any{"cwd": ru.cwd, "mcpServers": []any{}})
	if err != nil {
		return "", err
	}
	m, err := object("the session/new result", res)
	if err != nil {
		return "", err
	}
	var sid string
	if json.Unmarshal(m["sessionId"], &sid) != nil || sid == "" {
		return "", fmt.Errorf("the session/new result has no sessionId string: %s", oneLine(string(res), 200))
	}
	n, err := checkConfigShape(res, ru.c.dialect.optionKey())
	if err != nil {
		return "", err
	}
	sid2, err := newSession(ctx, ru.c, ru.cwd)
	if err != nil {
		return "", fmt.Errorf("a second session/new: %w", err)
	}
	if sid2 == sid {
		return "", fmt.Errorf("two session/new calls answered the same sessionId %s", sid)
	}
	return fmt.Sprintf("a session id each, the config well formed (%s)", n), nil
}

// checkConfigShape checks the config part of a session result: each
// configOptions entry has its key (id in v1, configId in v2), a name and
// a type, a select's current value is one it offers, and the legacy modes
// and models name a current one they list. It says what it found.
func checkConfigShape(res json.RawMessage, key string) (string, error) {
	var w wireConfig
	if err := json.Unmarshal(res, &w); err != nil {
		return "", fmt.Errorf("the session result's config: %w", err)
	}
	var found []string
	if len(w.ConfigOptions) > 0 && string(w.ConfigOptions) != "null" {
		opts, err := checkOptions(w.ConfigOptions, key)
		if err != nil {
			return "", err
		}
		found = append(found, fmt.Sprintf("%d options", len(opts)))
	}
	cfg := parseConfig(res)
	if cfg.Modes != nil {
		if !slices.Contains(cfg.Modes.Values, cfg.Modes.Current) {
			return "", fmt.Errorf("modes.currentModeId %q is not one of availableModes %q", cfg.Modes.Current, cfg.Modes.Values)
		}
		found = append(found, "modes")
	}
	if cfg.Models != nil {
		if !slices.Contains(cfg.Models.Values, cfg.Models.Current) {
			return "", fmt.Errorf("models.currentModelId %q is not one of availableModels %q", cfg.Models.Current, cfg.Models.Values)
		}
		found = append(found, "models")
	}
	if len(found) == 0 {
		return "no config", nil
	}
	return strings.Join(found, ", "), nil
}

// checkOptions checks a configOptions list's shape, each option named by
// key, and returns it parsed.
func checkOptions(raw json.RawMessage, key string) ([]option, error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("configOptions is not a list of objects: %s", oneLine(string(raw), 200))
	}
	opts, _ := parseOptions(raw)
	for i, o := range list {
		for _, k := range []string{key, "name", "type"} {
			if jsonType(o[k]) != "string" {
				return nil, fmt.Errorf("configOptions[%d] has no string %s: %s", i, k, oneLine(string(raw), 200))
			}
		}
		if _, ok := o["currentValue"]; !ok {
			return nil, fmt.Errorf("configOptions[%d] (%s) has no currentValue", i, opts[i].ID)
		}
		if opts[i].Type == "select" && !slices.Contains(opts[i].Values, unquote(opts[i].Current)) {
			return nil, fmt.Errorf("configOptions[%d] (%s): currentValue %s is not one of its options %q", i, opts[i].ID, opts[i].Current, opts[i].Values)
		}
	}
	return opts, nil
}

// ---- session/load, resume, list, close, fork

const specTurn = "Say OK. (conformance-spec-turn)"

// loadAfterTurn opens a session, runs a turn on it and loads it again on
// the same connection (v1's session/load, v2's session/resume with
// replayFrom: dialect.withHistory). It returns the session and what came
// between the load request and its answer. With persisted, the load waits
// until the agent lists the session (listed) first.
func loadAfterTurn(ctx context.Context, ru *run, persisted bool) (string, []envelope, error) {
	c := ru.c
	sid, err := readyWithTurn(ctx, ru)
	if err != nil {
		return "", nil, err
	}
	if persisted {
		if _, err := listed(ctx, ru, sid); err != nil {
			return "", nil, fmt.Errorf("before session/load: %w", err)
		}
	}
	mark := c.mark()
	how := c.dialect.withHistory()
	res, err := c.reopen(ctx, how, sid, ru.cwd)
	if err != nil {
		return "", nil, err
	}
	if _, err := object("the "+how.name+" result", res); err != nil {
		return "", nil, err
	}
	return sid, c.since(mark), nil
}

// by is a reopen check's note, which names how the session was reopened
// where it was no session/load (v2).
func by(how reopen, note string) string {
	if how.method == "session/load" {
		return note
	}
	return "by " + how.name + ": " + note
}

// specSessionLoad wants the prompt of the turn before in the replay. An
// agent that lists sessions is loaded once it lists this one:
// claude-agent-acp 0.23.1 reads the claude CLI's transcript, which the CLI
// writes on a timer after the turn's answer (see specSessionList), and a
// load right after the turn on a loaded machine found it empty and
// replayed nothing, directly or through the sidecar alike. Its listing
// leaves out a transcript with no prompt in it, so a listed session has
// its prompt on disk. load-replay keeps the load at once, which is what
// it reports on.
func specSessionLoad(ctx context.Context, _ *checkRun, ru *run, pr probeResult) (string, error) {
	sid, replay, err := loadAfterTurn(ctx, ru, pr.can.session("list"))
	if err != nil {
		return "", err
	}
	for _, e := range replay {
		var u update
		if e.Method == "session/update" && json.Unmarshal(e.Params, &u) == nil && u.SessionID != sid {
			return "", fmt.Errorf("the replay of %s carried an update for session %s", sid, u.SessionID)
		}
	}
	how := ru.c.dialect.withHistory()
	if user := userText(replay, sid); !strings.Contains(user, "conformance-spec-turn") {
		return "", fmt.Errorf("%s replayed no user message with the earlier prompt (user text %q)", how.name, oneLine(user, 200))
	}
	if _, err := promptOK(ctx, ru.c, sid, "Say OK."); err != nil {
		return "", fmt.Errorf("the prompt after %s: %w", how.name, err)
	}
	return by(how, "replayed the prompt before answering, then took a prompt"), nil
}

// specLoadReplay wants the agent's reply in the replay too: the protocol
// asks for the whole conversation. claude-agent-acp 0.23.1 replays the
// user's side alone when the load follows the turn at once.
func specLoadReplay(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	sid, replay, err := loadAfterTurn(ctx, ru, false)
	if err != nil {
		return "", err
	}
	how := ru.c.dialect.withHistory()
	if strings.TrimSpace(agentText(replay, sid)) == "" {
		if ru.trace != "" && !agentReplayedText(ru.trace, how.method) {
			// What the agent wrote says whose the failure is: a sidecar
			// that dropped the agent's reply would show it there.
			return "", fmt.Errorf("%s replayed no agent message: the agent's side of the conversation is missing, and the agent sent none (its own frames in the sidecar's trace)", how.name)
		}
		return "", fmt.Errorf("%s replayed no agent message: the agent's side of the conversation is missing", how.name)
	}
	return by(how, "replayed the agent's reply too"), nil
}

// agentReplayedText says whether the agent's own frames in a sidecar's
// trace replay any text of the agent's, after the client's last request
// of method and before the agent's answer to it.
func agentReplayedText(trace, method string) bool {
	entries, err := readTrace(trace)
	if err != nil {
		return true // nothing to tell by: the failure is not put on the agent
	}
	from := -1
	var id json.RawMessage
	for i, e := range entries {
		var f traceFrame
		if e.Dir == "client->agent" && e.From == "peer" && json.Unmarshal(e.Frame, &f) == nil && f.Method == method {
			from, id = i, f.ID
		}
	}
	if from < 0 {
		return true
	}
	for _, e := range entries[from+1:] {
		if e.Dir != "agent->client" || e.From != "peer" {
			continue
		}
		var f traceFrame
		if json.Unmarshal(e.Frame, &f) != nil {
			continue
		}
		if f.Method == "" && string(f.ID) == string(id) {
			return false // its answer: the replay is over
		}
		var u update
		if f.Method == "session/update" && json.Unmarshal(f.Params, &u) == nil && strings.TrimSpace(agentText([]envelope{{Method: f.Method, Params: f.Params}}, u.SessionID)) != "" {
			return true
		}
	}
	return false
}

func specSessionResume(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	c := ru.c
	sid, err := readyWithTurn(ctx, ru)
	if err != nil {
		return "", err
	}
	res, err := c.reopen(ctx, plainResume, sid, ru.cwd)
	if err != nil {
		return "", err
	}
	if _, err := object("the session/resume result", res); err != nil {
		return "", err
	}
	if _, err := promptOK(ctx, c, sid, "Say OK."); err != nil {
		return "", fmt.Errorf("the prompt after session/resume: %w", err)
	}
	return "resumed, then took a prompt", nil
}

// listCatchUp bounds how long session-list waits for the agent's listing
// to show the session its turn just used. The wait is for an event, the
// agent's transcript write landing, which comes within a CLI write timer
// of 100ms (see specSessionList); 10s is generous on a loaded 2-core
// runner, and only a broken agent ever uses all of it.
const listCatchUp = 10 * time.Second

// specSessionList wants the session just used listed with its cwd.
//
// claude-agent-acp 0.23.1 answers session/list from the claude CLI's
// transcript files (the SDK's listSessions reads
// ~/.claude/projects/<cwd>/*.jsonl and leaves out a file with no prompt in
// it). The CLI appends a turn's lines through a write queue drained by a
// 100ms timer, and yields the turn's result before the queue is drained
// (it flushes first only under CLAUDE_CODE_EAGER_FLUSH, which the agent
// does not set), so the prompt's response may reach the client before the
// session is on disk: a session/list right after it can list nothing. The
// protocol has no signal for "persisted", so the check lists again until
// the session appears, listCatchUp at most: it waits for that write to
// land, as record waits for the store. This is no retry of the check: the
// turn is not redone, the listing is read until it shows the event, and a
// list that errs or shows the session with a wrong cwd fails at once. The
// same loop runs directly and through the sidecar, so the verdicts agree;
// the detail says how many lists it took when it took more than one. The
// fake agent's -list-lag plays the quirk.
func specSessionList(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	// Some agents list a session only once it has a turn on disk.
	sid, err := readyWithTurn(ctx, ru)
	if err != nil {
		return "", err
	}
	l, err := listed(ctx, ru, sid)
	switch {
	case err != nil:
		return "", err
	case l.lists > 1:
		return fmt.Sprintf("the session is listed with its cwd (%d listed), by the %s session/list after the turn", l.seen, ordinal(l.lists)), nil
	}
	return fmt.Sprintf("the session is listed with its cwd (%d listed)", l.seen), nil
}

// listing is what listed saw: how many sessions the last list held, and
// how many lists it took.
type listing struct{ seen, lists int }

// listed reads session/list for the run's cwd until it shows sid,
// listCatchUp at most (see specSessionList). A list that errs fails at
// once.
func listed(ctx context.Context, ru *run, sid string) (listing, error) {
	var (
		l     listing
		found bool
		lerr  error
	)
	waitUntil(ctx, listCatchUp, func() bool {
		l.lists++
		found, l.seen, lerr = listHas(ctx, ru.c, ru.cwd, sid)
		return found || lerr != nil
	})
	switch {
	case lerr != nil:
		return l, lerr
	case !found && l.lists > 1:
		return l, fmt.Errorf("session/list for cwd %s does not list the session %s just used (%d listed; %d lists over %s)", ru.cwd, sid, l.seen, l.lists, listCatchUp)
	case !found:
		return l, fmt.Errorf("session/list for cwd %s does not list the session %s just used (%d listed)", ru.cwd, sid, l.seen)
	}
	return l, nil
}

// listHas reads session/list for cwd, every page of it, and reports
// whether sid is there and how many sessions were listed. A malformed
// list, or sid with another cwd, is an error.
func listHas(ctx context.Context, c *conn, cwd, sid string) (bool, int, error) {
	params := map[string]any{"cwd": cwd}
	seen := 0
	for page := 0; page < 20; page++ {
		res, err := c.call(ctx, "session/list", params)
		if err != nil {
			return false, seen, err
		}
		var l struct {
			Sessions []struct {
				SessionID *string `json:"sessionId"`
				Cwd       *string `json:"cwd"`
			} `json:"sessions"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &l); err != nil || l.Sessions == nil {
			return false, seen, fmt.Errorf("the session/list result has no sessions list: %s", oneLine(string(res), 200))
		}
		for i, s := range l.Sessions {
			if s.SessionID == nil || *s.SessionID == "" || s.Cwd == nil {
				return false, seen, fmt.Errorf("sessions[%d] lacks a sessionId or a cwd: %s", i, oneLine(string(res), 200))
			}
			seen++
			if *s.SessionID == sid {
				if !samePath(*s.Cwd, cwd) {
					return false, seen, fmt.Errorf("session/list shows %s with cwd %s, want %s", sid, *s.Cwd, cwd)
				}
				return true, seen, nil
			}
		}
		if l.NextCursor == nil || *l.NextCursor == "" {
			break
		}
		params["cursor"] = *l.NextCursor
	}
	return false, seen, nil
}

// ordinal spells n as 2nd, 3rd, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

func samePath(a, b string) bool {
	ea, err1 := filepath.EvalSymlinks(a)
	eb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ea == eb
}

func specSessionClose(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	sid, err := ready(ctx, ru)
	if err != nil {
		return "", err
	}
	res, err := ru.c.call(ctx, "session/close", map[string]any{"sessionId": sid})
	if err != nil {
		return "", err
	}
	if _, err := object("the session/close result", res); err != nil {
		return "", err
	}
	return "closed", nil
}

func specSessionFork(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	c := ru.c
	sid, err := readyWithTurn(ctx, ru)
	if err != nil {
		return "", err
	}
	fork, err := forkSession(ctx, c, sid, ru.cwd)
	if err != nil {
		return "", err
	}
	if fork == sid {
		return "", fmt.Errorf("session/fork answered the parent's own id %s", sid)
	}
	if _, err := promptOK(ctx, c, fork, "Say OK."); err != nil {
		return "", fmt.Errorf("the prompt on the fork: %w", err)
	}
	return "a new session that took a prompt", nil
}

// ---- cancel

// cancelPrompt is the prompt the cancel check cancels. The built-in fake
// agent waits for session/cancel on it; an agent that calls an LLM may
// finish first, which the protocol allows.
const cancelPrompt = "hang"

// turnUpdates are the session/update kinds an agent sends while it works
// on a turn.
var turnUpdates = map[string]bool{"agent_message_chunk": true, "agent_message": true, "agent_thought_chunk": true, "tool_call": true, "tool_call_update": true, "plan": true}

func specCancel(ctx context.Context, r *checkRun, ru *run, _ probeResult) (string, error) {
	c := ru.c
	sid, err := ready(ctx, ru)
	if err != nil {
		return "", err
	}
	text := cancelPrompt
	stall := r.cfg.llmLog != ""
	if stall {
		// Behind the mock LLM the turn stalls until the agent gives up
		// the LLM's call, so the cancel lands mid-turn every time. A turn
		// that ended as the cancel came would leave claude-agent-acp
		// 0.101.0 a cancel to spend on the next prompt (-32800), more
		// often through the sidecar's few added microseconds: a CI run
		// failed so. The session id tells this run's call in the log.
		text += " " + mockllm.StallMarker + " " + sid
	}
	id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": text}}})
	if err != nil {
		return "", err
	}
	mark := c.mark()
	t, err := c.startTurn(sid, id, line)
	if err != nil {
		return "", err
	}
	// Cancel once the agent is at work on the turn: its first update of
	// the turn, or the turn's end if it has none; behind the mock, its
	// call of the LLM, which stalls.
	if stall {
		if err := awaitLLMCall(ctx, r.cfg.llmLog, text); err != nil {
			return "", err
		}
	} else if _, err := c.await(ctx, mark, "update or end of the prompt's turn", func(e envelope) bool {
		var u update
		return t.ended() || e.Method == "session/update" && json.Unmarshal(e.Params, &u) == nil && u.SessionID == sid && turnUpdates[u.Update.Kind]
	}); err != nil {
		return "", err
	}
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":` + strconv.Quote(sid) + `}}`
	if err := c.write([]byte(cancel)); err != nil {
		return "", err
	}
	stop, err := t.wait(ctx)
	if err != nil {
		return "", fmt.Errorf("the cancelled prompt: %w", err)
	}
	note := "the prompt ended cancelled"
	switch stop {
	case "cancelled":
	case "end_turn":
		note = "the prompt ended end_turn: the turn was over before the cancel reached the agent"
	default:
		return "", fmt.Errorf("the cancelled prompt ended with stopReason %q, want cancelled", stop)
	}
	if _, err := promptOK(ctx, c, sid, "Say OK."); err != nil {
		return "", fmt.Errorf("the prompt after the cancel: %w", err)
	}
	return note + ", and the session took the next prompt", nil
}

// awaitLLMCall waits until the mock LLM's log at path holds a call whose
// last user text is text: the mock writes each request there before it
// answers, or stalls.
func awaitLLMCall(ctx context.Context, path, text string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		reqs, err := readLLMLog(path)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(reqs, func(q mockllm.Request) bool { return q.LastUserText() == text }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent never called the LLM with %q (--llm-log %s): %w", text, path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// ---- set_config_option

// dependsOnModel are the option categories a model change may take away.
var dependsOnModel = []string{"thought_level", "model_config"}

func specSetConfigOption(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	c := ru.c
	sid, err := ready(ctx, ru)
	if err != nil {
		return "", err
	}
	var did []string
	set := func(id string) error {
		before := c.configs.of(sid)
		o := before.byID(id)
		if o == nil || (o.Type != "" && o.Type != "select") {
			return nil
		}
		v, ok := nextValue(o.Values, unquote(o.Current))
		if !ok {
			return nil
		}
		res, err := c.setOption(ctx, sid, id, v)
		if err != nil {
			return err
		}
		var r struct {
			ConfigOptions json.RawMessage `json:"configOptions"`
		}
		if json.Unmarshal(res, &r) != nil || len(r.ConfigOptions) == 0 || string(r.ConfigOptions) == "null" {
			return fmt.Errorf("session/set_config_option %s=%s answered no configOptions: %s", id, v, oneLine(string(res), 200))
		}
		opts, err := checkOptions(r.ConfigOptions, c.dialect.optionKey())
		if err != nil {
			return fmt.Errorf("session/set_config_option %s=%s: %w", id, v, err)
		}
		after := &sessionConfig{Options: opts}
		if got := after.byID(id); got == nil || unquote(got.Current) != v {
			return fmt.Errorf("session/set_config_option %s=%s answered a list where %s is %s", id, v, id, describeOption(got))
		}
		var lacks []string
		for _, b := range before.Options {
			if after.byID(b.ID) == nil && !(o.Category == "model" && slices.Contains(dependsOnModel, b.Category)) {
				lacks = append(lacks, b.ID)
			}
		}
		if len(lacks) > 0 {
			return fmt.Errorf("session/set_config_option %s=%s answered %d options, not the complete list: it lacks %s", id, v, len(opts), strings.Join(lacks, ", "))
		}
		did = append(did, id+"="+v)
		return nil
	}
	cfg := c.configs.of(sid)
	var order []string
	for _, cat := range []string{"model", "mode"} {
		if o := cfg.byCategory(cat); o != nil {
			order = append(order, o.ID)
		}
	}
	var rest []string
	for _, o := range cfg.Options {
		if !slices.Contains(order, o.ID) {
			rest = append(rest, o.ID)
		}
	}
	slices.Sort(rest)
	for _, id := range append(order, rest...) {
		if err := set(id); err != nil {
			return "", err
		}
	}
	if len(did) == 0 {
		return "", skipf("the agent offers no second value for any option")
	}
	return fmt.Sprintf("each of %s answered the complete list", strings.Join(did, ", ")), nil
}

func describeOption(o *option) string {
	if o == nil {
		return "missing"
	}
	return unquote(o.Current)
}

// ---- JSON-RPC hygiene

// rpcIDs are the request ids the hygiene check sends, each of which must
// come back as sent: zero, a negative number, the largest integer a double
// holds exactly, strings that look like numbers or are empty, and a string
// with a quote and a non-ASCII letter.
var rpcIDs = []string{`0`, `-7`, `9007199254740991`, `"s-1"`, `"42"`, `""`, `"\u00fc \"q\""`}

func specJSONRPC(ctx context.Context, _ *checkRun, ru *run, _ probeResult) (string, error) {
	c := ru.c
	// initialize itself with a string id.
	initID := `"acp-conformance-init"`
	e, err := roundTrip(ctx, c, initID, "initialize", string(c.dialect.initParams("")))
	if err != nil {
		return "", err
	}
	if e.Error != nil {
		return "", fmt.Errorf("initialize with id %s: %w", initID, e.Error)
	}
	if err := c.dialect.answeredVersion(e.Result); err != nil {
		return "", err
	}
	for _, id := range rpcIDs {
		e, err := roundTrip(ctx, c, id, "acp-conformance/unknown", `{}`)
		if err != nil {
			return "", err
		}
		if e.Error == nil || e.Error.Code != -32601 {
			return "", fmt.Errorf("the unknown method acp-conformance/unknown (id %s) was answered %s, want error -32601", id, describeAnswer(e))
		}
	}
	// Bad params: the wrong types for session/new's fields.
	e, err = roundTrip(ctx, c, `77`, "session/new", `{"cwd":42,"mcpServers":"none"}`)
	if err != nil {
		return "", err
	}
	if e.Error == nil || e.Error.Code != -32602 {
		return "", fmt.Errorf("session/new with cwd 42 and mcpServers \"none\" was answered %s, want error -32602", describeAnswer(e))
	}
	return fmt.Sprintf("-32601 for an unknown method, -32602 for bad params; ids %s and %s came back as sent", initID, strings.Join(rpcIDs, " ")), nil
}

// roundTrip writes one request with the raw id and params, and returns the
// next response; its id must be the one sent.
func roundTrip(ctx context.Context, c *conn, id, method, params string) (envelope, error) {
	mark := c.mark()
	line := `{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method) + `,"params":` + params + `}`
	if err := c.write([]byte(line)); err != nil {
		return envelope{}, err
	}
	e, err := c.await(ctx, mark, "answer to "+method+" id "+id, isResponse)
	if err != nil {
		return e, err
	}
	if !sameID(json.RawMessage(id), e.ID) {
		return e, fmt.Errorf("%s with id %s was answered with id %s", method, id, orMissing(e.ID))
	}
	return e, nil
}

// sameID compares two ids as JSON-RPC does: strings by value, numbers by
// their text (9007199254740991 must not come back as 9.007199254740991e15).
func sameID(sent, got json.RawMessage) bool {
	var a, b any
	if jsonType(sent) == "string" {
		return json.Unmarshal(sent, &a) == nil && json.Unmarshal(got, &b) == nil && a == b
	}
	return bytes.Equal(bytes.TrimSpace(sent), bytes.TrimSpace(got))
}

func describeAnswer(e envelope) string {
	if e.Error != nil {
		return fmt.Sprintf("error %d %q", e.Error.Code, e.Error.Message)
	}
	return "with a result " + oneLine(string(e.Result), 100)
}

// ---- eof

// checkEOF closes a fresh agent's stdin after initialize and waits
// closeTimeout for it to exit. claude-agent-acp and codex-acp do not
// (agents.md); an editor that only closes stdin leaves them running, which
// is why the sidecar stops the agent's whole tree itself.
func checkEOF(ctx context.Context, r *checkRun, _ probeResult) error {
	ru, err := r.direct(ctx)
	if err != nil {
		return err
	}
	if _, err := ru.c.initialize(ctx); err != nil {
		return err
	}
	code, err := ru.c.rc.Close()
	if errors.Is(err, acpclient.ErrKilled) {
		return fmt.Errorf("the agent kept running %s after its stdin closed and was killed: a client that only closes stdin leaves it behind", closeTimeout)
	}
	if err != nil {
		return err
	}
	r.note("exited with status %d after its stdin closed", code)
	return nil
}

package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// probeResult is what a fresh agent says about itself, asked directly.
type probeResult struct {
	info struct {
		Name    string `json:"name"`
		Title   string `json:"title"`
		Version string `json:"version"`
	}
	protocolVersion int
	caps            json.RawMessage
	can             agentCaps // caps, decoded
	init            json.RawMessage
	cfg             *sessionConfig
}

// probe asks a fresh agent, directly and in w, what it is, what it can do
// and what a fresh session offers.
func probe(ctx context.Context, r *checkRun, w *world) (probeResult, error) {
	var pr probeResult
	// The agent outlives the probe's bound, which ends only its waits: a
	// probe that got no answer in time asks it for its goroutines
	// (hangReport), and closeAll ends it after.
	ru, err := r.start(context.WithoutCancel(ctx), r.runName("direct"), r.cfg.agent, "", w)
	if err != nil {
		return pr, err
	}
	res, err := ru.c.initialize(ctx)
	if err != nil {
		return pr, err
	}
	pr.init = res
	ir, err := ru.c.dialect.readInit(res)
	if err != nil {
		return pr, err
	}
	pr.protocolVersion, pr.caps, pr.can = ir.version, ir.caps, ir.can
	if len(ir.info) > 0 {
		_ = json.Unmarshal(ir.info, &pr.info) // no name is reported as ""
	}
	sid, err := newSession(ctx, ru.c, ru.cwd)
	if err != nil {
		return pr, err
	}
	pr.cfg = ru.c.configs.of(sid)
	return pr, nil
}

var errNoConfig = skipError{noConfig}

// ---- record

func checkRecord(ctx context.Context, r *checkRun, pr probeResult) error {
	if pr.cfg.empty() {
		return errNoConfig
	}
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return err
	}
	c := ru.c
	compare := func(after string) error {
		var last []string
		ok := waitUntil(ctx, 5*time.Second, func() bool {
			s, err := r.show(ctx, sid)
			if err != nil {
				last = []string{err.Error()}
				return false
			}
			last = diffView(c.configs.of(sid).view(), s.liveView())
			return len(last) == 0
		})
		if !ok {
			return fmt.Errorf("after %s, `show %s --json` live differs from what the agent reported: %s", after, sid, strings.Join(last, "; "))
		}
		return nil
	}
	if err := compare("session/new"); err != nil {
		return err
	}
	did, err := changeAll(ctx, c, sid, true, compare)
	if err != nil {
		return err
	}
	if len(did) == 0 {
		return skipf("the agent offers no second value for any option")
	}
	r.note("live matched the agent after session/new and each of %s", strings.Join(did, ", "))
	return nil
}

// changedSession opens a session through the sidecar and sets every option
// the agent offers to another of its values: the start of the checks that
// need a session off its defaults. It returns what it changed.
func changedSession(ctx context.Context, r *checkRun, pr probeResult) (*run, string, []string, error) {
	if pr.cfg.empty() {
		return nil, "", nil, errNoConfig
	}
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	did, err := changeAll(ctx, ru.c, sid, true, nil)
	if err != nil {
		return nil, "", nil, err
	}
	if len(did) == 0 {
		return nil, "", nil, skipf("the agent offers no second value for any option")
	}
	return ru, sid, did, nil
}

// ---- reset

func checkReset(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, did, err := changedSession(ctx, r, pr)
	if err != nil {
		return err
	}
	c := ru.c
	want := c.configs.of(sid)
	st0, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return err
	}
	mark := c.mark()
	msg, err := promptOK(ctx, c, sid, "/reset")
	if err != nil {
		return err
	}
	c.settle(ctx, 200*time.Millisecond, 2*time.Second)
	reports, bad := reportsSince(c.since(mark), sid, want)
	if len(bad) > 0 {
		return fmt.Errorf("after /reset the agent's reports differ from the config set before it (%s): %s; the sidecar said %q",
			formatView(want.view()), strings.Join(bad, "; "), oneLine(msg, 200))
	}
	if d := diffView(want.view(), c.configs.of(sid).view()); len(d) > 0 {
		return fmt.Errorf("after /reset the config differs: %s; the sidecar said %q", strings.Join(d, "; "), oneLine(msg, 200))
	}
	st1, err := rebuiltStatus(ctx, c, sid, "/reset", st0, want.view(), msg)
	if err != nil {
		return err
	}
	text, err := promptOK(ctx, c, sid, "Say OK.")
	if err != nil {
		return fmt.Errorf("the first prompt after /reset: %w", err)
	}
	r.note("set %s; /reset: native %s → %s, %d config reports after it, status live matches", strings.Join(did, " "), st0.NativeSessionID, st1.NativeSessionID, reports)
	if ok, d := replyMatches(text, want); ok {
		if len(d) > 0 {
			return fmt.Errorf("after /reset the agent ran the prompt on a different config: %s", strings.Join(d, "; "))
		}
		r.note("the agent's reply line shows the same config")
	}
	return nil
}

// reportsSince applies the config reports (config_option_update,
// current_mode_update) for sid among lines in order, and compares the
// last word on each field with want. A restore goes field by field, so
// the reports in between may show a partial config.
func reportsSince(lines []envelope, sid string, want *sessionConfig) (int, []string) {
	n := 0
	last := map[string]string{}
	for _, e := range lines {
		if e.Method != "session/update" {
			continue
		}
		var p configUpdate
		if json.Unmarshal(e.Params, &p) != nil || p.SessionID != sid {
			continue
		}
		switch p.Update.Kind {
		case "config_option_update":
			n++
			opts, _ := parseOptions(p.Update.ConfigOptions)
			for _, o := range opts {
				last["config_option_update "+o.ID] = unquote(o.Current)
			}
		case "current_mode_update":
			n++
			last["current_mode_update"] = p.Update.CurrentModeID
		}
	}
	var bad []string
	for k, got := range last {
		var w string
		if id, ok := strings.CutPrefix(k, "config_option_update "); ok {
			o := want.byID(id)
			if o == nil {
				continue
			}
			w = unquote(o.Current)
		} else if o := want.byCategory("mode"); o != nil {
			w = unquote(o.Current)
		} else if want.Modes != nil {
			w = want.Modes.Current
		}
		if got != w {
			bad = append(bad, fmt.Sprintf("%s: last reported %s, want %s", k, got, w))
		}
	}
	slices.Sort(bad)
	return n, bad
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// ---- restore-order

type ownCall struct {
	id     string
	method string
	field  string // option id, or "set_mode" / "set_model"
	value  string
	rank   int // 0 model, 1 mode, 2 other
}

func checkRestoreOrder(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, _, err := changedSession(ctx, r, pr)
	if err != nil {
		return err
	}
	c := ru.c
	want := c.configs.of(sid)
	id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": "/reset"}}})
	if err != nil {
		return err
	}
	if _, err := c.promptLine(ctx, sid, id, line); err != nil {
		return fmt.Errorf("/reset: %w", err)
	}
	nudgeTrace(ctx, c)
	var entries []traceEntry
	var calls []ownCall
	var final *sessionConfig
	var problems []string
	// The trace is flushed as the sidecar goes; give it a moment.
	waitUntil(ctx, 3*time.Second, func() bool {
		entries, err = readTrace(ru.trace)
		if err != nil {
			return false
		}
		calls, final, problems, err = restoreCalls(entries, id)
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (calls: %s)", strings.Join(problems, "; "), describeCalls(calls))
	}
	if d := diffView(want.view(), final.view()); len(d) > 0 {
		return fmt.Errorf("after the restore the fresh session's config differs from the captured one: %s (calls: %s)", strings.Join(d, "; "), describeCalls(calls))
	}
	if len(calls) == 0 {
		return skipf("the fresh session already had every captured value; no restore calls to order")
	}
	r.note("restore calls %s: model → mode → options by id, each value offered by the catalog the agent reported just before", describeCalls(calls))
	return nil
}

func describeCalls(calls []ownCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, c.field+"="+c.value)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// restoreCalls reads the sidecar's own requests (ids "acp-sidecar:N") that
// follow the client's request resetID in the trace, up to its answer, and
// judges their order and values against the catalog the agent reported at
// each point.
func restoreCalls(entries []traceEntry, resetID string) ([]ownCall, *sessionConfig, []string, error) {
	start := -1
	for i, e := range entries {
		var f traceFrame
		if e.Dir == "client->agent" && e.From == "peer" && json.Unmarshal(e.Frame, &f) == nil && string(f.ID) == resetID && f.Method == "session/prompt" {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, nil, nil, errors.New("the trace does not show the /reset prompt")
	}
	var calls []ownCall
	var problems []string
	var cat *sessionConfig
	native := ""
	methodOf := map[string]string{}
	modeBy := map[string]bool{}
	ended := false
	for _, e := range entries[start+1:] {
		var f traceFrame
		if json.Unmarshal(e.Frame, &f) != nil {
			continue
		}
		var sid string
		_ = json.Unmarshal(f.ID, &sid)
		switch {
		case e.Dir == "agent->client" && e.From == "sidecar" && string(f.ID) == resetID:
			ended = true
		case e.Dir == "client->agent" && e.From == "sidecar" && strings.HasPrefix(sid, "acp-sidecar:") && f.Method != "":
			methodOf[sid] = f.Method
			var p struct {
				SessionID string `json:"sessionId"`
				ConfigID  string `json:"configId"`
				Value     string `json:"value"`
				ModeID    string `json:"modeId"`
				ModelID   string `json:"modelId"`
			}
			_ = json.Unmarshal(f.Params, &p)
			var call ownCall
			switch f.Method {
			case "session/new":
				continue
			case "session/set_config_option":
				call = ownCall{id: sid, method: f.Method, field: p.ConfigID, value: p.Value, rank: 2}
				var o *option
				if cat != nil {
					o = cat.byID(p.ConfigID)
				}
				switch {
				case o == nil:
					problems = append(problems, fmt.Sprintf("set %s=%s: the fresh session's catalog has no option %s", p.ConfigID, p.Value, p.ConfigID))
				case !slices.Contains(o.Values, p.Value):
					problems = append(problems, fmt.Sprintf("set %s=%s, a value the catalog the agent last reported does not offer (%s): the catalog was not re-read", p.ConfigID, p.Value, strings.Join(o.Values, "|")))
				}
				if o != nil && o.Category == "model" {
					call.rank = 0
				} else if o != nil && o.Category == "mode" {
					call.rank = 1
					modeBy["option"] = true
				}
			case "session/set_mode":
				call = ownCall{id: sid, method: f.Method, field: "set_mode", value: p.ModeID, rank: 1}
				modeBy["set_mode"] = true
				if cat == nil || cat.Modes == nil || !slices.Contains(cat.Modes.Values, p.ModeID) {
					problems = append(problems, fmt.Sprintf("set_mode %s: not an offered mode", p.ModeID))
				}
			case "session/set_model":
				call = ownCall{id: sid, method: f.Method, field: "set_model", value: p.ModelID, rank: 0}
				if cat == nil || cat.Models == nil || !slices.Contains(cat.Models.Values, p.ModelID) {
					problems = append(problems, fmt.Sprintf("set_model %s: not an offered model", p.ModelID))
				}
			default:
				continue
			}
			calls = append(calls, call)
		case e.Dir == "agent->client" && e.From == "peer" && f.Method == "" && strings.HasPrefix(sid, "acp-sidecar:"):
			if len(f.Error) > 0 {
				problems = append(problems, fmt.Sprintf("the agent refused the sidecar's %s: %s", methodOf[sid], oneLine(string(f.Error), 200)))
				continue
			}
			switch methodOf[sid] {
			case "session/new":
				var r struct {
					SessionID string `json:"sessionId"`
				}
				_ = json.Unmarshal(f.Result, &r)
				native, cat = r.SessionID, parseConfig(f.Result)
			case "session/set_config_option":
				var r struct {
					ConfigOptions json.RawMessage `json:"configOptions"`
				}
				if json.Unmarshal(f.Result, &r) == nil && cat != nil {
					if opts, ok := parseOptions(r.ConfigOptions); ok {
						cat.Options = opts
					}
				}
			case "session/set_mode":
				for _, c := range slices.Backward(calls) {
					if c.id == sid && cat != nil && cat.Modes != nil {
						cat.Modes.Current = c.value
					}
				}
			case "session/set_model":
				for _, c := range slices.Backward(calls) {
					if c.id == sid && cat != nil && cat.Models != nil {
						cat.Models.Current = c.value
					}
				}
			}
		case e.Dir == "agent->client" && e.From == "peer" && f.Method == "session/update" && cat != nil:
			var p configUpdate
			if json.Unmarshal(f.Params, &p) != nil || p.SessionID != native {
				continue
			}
			if opts, ok := parseOptions(p.Update.ConfigOptions); ok && p.Update.Kind == "config_option_update" {
				cat.Options = opts
			}
			if p.Update.Kind == "current_mode_update" && cat.Modes != nil {
				cat.Modes.Current = p.Update.CurrentModeID
			}
		}
		if ended {
			break
		}
	}
	if !ended {
		return nil, nil, nil, errors.New("the trace does not show the end of the /reset yet")
	}
	if cat == nil {
		return nil, nil, nil, errors.New("the trace shows no session/new of the sidecar's own after /reset")
	}
	if modeBy["option"] && modeBy["set_mode"] {
		problems = append(problems, "the mode was set twice, by set_mode and by the mode option")
	}
	for i := 1; i < len(calls); i++ {
		a, b := calls[i-1], calls[i]
		switch {
		case b.rank < a.rank:
			problems = append(problems, fmt.Sprintf("%s=%s came after %s=%s; the order must be model, then mode, then the other options", b.field, b.value, a.field, a.value))
		case a.rank == 2 && b.rank == 2 && b.field <= a.field:
			problems = append(problems, fmt.Sprintf("option %s came after %s; the other options go in ascending id order", b.field, a.field))
		}
	}
	return calls, cat, problems, nil
}

// ---- fail-closed

const notOffered = "acp-conformance-not-offered"

func checkFailClosed(ctx context.Context, r *checkRun, pr probeResult) error {
	if pr.cfg.empty() {
		return errNoConfig
	}
	target := ""
	switch {
	case pr.cfg.byCategory("model") != nil || pr.cfg.Models != nil:
		target = "model"
	case pr.cfg.byCategory("mode") != nil || pr.cfg.Modes != nil:
		target = "mode"
	default:
		target = pr.cfg.Options[0].ID
	}
	set := target + "=" + notOffered
	ru, sid, err := r.openSidecar(ctx, "--set", set)
	if err != nil {
		return err
	}
	var s shown
	found := waitUntil(ctx, 5*time.Second, func() bool {
		s, err = r.show(ctx, sid)
		if err != nil {
			return false
		}
		for _, e := range s.SetErrors {
			if strings.Contains(string(e.Value), notOffered) {
				r.note("show --json setErrors: {optionId %s, value %s, error %q}", e.OptionID, e.Value, e.Error)
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	if !found {
		b, _ := json.Marshal(s.SetErrors)
		return fmt.Errorf("`show %s --json` does not report --set %s in setErrors (setErrors: %s)", sid, set, b)
	}
	ru.c.settle(ctx, 200*time.Millisecond, time.Second)
	nudgeTrace(ctx, ru.c)
	entries, err := readTrace(ru.trace)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Dir == "client->agent" && strings.Contains(string(e.Frame), notOffered) {
			return fmt.Errorf("the value of --set %s reached the agent: %s", set, oneLine(string(e.Frame), 300))
		}
	}
	r.note("never sent to the agent (%d trace frames)", len(entries))
	return nil
}

// ---- rollback

const handoffHeader = "[acp-sidecar] What follows is the earlier conversation"

func checkRollback(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return err
	}
	c := ru.c
	if _, err := changeAll(ctx, c, sid, false, nil); err != nil {
		return err
	}
	want := c.configs.of(sid)
	for _, t := range []string{"Say OK. (conformance-turn-1)", "Say OK. (conformance-turn-2)"} {
		if _, err := promptOK(ctx, c, sid, t); err != nil {
			return err
		}
	}
	st0, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return err
	}
	msg, err := promptOK(ctx, c, sid, "/rewind")
	if err != nil {
		return err
	}
	st1, err := rebuiltStatus(ctx, c, sid, "/rewind", st0, want.view(), msg)
	if err != nil {
		return err
	}
	var ids []string
	var texts []string
	for _, t := range []string{"Say OK. (conformance-turn-3)", "Say OK. (conformance-turn-4)"} {
		id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": t}}})
		if err != nil {
			return err
		}
		mark := c.mark()
		if _, err := c.promptLine(ctx, sid, id, line); err != nil {
			return err
		}
		ids = append(ids, id)
		texts = append(texts, agentText(c.since(mark), sid))
	}
	nudgeTrace(ctx, c)
	var delivered [2][]string
	waitUntil(ctx, 3*time.Second, func() bool {
		entries, err := readTrace(ru.trace)
		if err != nil {
			return false
		}
		for i, id := range ids {
			delivered[i] = promptTexts(entries, id)
		}
		return delivered[0] != nil && delivered[1] != nil
	})
	if delivered[0] == nil || delivered[1] == nil {
		return errors.New("the trace does not show the prompts after /rewind reaching the agent")
	}
	first, second := delivered[0], delivered[1]
	if entries, err := readTrace(ru.trace); err == nil && nativeFork(entries) != "" {
		// The agent's own fork at the kept turn's message (rewind-native
		// checks it holds the right turns): nothing is handed over.
		for _, b := range append(first, second...) {
			if strings.HasPrefix(b, handoffHeader) {
				return errors.New("after a rewind by the agent's own fork at a message, a prompt carried a handoff: the fork holds the kept turns itself")
			}
		}
		r.note("native %s → %s, config held (%s), the agent's own fork at the kept turn's message, no handoff", st0.NativeSessionID, st1.NativeSessionID, formatView(st1.Live))
		return r.rollbackReply(texts[0], want)
	}
	if len(first) < 2 || !strings.HasPrefix(first[0], handoffHeader) {
		return fmt.Errorf("the first prompt after /rewind reached the agent without the handoff block (blocks: %q)", clipAll(first))
	}
	if !strings.Contains(first[0], "conformance-turn-1") || strings.Contains(first[0], "conformance-turn-2") {
		return fmt.Errorf("the handoff must hold the kept turn 1 and not the rewound turn 2: %q", oneLine(first[0], 400))
	}
	for _, b := range second {
		if strings.HasPrefix(b, handoffHeader) {
			return errors.New("the second prompt after /rewind carried the handoff again: it must be delivered once")
		}
	}
	r.note("native %s → %s, config held (%s), handoff delivered once with turn 1 and without turn 2", st0.NativeSessionID, st1.NativeSessionID, formatView(st1.Live))
	return r.rollbackReply(texts[0], want)
}

// rollbackReply checks the config a fake agent's reply to the first prompt
// after /rewind shows; other agents' replies say nothing of it.
func (r *checkRun) rollbackReply(text string, want *sessionConfig) error {
	if ok, d := replyMatches(text, want); ok {
		if len(d) > 0 {
			return fmt.Errorf("after /rewind the agent ran the prompt on a different config: %s", strings.Join(d, "; "))
		}
		r.note("the agent's reply line shows the same config")
	}
	return nil
}

func clipAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = oneLine(s, 80)
	}
	return out
}

// promptTexts returns the text blocks of the client's prompt id as it
// reached the agent (the sidecar's rewrite if there is one), or nil.
func promptTexts(entries []traceEntry, id string) []string {
	var got []string
	for _, e := range entries {
		if e.Dir != "client->agent" {
			continue
		}
		var f struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Prompt []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Frame, &f) != nil || string(f.ID) != id || f.Method != "session/prompt" {
			continue
		}
		texts := []string{}
		for _, b := range f.Params.Prompt {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		got = texts // a rewrite follows the frame it rewrites
	}
	return got
}

// ---- crash

func checkCrash(ctx context.Context, r *checkRun, pr probeResult) error {
	t, err := r.turnedSession(ctx)
	if err != nil {
		return err
	}
	ru, c, sid, want := t.ru, t.c, t.sid, t.want
	st0, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return err
	}
	kids, err := killAgent(ctx, ru)
	if err != nil {
		return err
	}
	r.note("killed the agent (pid %v)", kids)
	// The prompt goes at once: the sidecar holds it while the agent
	// restarts and the session is rebuilt, and the user never resends.
	text, err := promptOK(ctx, c, sid, "Say OK. (conformance-turn-2)")
	if err != nil {
		return fmt.Errorf("the first prompt after the agent was killed: %w", err)
	}
	st1, err := sidecarStatus(ctx, c, sid)
	if err != nil {
		return err
	}
	if d := diffView(want.view(), st1.Live); len(d) > 0 {
		return fmt.Errorf("after the crash `_sidecar/status` live differs from the config before: %s", strings.Join(d, "; "))
	}
	if !isNull(st1.Blocked) {
		return fmt.Errorf("after the crash the session is blocked: %s", st1.Blocked)
	}
	r.note("the prompt sent right after the kill waited and was answered; native %s (was %s), config held (%s)", st1.NativeSessionID, st0.NativeSessionID, formatView(st1.Live))
	if ok, d := replyMatches(text, want); ok {
		if len(d) > 0 {
			return fmt.Errorf("after the crash the agent ran the prompt on a different config: %s", strings.Join(d, "; "))
		}
		r.note("the agent's reply line shows the same config")
	}
	return nil
}

// ---- load

func checkLoad(ctx context.Context, r *checkRun, pr probeResult) error {
	t, err := r.turnedSession(ctx)
	if err != nil {
		return err
	}
	ru, c, sid, want := t.ru, t.c, t.sid, t.want
	answer1 := t.answer
	if err := c.rc.Kill(); err != nil {
		return fmt.Errorf("kill the sidecar: %w", err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return errors.New("the killed sidecar's output did not end")
	}
	// The same user restarts the editor: the agent keeps its home and cwd.
	ru2, err := r.sidecarIn(ctx, ru.world)
	if err != nil {
		return err
	}
	c2 := ru2.c
	if _, err := c2.initialize(ctx); err != nil {
		return err
	}
	mark := c2.mark()
	how := c2.dialect.withHistory()
	if _, err := c2.reopen(ctx, how, sid, ru2.cwd); err != nil {
		return fmt.Errorf("%s of %s after the sidecar restarted: %w", how.name, sid, err)
	}
	replay := c2.since(mark)
	user, agent := userText(replay, sid), agentText(replay, sid)
	if !strings.Contains(user, "conformance-turn-1") {
		return fmt.Errorf("%s replayed no user message with the earlier prompt (user text %q)", how.name, oneLine(user, 200))
	}
	if strings.TrimSpace(agent) == "" {
		return fmt.Errorf("%s replayed no agent message", how.name)
	}
	if err := sameMessage(c2, how, t.prompted, messages(replay, sid, "user")); err != nil {
		return err
	}
	if strings.TrimSpace(answer1) != "" && !strings.Contains(agent, strings.TrimSpace(answer1)) {
		r.note("the replayed answer differs from the one given (%q vs %q)", oneLine(agent, 80), oneLine(answer1, 80))
	}
	text, err := promptOK(ctx, c2, sid, "Say OK. (conformance-turn-2)")
	if err != nil {
		return fmt.Errorf("the first prompt after the %s: %w", how.name, err)
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("the first prompt after the %s got no agent text", how.name)
	}
	st, err := sidecarStatus(ctx, c2, sid)
	if err != nil {
		return err
	}
	if d := diffView(want.view(), st.Live); len(d) > 0 {
		return fmt.Errorf("after the %s `_sidecar/status` live differs from the config before: %s", how.name, strings.Join(d, "; "))
	}
	if how.method != "session/load" {
		r.note("reopened by %s", how.name)
	}
	r.note("replayed the turn (user and agent text), answered on native %s, config held (%s)", st.NativeSessionID, formatView(st.Live))
	return nil
}

// sameMessage checks, in v2, that a replay gave the user message the
// client got live (was) the messageId it had then: "If retained and
// replayed, the message keeps this identifier" (the v2 schema's
// PromptResponse.messageId), so a client can tell it is the message it
// has. v1 gives messages no identity to keep.
func sameMessage(c *conn, how reopen, was message, replay []message) error {
	if c.dialect.proto < protoV2 || was.id == "" {
		return nil
	}
	var got []string
	for _, m := range replay {
		if strings.Contains(m.text, was.text) {
			if m.id == was.id {
				return nil
			}
			got = append(got, m.id)
		}
	}
	ids := "no messageId"
	if len(got) > 0 {
		ids = "messageId " + strings.Join(got, ", ")
	}
	return fmt.Errorf("%s replayed the user message %q under %s, not %s, the one the client got live: a replayed message keeps its identifier in v2 (PromptResponse.messageId)",
		how.name, oneLine(was.text, 60), ids, was.id)
}

// nudgeTrace makes the sidecar flush its --trace before the check reads
// it. The relay records a frame when it reads it, but flushes the trace
// only after it has written what it decided, so a client can hold a
// frame's answer while the entry is still in the buffer; a `_sidecar/status`
// answered in the relay loop (-32602 for no session) flushed only after its
// own answer too, and a check under load read a trace without the agent's
// answer to its close. A `_sidecar/status` for a session nobody has is
// answered later, off the relay loop, and the relay flushes the trace
// before it writes such an answer (Relay.Hold): every frame read before it,
// the agent's answer the client already holds among them, is in the file
// once the client has it. It is no answer the check reads.
func nudgeTrace(ctx context.Context, c *conn) {
	_, _ = c.call(ctx, "_sidecar/status", map[string]any{"sessionId": "acp-conformance-trace-nudge"})
}

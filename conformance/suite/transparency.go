package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// probeMeta is the `_meta` the transparency exchange sends: a 20-digit
// integer, characters JSON encoders like to escape, and a decimal with a
// trailing zero, so a relay that re-encodes shows up.
const probeMeta = `{"acp-conformance":{"big":12345678901234567890,"html":"<&>\u00e9","fraction":1.50}}`

// sidecarCommands are the slash commands the sidecar merges into the
// agent's available_commands_update (README, "What you get in the editor").
var sidecarCommands = []string{"rewind", "reset", "restore-original", "accept-config", "sidecar-status"}

// exchange is what one run of the scripted exchange sent that the
// comparison needs.
type exchange struct {
	sid       string
	initLine  []byte
	metaLine  []byte
	metaID    string
	probeID   string
	probeRepl string
	// the cancel and the probe after it
	cancelLine []byte
	probeID2   string
	probeLine2 []byte
}

// script runs the exchange: initialize (with _meta), session/new, every
// option changed (and set_mode where the agent has legacy modes too), a
// prompt with _meta, an unknown `_x/probe` request, session/cancel, and a
// second prompt; then it waits for the agent to go quiet.
func script(ctx context.Context, ru *run, cwd string) (exchange, error) {
	var x exchange
	c := ru.c
	init := strings.TrimSuffix(string(initParams), "}") + `,"_meta":` + probeMeta + `}`
	id, line, err := c.request("initialize", json.RawMessage(init))
	if err != nil {
		return x, err
	}
	x.initLine = line
	if _, err := c.callLine(ctx, "initialize", id, line); err != nil {
		return x, err
	}
	if x.sid, err = newSession(ctx, c, cwd); err != nil {
		return x, err
	}
	sid := x.sid
	if _, err := changeAll(ctx, c, sid, false, nil); err != nil {
		return x, err
	}
	if cfg := c.config(sid); cfg.Modes != nil && cfg.byCategory("mode") != nil {
		if v, ok := nextValue(cfg.Modes.Values, cfg.Modes.Current); ok {
			if _, err := c.call(ctx, "session/set_mode", map[string]any{"sessionId": sid, "modeId": v}); err != nil && errCode(err) == 0 {
				return x, err
			}
		}
	}
	qsid, _ := json.Marshal(sid)
	params := `{"sessionId":` + string(qsid) + `,"prompt":[{"type":"text","text":"Say OK.","_meta":` + probeMeta + `}],"_meta":` + probeMeta + `}`
	if x.metaID, x.metaLine, err = c.request("session/prompt", json.RawMessage(params)); err != nil {
		return x, err
	}
	if _, err := c.callLine(ctx, "session/prompt", x.metaID, x.metaLine); err != nil {
		return x, err
	}
	id, line, err = c.request("_x/probe", json.RawMessage(`{"sessionId":`+string(qsid)+`,"_meta":`+probeMeta+`}`))
	if err != nil {
		return x, err
	}
	x.probeID = id
	if x.probeID2, x.probeLine2, err = c.request("_x/probe", json.RawMessage(`{"sessionId":`+string(qsid)+`}`)); err != nil {
		return x, err
	}
	res, err := c.callLine(ctx, "_x/probe", id, line)
	switch {
	case errCode(err) != 0:
		x.probeRepl = fmt.Sprintf("error %d", errCode(err))
	case err != nil:
		return x, err
	default:
		x.probeRepl = "result " + oneLine(string(res), 60)
	}
	if _, _, err := prompt(ctx, c, sid, "Say OK again."); err != nil {
		return x, err
	}
	// The cancel goes last, with no prompt running: a cancel racing a
	// prompt makes the agent's answer depend on timing. A second probe
	// follows it, so both runs end at the same point.
	x.cancelLine = []byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":` + string(qsid) + `}}`)
	if err := c.write(x.cancelLine); err != nil {
		return x, err
	}
	if _, err := c.callLine(ctx, "_x/probe", x.probeID2, x.probeLine2); err != nil && errCode(err) == 0 {
		return x, err
	}
	c.settle(ctx, 500*time.Millisecond, 5*time.Second)
	return x, nil
}

func checkTransparency(ctx context.Context, r *checkRun, pr probeResult) error {
	d, err := r.direct(ctx)
	if err != nil {
		return err
	}
	dx, err := script(ctx, d, d.cwd)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	d.c.close()
	v, err := r.sidecar(ctx)
	if err != nil {
		return err
	}
	vx, err := script(ctx, v, v.cwd)
	if err != nil {
		return fmt.Errorf("through the sidecar: %w", err)
	}

	var dInit map[string]any
	for _, l := range d.c.rawLines() {
		if m := decodeNorm(l, nil); m != nil && fmt.Sprint(m["id"]) == "1" {
			if res, ok := m["result"].(map[string]any); ok {
				dInit, _ = res["agentCapabilities"].(map[string]any)
			}
		}
	}
	nd := &normalizer{sid: dx.sid}
	nv := &normalizer{sid: vx.sid, sidecar: true, directCaps: dInit, own: map[string]bool{}, agentFirst: map[string]bool{}}
	dSeq, dCmds := nd.split(d.c.rawLines())
	vSeq, vCmds := nv.split(v.c.rawLines())
	if len(nv.problems) > 0 {
		return fmt.Errorf("%s", strings.Join(nv.problems, "; "))
	}
	slices.Sort(dCmds)
	slices.Sort(vCmds)
	if err := compareSeq("available_commands_update frames", dCmds, vCmds); err != nil {
		return err
	}
	if err := compareSeq("frames", dSeq, vSeq); err != nil {
		ds, vs := slices.Clone(dSeq), slices.Clone(vSeq)
		slices.Sort(ds)
		slices.Sort(vs)
		if !slices.Equal(ds, vs) {
			return err
		}
		r.note("the two runs ordered some frames differently (the agent's own timing); the same frames arrived")
	}
	if dx.probeRepl != vx.probeRepl {
		return fmt.Errorf("_x/probe: the agent answered %s directly, the client got %s through the sidecar", dx.probeRepl, vx.probeRepl)
	}
	entries, err := readTrace(v.trace)
	if err != nil {
		return err
	}
	for _, want := range []struct {
		what string
		id   string
		line []byte
	}{{"initialize", "1", vx.initLine}, {"the prompt", vx.metaID, vx.metaLine}, {"session/cancel", "", vx.cancelLine}} {
		reached, rewritten := false, false
		for _, e := range entries {
			if e.Dir != "client->agent" {
				continue
			}
			if e.From == "peer" && bytes.Equal(e.Frame, want.line) {
				reached = true
			}
			var f struct {
				ID json.RawMessage `json:"id"`
			}
			if e.From == "sidecar" && want.id != "" && json.Unmarshal(e.Frame, &f) == nil && string(f.ID) == want.id {
				rewritten = true
			}
		}
		if !reached || rewritten {
			return fmt.Errorf("%s did not reach the agent byte for byte (in the trace: %v, rewritten: %v)", want.what, reached, rewritten)
		}
	}
	r.note("%d frames and %d command lists equal after normalization; _x/probe answered %s both ways; initialize and the prompt with _meta and session/cancel reached the agent byte for byte; sidecar additions taken out: %s",
		len(dSeq), len(dCmds), vx.probeRepl, strings.Join(nv.adds, ", "))
	return nil
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	timeRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	usageRE = regexp.MustCompile(`"(used|amount|inputTokens|outputTokens|cachedReadTokens|cachedWriteTokens|thoughtTokens|totalTokens)":-?[0-9][0-9.eE+-]*`)
)

// normalizer rewrites what legitimately differs between two runs: the
// session id (<session>), other UUIDs, timestamps and usage numbers; and
// for the sidecar's run it takes out what the sidecar documents it adds:
// agentCapabilities._meta["acp-sidecar"], loadSession and
// sessionCapabilities.resume/list/fork/close/delete where the agent lacks them, its slash
// commands in available_commands_update, and its own command list after
// an open (session/new, load, resume, fork). Frames are then compared as canonical JSON (keys sorted,
// numbers as written).
type normalizer struct {
	sid        string
	sidecar    bool
	directCaps map[string]any
	own        map[string]bool
	agentFirst map[string]bool // sessions whose first command list was the agent's
	adds       []string
	problems   []string
}

func decodeNorm(raw []byte, n *normalizer) map[string]any {
	s := string(raw)
	if n != nil {
		if n.sid != "" {
			s = strings.ReplaceAll(s, n.sid, "<session>")
		}
		s = uuidRE.ReplaceAllString(s, "<uuid>")
		s = timeRE.ReplaceAllString(s, "<time>")
		s = usageRE.ReplaceAllString(s, `"$1":0`)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// split normalizes lines and separates the available_commands_update
// notifications, which agents send at no fixed point.
func (n *normalizer) split(lines [][]byte) (seq, cmds []string) {
	for _, l := range lines {
		m := decodeNorm(l, n)
		if m == nil {
			seq = append(seq, "unparsable: "+string(l))
			continue
		}
		isCmds := false
		if up := updateOf(m); up != nil && up["sessionUpdate"] == "available_commands_update" {
			isCmds = true
			if n.sidecar && !n.stripCommands(m, up) {
				continue
			}
		}
		if n.sidecar && fmt.Sprint(m["id"]) == "1" && m["method"] == nil {
			n.stripInit(m)
		}
		b, _ := json.Marshal(m)
		if isCmds {
			cmds = append(cmds, string(b))
		} else {
			seq = append(seq, string(b))
		}
	}
	return seq, cmds
}

func updateOf(m map[string]any) map[string]any {
	if m["method"] != "session/update" {
		return nil
	}
	p, _ := m["params"].(map[string]any)
	u, _ := p["update"].(map[string]any)
	return u
}

// stripCommands takes the sidecar's commands out of a command list and
// reports whether the frame stays (false: it was the sidecar's own list).
func (n *normalizer) stripCommands(m, up map[string]any) bool {
	list, _ := up["availableCommands"].([]any)
	var kept []any
	removed := 0
	for _, c := range list {
		cm, _ := c.(map[string]any)
		if name, _ := cm["name"].(string); slices.Contains(sidecarCommands, name) {
			removed++
			continue
		}
		kept = append(kept, c)
	}
	if kept == nil {
		kept = []any{}
	}
	up["availableCommands"] = kept
	sid := fmt.Sprint(m["params"].(map[string]any)["sessionId"])
	// Each list replaces the one before: the sidecar's own list may come
	// first and the agent's (with the sidecar's merged in) after it, or
	// the agent's alone, but never the sidecar's own after the agent's.
	if removed > 0 && len(kept) == 0 && !n.own[sid] {
		n.own[sid] = true
		if n.agentFirst[sid] {
			n.problems = append(n.problems, "the sidecar's own command list came after the agent's and replaced it")
		}
		n.adds = append(n.adds, "its own command list after session/new")
		return false
	}
	if removed > 0 {
		if removed != len(sidecarCommands) {
			n.problems = append(n.problems, fmt.Sprintf("an available_commands_update holds %d of the sidecar's %d commands", removed, len(sidecarCommands)))
		}
		if !n.own[sid] {
			n.agentFirst[sid] = true
		}
		n.adds = append(n.adds, "its commands merged into the agent's list")
	}
	return true
}

func (n *normalizer) stripInit(m map[string]any) {
	res, _ := m["result"].(map[string]any)
	caps, _ := res["agentCapabilities"].(map[string]any)
	if caps == nil {
		return
	}
	dcaps := n.directCaps
	if dcaps == nil {
		dcaps = map[string]any{}
	}
	if meta, ok := caps["_meta"].(map[string]any); ok {
		if _, ok := meta["acp-sidecar"]; ok {
			delete(meta, "acp-sidecar")
			n.adds = append(n.adds, `_meta["acp-sidecar"]`)
		}
		if _, had := dcaps["_meta"]; len(meta) == 0 && !had {
			delete(caps, "_meta")
		}
	}
	if dcaps["loadSession"] != true && caps["loadSession"] == true {
		n.adds = append(n.adds, "loadSession")
		if d, ok := dcaps["loadSession"]; ok {
			caps["loadSession"] = d
		} else {
			delete(caps, "loadSession")
		}
	}
	sc, _ := caps["sessionCapabilities"].(map[string]any)
	dsc, _ := dcaps["sessionCapabilities"].(map[string]any)
	for _, k := range []string{"resume", "list", "fork", "close", "delete"} {
		if _, had := dsc[k]; !had && sc != nil {
			if _, ok := sc[k]; ok {
				delete(sc, k)
				n.adds = append(n.adds, "sessionCapabilities."+k)
			}
		}
	}
	if _, had := dcaps["sessionCapabilities"]; sc != nil && len(sc) == 0 && !had {
		delete(caps, "sessionCapabilities")
	}
}

// compareSeq reports the first difference between two normalized
// sequences.
func compareSeq(what string, direct, via []string) error {
	if slices.Equal(direct, via) {
		return nil
	}
	for i := range max(len(direct), len(via)) {
		if i >= len(direct) || i >= len(via) {
			extra := slices.Concat(direct[min(i, len(direct)):], via[min(i, len(via)):])[0]
			return fmt.Errorf("%s: %d directly, %d through the sidecar; first extra: %s", what, len(direct), len(via), clip(extra, 0))
		}
		if a, b := direct[i], via[i]; a != b {
			off := 0
			for off < len(a) && off < len(b) && a[off] == b[off] {
				off++
			}
			return fmt.Errorf("%s differ at #%d, byte %d: direct %s; through the sidecar %s", what, i, off, clip(a, off), clip(b, off))
		}
	}
	return nil
}

func clip(s string, off int) string {
	lo, hi := max(0, off-100), min(len(s), off+150)
	return "…" + s[lo:hi] + "…"
}

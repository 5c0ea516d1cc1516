package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	// setMode: the exchange sent session/set_mode (the agent has legacy
	// modes and a mode option).
	setMode bool
}

// script runs the exchange: initialize (with _meta), session/new, every
// option changed (and set_mode where the agent has legacy modes too), a
// prompt with _meta, an unknown `_x/probe` request, session/cancel, and a
// second prompt; then it waits for the agent to go quiet. Through the
// sidecar, like is the direct run's exchange, and the calls that depend on
// what the session offers are made as they were there: the sidecar shows
// the client pickers the agent's results lack (legacy modes built from a
// mode option), and the two runs must send the same frames.
func script(ctx context.Context, ru *run, cwd string, like *exchange) (exchange, error) {
	var x exchange
	c := ru.c
	id, line, err := c.request("initialize", c.dialect.initParams(probeMeta))
	if err != nil {
		return x, err
	}
	x.initLine = line
	res, err := c.callLine(ctx, "initialize", id, line)
	if err != nil {
		return x, err
	}
	if err := c.dialect.answeredVersion(res); err != nil {
		return x, err
	}
	if x.sid, err = newSession(ctx, c, cwd); err != nil {
		return x, err
	}
	sid := x.sid
	if _, err := changeAll(ctx, c, sid, false, nil); err != nil {
		return x, err
	}
	cfg := c.configs.of(sid)
	x.setMode = cfg.Modes != nil && cfg.byCategory("mode") != nil
	if like != nil {
		x.setMode = like.setMode
	}
	if x.setMode {
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
	if _, err := c.promptLine(ctx, sid, x.metaID, x.metaLine); err != nil {
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
	res, err = c.callLine(ctx, "_x/probe", id, line)
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
	dx, err := script(ctx, d, d.cwd, nil)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	d.c.close()
	v, err := r.sidecar(ctx)
	if err != nil {
		return err
	}
	vx, err := script(ctx, v, v.cwd, &dx)
	if err != nil {
		return fmt.Errorf("through the sidecar: %w", err)
	}

	var dInit map[string]any
	for _, l := range d.c.rawLines() {
		if m := decodeFrame(l); m != nil && fmt.Sprint(m["id"]) == "1" {
			if res, ok := m["result"].(map[string]any); ok {
				dInit, _ = res[capsKey(d.c.dialect.proto)].(map[string]any)
			}
		}
	}
	nd := newNormalizer(d.world.root, false, nil)
	nv := newNormalizer(v.world.root, true, dInit)
	nv.proto = v.c.dialect.proto
	nv.directPickers = pickersIn(d.c.rawLines())
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

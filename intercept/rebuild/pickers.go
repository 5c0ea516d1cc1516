package rebuild

import (
	"encoding/json"
	"slices"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// A client that reads only the legacy `modes` or `models` shows no picker
// when a session/load or session/resume result lacks them, though the
// agent's session/new result had them (codex-acp's resume carries
// configOptions and no modes; Emacs agent-shell then shows no modes). The
// result the client sees gets them back, from what the agent reported for
// this session, with the current value the agent accepted last. Nothing is
// added that the agent never offered for the session, and no current value
// it did not report.

// WithPickers completes an open's result for the client: completePickers,
// then the dialect bridge.
func (b *Rebuilder) WithPickers(result json.RawMessage, recorded, now *state.Config) json.RawMessage {
	return b.Bridge(completePickers(b.version(), result, recorded, now))
}

// Bridge adds the pickers the client's dialect lacks to a session result
// (wire.Bridge), unless --pickers=off or the connection speaks v2. Only
// the client sees them: the record keeps the agent's own words.
func (b *Rebuilder) Bridge(result json.RawMessage) json.RawMessage {
	if b.cfg.NoPickers || b.version() >= wire.V2 {
		return result // v2 has config options only: no other dialect to bridge to
	}
	init, _ := b.life.Params()
	return wire.Bridge(result, wire.ReadsOptions(init))
}

// completePickers completes an open's result: the legacy modes and models, and
// configOptions, each where the result lacks it and the session had it.
// recorded is the session's config before the open, now the config after
// the sidecar's restore (or the result's own when nothing was restored).
// Where the result has a picker, its current value is set to now's when the
// agent offers that value in it. In v2 there are no legacy pickers, and an
// option recorded in v1 is named as v2 names it (wire.OptionIn).
func completePickers(v wire.Version, result json.RawMessage, recorded, now *state.Config) json.RawMessage {
	if now == nil {
		now = &state.Config{}
	}
	if recorded == nil {
		recorded = &state.Config{}
	}
	var p wire.ConfigPayload
	if json.Unmarshal(result, &p) != nil {
		return result // not an object: nothing to complete
	}
	out := result
	set := func(val []byte, path ...string) {
		if next, err := wire.SetPath(out, val, path...); err == nil {
			out = next
		}
	}
	legacy := []struct {
		field, currentKey, category string
		have                        json.RawMessage
		parse                       func(json.RawMessage) *state.Legacy
		now, recorded               *state.Legacy
	}{
		{"modes", "currentModeId", replay.FieldMode, p.Modes, wire.ParseModes, now.Mode, recorded.Mode},
		{"models", "currentModelId", replay.FieldModel, p.Models, wire.ParseModels, now.Model, recorded.Model},
	}
	if v >= wire.V2 {
		legacy = nil // v2 has config options only
	}
	for _, pk := range legacy {
		cur := currentOf(now, pk.category, pk.now)
		if !wire.IsNull(pk.have) {
			if l := pk.parse(pk.have); l != nil && cur != "" && slices.Contains(l.Available, cur) {
				set(wire.String(cur), pk.field, pk.currentKey)
			}
			continue
		}
		src := pk.now
		if src == nil || len(src.Raw) == 0 {
			src = pk.recorded
		}
		if src == nil || len(src.Raw) == 0 || cur == "" || !slices.Contains(src.Available, cur) {
			continue // never offered for this session, or no current value the agent reported
		}
		picker, err := wire.SetPath(src.Raw, wire.String(cur), pk.currentKey)
		if err != nil {
			continue
		}
		set(picker, pk.field)
	}
	if wire.IsNull(p.ConfigOptions) && len(now.Options) > 0 {
		list := make([]json.RawMessage, 0, len(now.Options))
		for _, o := range now.Options {
			raw := wire.OptionIn(v, o.Raw, o.ID)
			if len(o.Current) > 0 {
				if next, err := wire.SetPath(raw, o.Current, "currentValue"); err == nil {
					raw = next
				}
			}
			list = append(list, raw)
		}
		set(wire.Encode(list), "configOptions")
	}
	return out
}

// currentOf is the session's current mode or model in now: the option of
// that category where the agent reports one, else the legacy picker's.
func currentOf(now *state.Config, category string, legacy *state.Legacy) string {
	if o := now.ByCategory(category); o != nil {
		var v string
		if json.Unmarshal(o.Current, &v) == nil && v != "" {
			return v
		}
	}
	if legacy != nil {
		return legacy.Current
	}
	return ""
}

// ReopenResult is the result of a load or resume the sidecar answered on
// the native session a's plan ended on: the agent's newest full option
// list, and the pickers with the values it accepted in the restore.
func (b *Rebuilder) ReopenResult(a *Attempt) json.RawMessage {
	out, catalog := a.Out, a.Catalog
	result := map[string]any{}
	if out.OptionsRaw != nil {
		result["configOptions"] = out.OptionsRaw
	} else if catalog != nil && len(catalog.Raw) > 0 {
		var p wire.ConfigPayload
		if json.Unmarshal(catalog.Raw, &p) == nil && p.ConfigOptions != nil {
			result["configOptions"] = p.ConfigOptions
		}
	}
	return b.WithPickers(wire.Encode(result), a.Snap.Live, out.Catalog)
}

// notifications are the restore's own report of where the config settled
// (Outcome.notifications), and, for a client shown modes the agent offers
// only as an option (Bridge), the legacy report of the mode: the agent's
// own reports of the restore's calls name interim values, and the last
// word must be the settled one, in the words the client reads.
func (b *Rebuilder) notifications(out Outcome, sid string) [][]byte {
	v2 := b.version() >= wire.V2 // config options are all v2 has
	lines := out.notifications(sid, !v2)
	if v2 || b.cfg.NoPickers || out.Catalog == nil || out.Catalog.Mode != nil || !b.life.WithoutLegacyModes() {
		return lines
	}
	if init, _ := b.life.Params(); wire.ReadsOptions(init) {
		return lines
	}
	if o := out.Catalog.ByCategory("mode"); o != nil {
		if cur := wire.Unquote(o.Current); cur != "" {
			lines = append(lines, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": cur}))
		}
	}
	return lines
}

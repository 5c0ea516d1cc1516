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

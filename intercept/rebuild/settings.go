package rebuild

import (
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// settingsTarget turns the start-up settings into a restore target over the
// fresh session's config. A setting the agent has no field for is an error
// straight away; a value it does not offer is left to the planner, which
// never sends it.
func settingsTarget(live *state.Config, settings []record.Setting) (*state.Config, []state.SetError) {
	target := record.CloneConfig(live)
	if target == nil {
		target = &state.Config{}
	}
	var errs []state.SetError
	for _, s := range settings {
		val := wire.String(s.Value)
		switch s.ID {
		case replay.FieldModel, replay.FieldMode:
			legacy := target.Mode
			if s.ID == replay.FieldModel {
				legacy = target.Model
			}
			o := target.ByCategory(s.ID)
			switch {
			case o != nil:
				o.Current = val
			case legacy != nil:
				legacy.Current = s.Value
			default:
				errs = append(errs, state.SetError{OptionID: s.ID, Value: s.Value, Err: "the agent has no " + s.ID + " setting"})
			}
			continue
		}
		o := target.Option(s.ID)
		if o == nil {
			errs = append(errs, state.SetError{OptionID: s.ID, Value: s.Value, Err: "the agent has no option with this id"})
			continue
		}
		if o.Type == "boolean" && (s.Value == "true" || s.Value == "false") {
			val = json.RawMessage(s.Value)
		}
		o.Current = val
	}
	return target, errs
}

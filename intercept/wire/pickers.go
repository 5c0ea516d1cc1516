package wire

import (
	"encoding/json"
)

// ACP has two dialects for a session's model and mode pickers: the legacy
// `modes` and `models` (set_mode, set_model), and `configOptions` with a
// category of "mode" or "model" (set_config_option). Clients and agents
// each speak one or both, and a pair that shares none shows no picker:
// Emacs agent-shell reads only the legacy pickers, and codex-acp 2.6.0
// offers its model only as an option. The sidecar translates a session
// result for the client's dialect (Bridge); each change is then carried
// out in the agent's (rebuild.Translate). The spec lets a result carry
// both: a client that reads configOptions ignores `modes`.

// BridgedID is the id of an option the sidecar builds from a legacy picker,
// for an agent that has no configOptions: "mode" or "model", its category.
// An agent without configOptions has no option to collide with.
const (
	BridgedMode  = "mode"
	BridgedModel = "model"
)

// ReadsOptions says whether a client's initialize params show that it
// reads configOptions: it declares clientCapabilities.session.configOptions.
func ReadsOptions(initParams json.RawMessage) bool {
	var p struct {
		ClientCapabilities struct {
			Session struct {
				ConfigOptions json.RawMessage `json:"configOptions"`
			} `json:"session"`
		} `json:"clientCapabilities"`
	}
	return json.Unmarshal(initParams, &p) == nil && !IsNull(p.ClientCapabilities.Session.ConfigOptions)
}

// Bridge adds to a session result the pickers the client's dialect lacks:
// for a client that does not read configOptions, legacy `modes` and
// `models` from the options of those categories; for one that does,
// `configOptions` from the legacy pickers. Nothing the result has is
// changed, and a result that is not an object is returned as it is.
func Bridge(result json.RawMessage, readsOptions bool) json.RawMessage {
	var p ConfigPayload
	if json.Unmarshal(result, &p) != nil {
		return result
	}
	out := result
	set := func(val []byte, key string) {
		if next, err := SetPath(out, val, key); err == nil {
			out = next
		}
	}
	if readsOptions {
		if !IsNull(p.ConfigOptions) {
			return result
		}
		var list []json.RawMessage
		if o := optionFromModes(p.Modes); o != nil {
			list = append(list, o)
		}
		if o := optionFromModels(p.Models); o != nil {
			list = append(list, o)
		}
		if len(list) > 0 {
			set(Encode(list), "configOptions")
		}
		return out
	}
	if !IsNull(p.Modes) && !IsNull(p.Models) {
		return result
	}
	var opts []bridgeOption
	if json.Unmarshal(p.ConfigOptions, &opts) != nil {
		return result
	}
	for _, o := range opts {
		switch {
		case o.Category == "mode" && IsNull(p.Modes) && o.Type == "select":
			if m := o.modes(); m != nil {
				set(m, "modes")
				p.Modes = m
			}
		case o.Category == "model" && IsNull(p.Models) && o.Type == "select":
			if m := o.models(); m != nil {
				set(m, "models")
				p.Models = m
			}
		}
	}
	return out
}

// LegacyChange is the legacy report of an option change for a client that
// does not read configOptions: current_mode_update when option o (raw, as
// the agent reported it) is a mode, else nil. ACP has no legacy report of
// a model change.
func LegacyChange(sid string, o json.RawMessage) []byte {
	var opt bridgeOption
	if json.Unmarshal(o, &opt) != nil || opt.Category != "mode" {
		return nil
	}
	var cur string
	if json.Unmarshal(opt.CurrentValue, &cur) != nil || cur == "" {
		return nil
	}
	return SessionUpdate(sid, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": cur})
}

// BridgedOptions is the set_config_option result for an agent without
// configOptions: the options Bridge builds from its legacy pickers.
func BridgedOptions(modes, models json.RawMessage) []byte {
	list := []json.RawMessage{}
	if o := optionFromModes(modes); o != nil {
		list = append(list, o)
	}
	if o := optionFromModels(models); o != nil {
		list = append(list, o)
	}
	return Encode(map[string]any{"configOptions": list})
}

// bridgeOption is what Bridge reads of a select option.
type bridgeOption struct {
	ID           string          `json:"id"`
	Category     string          `json:"category"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      json.RawMessage `json:"options"`
}

// choice is one value a select option offers; a group holds more of them.
type choice struct {
	Value       json.RawMessage `json:"value"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Options     []choice        `json:"options"` // a group's
}

// choices flattens the option's values and groups, in order.
func (o bridgeOption) choices() []choice {
	var top []choice
	if json.Unmarshal(o.Options, &top) != nil {
		return nil
	}
	var out []choice
	var walk func([]choice)
	walk = func(cs []choice) {
		for _, c := range cs {
			if len(c.Options) > 0 {
				walk(c.Options)
				continue
			}
			var v string
			if json.Unmarshal(c.Value, &v) == nil && v != "" {
				out = append(out, c)
			}
		}
	}
	walk(top)
	return out
}

func (o bridgeOption) current() (string, bool) {
	var cur string
	return cur, json.Unmarshal(o.CurrentValue, &cur) == nil && cur != ""
}

// modes is the legacy `modes` the option stands for, nil if it offers none.
func (o bridgeOption) modes() json.RawMessage {
	cur, ok := o.current()
	cs := o.choices()
	if !ok || len(cs) == 0 {
		return nil
	}
	type mode struct {
		ID          string  `json:"id"`
		Name        string  `json:"name"`
		Description *string `json:"description,omitempty"`
	}
	avail := make([]mode, 0, len(cs))
	for _, c := range cs {
		avail = append(avail, mode{ID: Unquote(c.Value), Name: nameOr(c), Description: c.Description})
	}
	return Encode(map[string]any{"currentModeId": cur, "availableModes": avail})
}

// models is the legacy `models` the option stands for, nil if it offers
// none.
func (o bridgeOption) models() json.RawMessage {
	cur, ok := o.current()
	cs := o.choices()
	if !ok || len(cs) == 0 {
		return nil
	}
	type model struct {
		ModelID     string  `json:"modelId"`
		Name        string  `json:"name"`
		Description *string `json:"description,omitempty"`
	}
	avail := make([]model, 0, len(cs))
	for _, c := range cs {
		avail = append(avail, model{ModelID: Unquote(c.Value), Name: nameOr(c), Description: c.Description})
	}
	return Encode(map[string]any{"currentModelId": cur, "availableModels": avail})
}

func nameOr(c choice) string {
	if c.Name != "" {
		return c.Name
	}
	return Unquote(c.Value)
}

// bridged is a select option built from a legacy picker.
type bridged struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Category     string          `json:"category"`
	Type         string          `json:"type"`
	CurrentValue string          `json:"currentValue"`
	Options      []bridgedChoice `json:"options"`
}

type bridgedChoice struct {
	Value       string  `json:"value"`
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
}

// optionFromModes is the select option for legacy `modes`, nil for none.
func optionFromModes(raw json.RawMessage) json.RawMessage {
	if IsNull(raw) {
		return nil
	}
	var m struct {
		Current string `json:"currentModeId"`
		Modes   []struct {
			ID          string  `json:"id"`
			Name        string  `json:"name"`
			Description *string `json:"description"`
		} `json:"availableModes"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Current == "" || len(m.Modes) == 0 {
		return nil
	}
	o := bridged{ID: BridgedMode, Name: "Mode", Category: "mode", Type: "select", CurrentValue: m.Current}
	for _, x := range m.Modes {
		o.Options = append(o.Options, bridgedChoice{Value: x.ID, Name: x.Name, Description: x.Description})
	}
	return Encode(o)
}

// optionFromModels is the select option for legacy `models`, nil for none.
func optionFromModels(raw json.RawMessage) json.RawMessage {
	if IsNull(raw) {
		return nil
	}
	var m struct {
		Current string `json:"currentModelId"`
		Models  []struct {
			ID          string  `json:"modelId"`
			Name        string  `json:"name"`
			Description *string `json:"description"`
		} `json:"availableModels"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Current == "" || len(m.Models) == 0 {
		return nil
	}
	o := bridged{ID: BridgedModel, Name: "Model", Category: "model", Type: "select", CurrentValue: m.Current}
	for _, x := range m.Models {
		o.Options = append(o.Options, bridgedChoice{Value: x.ID, Name: x.Name, Description: x.Description})
	}
	return Encode(o)
}

package fakeagent

import (
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Option ids and values of the fake agent's config catalog. They are exported
// so tests name them instead of repeating string literals.
const (
	OptionModel     = "model"     // category model
	OptionMode      = "mode"      // category mode
	OptionEffort    = "effort"    // category thought_level; model-dependent in some profiles
	OptionVerbosity = "verbosity" // no category: an "other" option

	ModelFast  = "fast-1"  // no effort option (model-dependent profiles)
	ModelSmart = "smart-2" // effort low|medium|high, default medium
	ModelDeep  = "deep-3"  // effort medium|high|max, default high

	DefaultModel     = ModelSmart
	DefaultMode      = "code"
	DefaultVerbosity = "normal"
)

// modelSpec is one model in the catalog. efforts is nil for a model that has
// no effort option when the profile is model-dependent.
type modelSpec struct {
	id, name      string
	efforts       []string
	defaultEffort string
}

func modelCatalog() []modelSpec {
	return []modelSpec{
		{ModelFast, "Fast 1", nil, ""},
		{ModelSmart, "Smart 2", []string{"low", "medium", "high"}, "medium"},
		{ModelDeep, "Deep 3", []string{"medium", "high", "max"}, "high"},
	}
}

// staticEfforts are the effort values every model has when the profile is not
// model-dependent.
func staticEfforts() ([]string, string) { return []string{"low", "medium", "high"}, "medium" }

func modeValues() []string      { return []string{"ask", "code", "plan"} }
func verbosityValues() []string { return []string{"terse", "normal", "verbose"} }

// settings is the one underlying state that set_mode, set_config_option and
// set_model all change. Effort is "" while the model has no effort option.
type settings struct {
	Model, Mode, Effort, Verbosity string
}

// catalog renders settings into the ACP surfaces the profile exposes and
// applies changes to them.
type catalog struct {
	f             Features
	acceptUnknown bool
	defaultModel  string
	defaultMode   string
}

func (c *catalog) efforts(model string) ([]string, string) {
	if !c.f.ModelDependent {
		return staticEfforts()
	}
	for _, m := range modelCatalog() {
		if m.id == model {
			return m.efforts, m.defaultEffort
		}
	}
	return nil, "" // an unknown model accepted with -accept-unknown has no effort
}

// fresh is the configuration of a new session (and of a loaded or resumed one
// unless -load-keeps-config): real agents go back to their defaults there.
func (c *catalog) fresh() settings {
	_, eff := c.efforts(c.defaultModel)
	return settings{Model: c.defaultModel, Mode: c.defaultMode, Effort: eff, Verbosity: DefaultVerbosity}
}

func title(v string) string {
	if v == "" {
		return v
	}
	return strings.ToUpper(v[:1]) + v[1:]
}

func selectOption(id, name string, cat acp.SessionConfigOptionCategory, current string, values [][2]string) acp.SessionConfigOption {
	opts := make(acp.SessionConfigSelectOptionsUngrouped, 0, len(values))
	for _, v := range values {
		opts = append(opts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(v[0]), Name: v[1]})
	}
	sel := &acp.SessionConfigOptionSelect{
		Id:           acp.SessionConfigId(id),
		Name:         name,
		CurrentValue: acp.SessionConfigValueId(current),
		Options:      acp.SessionConfigSelectOptions{Ungrouped: &opts},
		Type:         "select",
	}
	if cat != "" {
		sel.Category = &cat
	}
	return acp.SessionConfigOption{Select: sel}
}

func named(values []string) [][2]string {
	out := make([][2]string, len(values))
	for i, v := range values {
		out[i] = [2]string{v, title(v)}
	}
	return out
}

// options is the full configOptions list, in the order model, effort (when
// the model has one), mode, verbosity.
func (c *catalog) options(s settings) []acp.SessionConfigOption {
	var models [][2]string
	for _, m := range modelCatalog() {
		models = append(models, [2]string{m.id, m.name})
	}
	out := []acp.SessionConfigOption{selectOption(OptionModel, "Model", acp.SessionConfigOptionCategoryModel, s.Model, models)}
	if eff, _ := c.efforts(s.Model); eff != nil {
		out = append(out, selectOption(OptionEffort, "Effort", acp.SessionConfigOptionCategoryThoughtLevel, s.Effort, named(eff)))
	}
	out = append(out,
		selectOption(OptionMode, "Mode", acp.SessionConfigOptionCategoryMode, s.Mode, named(modeValues())),
		selectOption(OptionVerbosity, "Verbosity", "", s.Verbosity, named(verbosityValues())))
	return out
}

// surfaces fills the three config surfaces of a session result as the profile
// exposes them; absent surfaces stay nil and are omitted on the wire.
func (c *catalog) surfaces(s settings) ([]acp.SessionConfigOption, *acp.SessionModeState, *acp.SessionModelState) {
	var opts []acp.SessionConfigOption
	var modes *acp.SessionModeState
	var models *acp.SessionModelState
	if c.f.ConfigOptions {
		opts = c.options(s)
	}
	if c.f.LegacyModes {
		ms := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(s.Mode)}
		for _, m := range modeValues() {
			ms.AvailableModes = append(ms.AvailableModes, acp.SessionMode{Id: acp.SessionModeId(m), Name: title(m)})
		}
		modes = ms
	}
	if c.f.LegacyModels {
		ms := &acp.SessionModelState{CurrentModelId: acp.ModelId(c.legacyModel(s))}
		for _, m := range modelCatalog() {
			eff, _ := c.efforts(m.id)
			if !c.f.EffortModels || eff == nil {
				ms.AvailableModels = append(ms.AvailableModels, acp.ModelInfo{ModelId: acp.ModelId(m.id), Name: m.name})
				continue
			}
			for _, e := range eff {
				ms.AvailableModels = append(ms.AvailableModels, acp.ModelInfo{ModelId: acp.ModelId(m.id + "[" + e + "]"), Name: m.name + " (" + e + ")"})
			}
		}
		models = ms
	}
	return opts, modes, models
}

// invalid is the -32602 answer for a value or option the catalog does not
// have. The message names the field, as the sidecar's own errors must.
func invalid(field, value, why string) *acp.RequestError {
	return &acp.RequestError{
		Code:    -32602,
		Message: fmt.Sprintf("Invalid params: %s %q: %s", field, value, why),
		Data:    map[string]any{"field": field, "value": value},
	}
}

func (c *catalog) checkValue(field, value string, allowed []string) error {
	if slices.Contains(allowed, value) || c.acceptUnknown {
		return nil
	}
	return invalid(field, value, "not one of "+strings.Join(allowed, ", "))
}

func (c *catalog) withModel(s settings, model string) (settings, error) {
	var ids []string
	for _, m := range modelCatalog() {
		ids = append(ids, m.id)
	}
	if err := c.checkValue(OptionModel, model, ids); err != nil {
		return s, err
	}
	s.Model = model
	// Like opencode: an effort the new model also offers is kept, otherwise
	// the new model's default applies (or none, if it has no effort).
	eff, def := c.efforts(model)
	if !slices.Contains(eff, s.Effort) {
		s.Effort = def
	}
	return s, nil
}

// legacyModel is the legacy model id of s: under -effort-models the model
// with its effort, as codex-acp 2.6.0 names it.
func (c *catalog) legacyModel(s settings) string {
	if c.f.EffortModels && s.Effort != "" {
		return s.Model + "[" + s.Effort + "]"
	}
	return s.Model
}

// withLegacyModel applies session/set_model: under -effort-models an id
// "model[effort]" sets both.
func (c *catalog) withLegacyModel(s settings, id string) (settings, error) {
	model, effort, ok := strings.Cut(id, "[")
	if !c.f.EffortModels || !ok || !strings.HasSuffix(effort, "]") {
		return c.withModel(s, id)
	}
	next, err := c.withModel(s, model)
	if err != nil {
		return s, err
	}
	return c.withOption(next, OptionEffort, strings.TrimSuffix(effort, "]"))
}

func (c *catalog) withMode(s settings, mode string) (settings, error) {
	if err := c.checkValue(OptionMode, mode, modeValues()); err != nil {
		return s, err
	}
	s.Mode = mode
	return s, nil
}

// withOption applies session/set_config_option. Unknown option ids are
// rejected even with -accept-unknown, which only relaxes values.
func (c *catalog) withOption(s settings, id, value string) (settings, error) {
	switch id {
	case OptionModel:
		return c.withModel(s, value)
	case OptionMode:
		return c.withMode(s, value)
	case OptionEffort:
		eff, _ := c.efforts(s.Model)
		if eff == nil {
			return s, invalid("configId", id, "model "+s.Model+" has no effort option")
		}
		if err := c.checkValue(OptionEffort, value, eff); err != nil {
			return s, err
		}
		s.Effort = value
		return s, nil
	case OptionVerbosity:
		if err := c.checkValue(OptionVerbosity, value, verbosityValues()); err != nil {
			return s, err
		}
		s.Verbosity = value
		return s, nil
	}
	return s, invalid("configId", id, "unknown config option")
}

// dependentChanged reports whether a model change altered another option
// (effort appeared, disappeared, changed values or value), which is when
// agents like opencode announce the new list with config_option_update.
func (c *catalog) dependentChanged(before, after settings) bool {
	b, _ := c.efforts(before.Model)
	a, _ := c.efforts(after.Model)
	return !slices.Equal(a, b) || (a == nil) != (b == nil) || before.Effort != after.Effort
}

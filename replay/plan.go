package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The fields a restore names: the model, the mode, and each other option by
// its id.
const (
	FieldModel = "model"
	FieldMode  = "mode"
)

// The methods a step calls.
const (
	MethodSetConfigOption = "session/set_config_option"
	MethodSetMode         = "session/set_mode"
	MethodSetModel        = "session/set_model"
)

// Step is one call that moves a session's config toward its target.
type Step struct {
	// Field is what the step restores: FieldModel, FieldMode or an option id.
	Field string `json:"field"`
	// Method is the ACP method to call.
	Method string `json:"method"`
	// OptionID is the option to set, for session/set_config_option.
	OptionID string `json:"optionId,omitempty"`
	// Value is the value to send: an option's value as JSON, or a mode or
	// model id as a JSON string.
	Value json.RawMessage `json:"value"`
}

// String renders the step the way a log or a test reads it.
func (s Step) String() string {
	if s.OptionID != "" {
		return fmt.Sprintf("%s %s=%s", s.Method, s.OptionID, s.Value)
	}
	return fmt.Sprintf("%s %s", s.Method, s.Value)
}

// FieldError names one field that cannot be restored, and why.
type FieldError struct {
	Field  string          `json:"field"`
	Want   json.RawMessage `json:"want,omitempty"`
	Reason string          `json:"reason"`
}

// RestoreError lists every field a plan cannot restore. A restore that meets
// one fails closed (DESIGN.md "Fail closed").
type RestoreError struct {
	Fields []FieldError
}

func (e *RestoreError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = fmt.Sprintf("%s=%s: %s", f.Field, f.Want, f.Reason)
	}
	return "cannot restore " + strings.Join(parts, "; ")
}

// Names lists the fields that failed.
func (e *RestoreError) Names() []string {
	out := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f.Field
	}
	return out
}

// Next decides the next step that moves catalog toward target, in the order
// DESIGN.md fixes: the model, then the mode, then every other option in
// ascending id order. done holds the fields already handled (restored,
// skipped or failed) and is never changed. ok is false when nothing is left.
//
// Each value is checked against catalog, the newest the agent reported:
// agents accept unknown ids silently, so a value the catalog does not offer
// is a *FieldError, never a step. A field already at its target needs no call
// and is reported as ok with a zero Step (Method ""), so the caller marks it
// done and asks again. The catalog is authoritative for what is offered; it
// never changes what the target is.
func Next(target, catalog *state.Config, done map[string]bool) (step Step, fe *FieldError, ok bool) {
	for _, field := range fields(target) {
		if done[field] {
			continue
		}
		step, fe := stepFor(field, target, catalog)
		return step, fe, true
	}
	return Step{}, nil, false
}

// Plan runs Next to the end against a catalog that does not change, for
// display and tests: the steps in order, and every field that cannot be
// restored. A live restore calls Next after each step instead, because a
// model change can change what the other options offer.
func Plan(target, catalog *state.Config) ([]Step, error) {
	done := map[string]bool{}
	var steps []Step
	var errs []FieldError
	for {
		step, fe, ok := Next(target, catalog, done)
		if !ok {
			break
		}
		done[step.Field] = true
		switch {
		case fe != nil:
			done[fe.Field] = true
			errs = append(errs, *fe)
		case step.Method != "":
			steps = append(steps, step)
		}
	}
	if len(errs) > 0 {
		return steps, &RestoreError{Fields: errs}
	}
	return steps, nil
}

// fields lists target's fields in restore order.
func fields(target *state.Config) []string {
	var out []string
	if modelValue(target) != nil {
		out = append(out, FieldModel)
	}
	if modeValue(target) != nil {
		out = append(out, FieldMode)
	}
	var ids []string
	for _, o := range target.Options {
		if o.Category == FieldModel || o.Category == FieldMode || o.Current == nil {
			continue
		}
		ids = append(ids, o.ID)
	}
	sort.Strings(ids)
	return append(out, ids...)
}

// modelValue is the target's model as JSON: the model-category option's
// value, else the legacy current model id.
func modelValue(c *state.Config) json.RawMessage {
	return categoryValue(c, FieldModel, c.Model)
}

func modeValue(c *state.Config) json.RawMessage {
	return categoryValue(c, FieldMode, c.Mode)
}

func categoryValue(c *state.Config, category string, legacy *state.Legacy) json.RawMessage {
	if c == nil {
		return nil
	}
	if o := c.ByCategory(category); o != nil && o.Current != nil {
		return o.Current
	}
	if legacy != nil && legacy.Current != "" {
		v, _ := json.Marshal(legacy.Current)
		return v
	}
	return nil
}

// stepFor decides one field. The zero Step with the field set means "already there".
// An option whose id is "model" or "mode" but whose category is not (ACP's
// category is optional) is an option like any other, restored by its id.
func stepFor(field string, target, catalog *state.Config) (Step, *FieldError) {
	switch {
	case field == FieldModel && modelValue(target) != nil:
		return categoryStep(field, modelValue(target), catalog, catalog.ByCategory(FieldModel), legacyOf(catalog, FieldModel), MethodSetModel)
	case field == FieldMode && modeValue(target) != nil:
		return categoryStep(field, modeValue(target), catalog, catalog.ByCategory(FieldMode), legacyOf(catalog, FieldMode), MethodSetMode)
	}
	want := target.Option(field).Current
	o := catalog.Option(field)
	if o == nil {
		return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: "the agent no longer offers this option"}
	}
	return optionStep(field, want, o)
}

func legacyOf(c *state.Config, field string) *state.Legacy {
	if c == nil {
		return nil
	}
	if field == FieldModel {
		return c.Model
	}
	return c.Mode
}

// categoryStep restores the model or the mode through the surface the fresh
// session exposes: its category option if it has one, else the legacy API,
// never both.
func categoryStep(field string, want json.RawMessage, catalog *state.Config, o *state.Option, legacy *state.Legacy, legacyMethod string) (Step, *FieldError) {
	if o != nil {
		return optionStep(field, want, o)
	}
	if legacy != nil {
		var id string
		if json.Unmarshal(want, &id) != nil {
			return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: "the agent offers only ids here, and the value is not one"}
		}
		if legacy.Current == id {
			return Step{Field: field}, nil
		}
		for _, a := range legacy.Available {
			if a == id {
				return Step{Field: field, Method: legacyMethod, Value: want}, nil
			}
		}
		return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: "the agent does not offer it"}
	}
	return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: "the agent has no " + field + " setting"}
}

func optionStep(field string, want json.RawMessage, o *state.Option) (Step, *FieldError) {
	if sameJSON(o.Current, want) {
		return Step{Field: field}, nil
	}
	if o.Type != "boolean" && !o.Offers(want) {
		return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: fmt.Sprintf("option %q does not offer it", o.ID)}
	}
	if o.Type == "boolean" && string(compact(want)) != "true" && string(compact(want)) != "false" {
		return Step{Field: field}, &FieldError{Field: field, Want: want, Reason: fmt.Sprintf("option %q takes true or false", o.ID)}
	}
	return Step{Field: field, Method: MethodSetConfigOption, OptionID: o.ID, Value: want}, nil
}

func sameJSON(a, b json.RawMessage) bool {
	return bytes.Equal(compact(a), compact(b))
}

func compact(v json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

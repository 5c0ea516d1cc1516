package replay

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/state"
)

func js(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

// opt builds a select option: id, category, current value, offered values.
func opt(id, cat, cur string, values ...string) state.Option {
	o := state.Option{ID: id, Category: cat, Type: "select", Current: js(cur)}
	for _, v := range values {
		o.Values = append(o.Values, state.Value{Value: js(v)})
	}
	return o
}

func cfg(opts ...state.Option) *state.Config { return &state.Config{Options: opts} }

func legacy(model, mode string, models, modes []string) *state.Config {
	c := &state.Config{}
	if model != "" {
		c.Model = &state.Legacy{Current: model, Available: models}
	}
	if mode != "" {
		c.Mode = &state.Legacy{Current: mode, Available: modes}
	}
	return c
}

func setOpt(id, v string) Step {
	return Step{Field: id, Method: MethodSetConfigOption, OptionID: id, Value: js(v)}
}

func TestPlan(t *testing.T) {
	models := []string{"fast-1", "smart-2", "deep-3"}
	modes := []string{"ask", "code", "plan"}
	tests := []struct {
		name    string
		target  *state.Config
		catalog *state.Config
		want    []Step
		wantErr []string
	}{
		{
			name:    "model before mode before options by id",
			target:  cfg(opt("zeta", "", "z2", "z1", "z2"), opt("mode", "mode", "plan", modes...), opt("alpha", "", "a2", "a1", "a2"), opt("model", "model", "deep-3", models...)),
			catalog: cfg(opt("alpha", "", "a1", "a1", "a2"), opt("model", "model", "smart-2", models...), opt("zeta", "", "z1", "z1", "z2"), opt("mode", "mode", "code", modes...)),
			want: []Step{
				{Field: "model", Method: MethodSetConfigOption, OptionID: "model", Value: js("deep-3")},
				{Field: "mode", Method: MethodSetConfigOption, OptionID: "mode", Value: js("plan")},
				setOpt("alpha", "a2"), setOpt("zeta", "z2"),
			},
		},
		{
			name:    "fields already at their target need no call",
			target:  cfg(opt("model", "model", "smart-2", models...), opt("mode", "mode", "plan", modes...)),
			catalog: cfg(opt("model", "model", "smart-2", models...), opt("mode", "mode", "code", modes...)),
			want:    []Step{{Field: "mode", Method: MethodSetConfigOption, OptionID: "mode", Value: js("plan")}},
		},
		{
			name:    "model and mode found by category, not id",
			target:  cfg(opt("m", "model", "b", "a", "b"), opt("agent-mode", "mode", "y", "x", "y")),
			catalog: cfg(opt("llm", "model", "a", "a", "b"), opt("permissions", "mode", "x", "x", "y")),
			want: []Step{
				{Field: "model", Method: MethodSetConfigOption, OptionID: "llm", Value: js("b")},
				{Field: "mode", Method: MethodSetConfigOption, OptionID: "permissions", Value: js("y")},
			},
		},
		{
			name:    "legacy-only agent",
			target:  legacy("deep-3", "plan", models, modes),
			catalog: legacy("smart-2", "code", models, modes),
			want:    []Step{{Field: "model", Method: MethodSetModel, Value: js("deep-3")}, {Field: "mode", Method: MethodSetMode, Value: js("plan")}},
		},
		{
			name:    "both surfaces: the option wins, never both",
			target:  &state.Config{Options: []state.Option{opt("model", "model", "deep-3", models...), opt("mode", "mode", "plan", modes...)}, Model: &state.Legacy{Current: "deep-3"}, Mode: &state.Legacy{Current: "plan"}},
			catalog: &state.Config{Options: []state.Option{opt("model", "model", "smart-2", models...), opt("mode", "mode", "code", modes...)}, Model: &state.Legacy{Current: "smart-2", Available: models}, Mode: &state.Legacy{Current: "code", Available: modes}},
			want:    []Step{{Field: "model", Method: MethodSetConfigOption, OptionID: "model", Value: js("deep-3")}, {Field: "mode", Method: MethodSetConfigOption, OptionID: "mode", Value: js("plan")}},
		},
		{
			name:    "captured by options, fresh session has legacy modes only",
			target:  cfg(opt("mode", "mode", "plan", modes...)),
			catalog: legacy("", "code", nil, modes),
			want:    []Step{{Field: "mode", Method: MethodSetMode, Value: js("plan")}},
		},
		{
			name:    "model not offered any more",
			target:  cfg(opt("model", "model", "retired-9", "retired-9"), opt("mode", "mode", "plan", modes...)),
			catalog: cfg(opt("model", "model", "smart-2", models...), opt("mode", "mode", "code", modes...)),
			want:    []Step{{Field: "mode", Method: MethodSetConfigOption, OptionID: "mode", Value: js("plan")}},
			wantErr: []string{"model"},
		},
		{
			name:    "model-dependent effort missing from the fresh catalog",
			target:  cfg(opt("model", "model", "smart-2", models...), opt("effort", "thought_level", "high", "low", "medium", "high")),
			catalog: cfg(opt("model", "model", "fast-1", models...)),
			want:    []Step{{Field: "model", Method: MethodSetConfigOption, OptionID: "model", Value: js("smart-2")}},
			wantErr: []string{"effort"},
		},
		{
			name:    "model-dependent effort whose values changed",
			target:  cfg(opt("model", "model", "deep-3", models...), opt("effort", "thought_level", "max", "medium", "high", "max")),
			catalog: cfg(opt("model", "model", "deep-3", models...), opt("effort", "thought_level", "medium", "low", "medium", "high")),
			wantErr: []string{"effort"},
		},
		{
			name:    "an agent with no mode at all",
			target:  cfg(opt("mode", "mode", "plan", modes...)),
			catalog: cfg(opt("model", "model", "fast-1", models...)),
			wantErr: []string{"mode"},
		},
		{
			name:    "legacy model id not offered",
			target:  legacy("gone", "", nil, nil),
			catalog: legacy("smart-2", "", models, nil),
			wantErr: []string{"model"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.target, tt.catalog)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan() steps mismatch (-want +got):\n%s", diff)
			}
			var names []string
			if re, ok := err.(*RestoreError); ok {
				names = re.Names()
			} else if err != nil {
				t.Fatalf("Plan() error %T %v", err, err)
			}
			if diff := cmp.Diff(tt.wantErr, names); diff != "" {
				t.Errorf("Plan() failed fields mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNextRereadsTheCatalogAfterTheModel plays a restore against a catalog
// that changes with the model, as codex and opencode do: effort exists only
// once the model that has it is set.
func TestNextRereadsTheCatalogAfterTheModel(t *testing.T) {
	models := []string{"fast-1", "smart-2"}
	target := cfg(opt("model", "model", "smart-2", models...), opt("effort", "thought_level", "high", "low", "medium", "high"))
	catalog := cfg(opt("model", "model", "fast-1", models...))
	done := map[string]bool{}
	var calls []string
	for {
		step, fe, ok := Next(target, catalog, done)
		if !ok {
			break
		}
		if fe != nil {
			t.Fatalf("field error %v", fe)
		}
		done[step.Field] = true
		if step.Method == "" {
			continue
		}
		calls = append(calls, step.String())
		if step.Field == "model" { // the agent answers with a new catalog
			catalog = cfg(opt("model", "model", "smart-2", models...), opt("effort", "thought_level", "medium", "low", "medium", "high"))
		}
	}
	want := []string{`session/set_config_option model="smart-2"`, `session/set_config_option effort="high"`}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
}

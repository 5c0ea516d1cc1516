package replay_test

import (
	"encoding/json"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// option is a select option offering values, currently at current.
func option(id, category, current string, values ...string) state.Option {
	o := state.Option{ID: id, Category: category, Type: "select", Current: str(current)}
	for _, v := range values {
		o.Values = append(o.Values, state.Value{Value: str(v)})
	}
	return o
}

func str(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

// catalog is what a fresh native session of a model-dependent agent
// reports: the effort it offers depends on the model.
func catalog(model, effort string) *state.Config {
	efforts := []string{"low", "high"}
	if model == "deep-3" {
		efforts = append(efforts, "max")
	}
	return &state.Config{Options: []state.Option{
		option("model", "model", model, "fast-1", "deep-3"),
		option("mode", "mode", "plan", "ask", "plan"),
		option("effort", "", effort, efforts...),
	}}
}

// A restore asks Next for one step at a time, against the catalog the
// agent reported last: the model goes first, and its answer can change what
// the other options offer. Plan, which asks against one catalog, would
// refuse the effort here; the live loop restores it.
func ExampleNext() {
	// The session's config as recorded, and the fresh session's.
	target := &state.Config{Options: []state.Option{
		option("effort", "", "max"),
		option("theme", "", "dark"),
		option("mode", "mode", "plan"),
		option("model", "model", "deep-3"),
	}}
	fresh := catalog("fast-1", "low")

	_, err := replay.Plan(target, fresh)
	fmt.Println("against the fresh catalog alone:", err)

	now, model, effort := fresh, "fast-1", "low"
	done := map[string]bool{}
	for {
		step, fe, ok := replay.Next(target, now, done)
		if !ok {
			break
		}
		done[step.Field] = true
		switch {
		case fe != nil:
			fmt.Printf("%s: not restored: %s\n", fe.Field, fe.Reason)
		case step.Method == "":
			fmt.Printf("%s: already there\n", step.Field)
		default:
			fmt.Println(step)
			// The agent's answer to the call carries its new catalog.
			var v string
			_ = json.Unmarshal(step.Value, &v) // every value here is a JSON string
			switch step.OptionID {
			case "model":
				model = v
			case "effort":
				effort = v
			}
			now = catalog(model, effort)
		}
	}
	// Output:
	// against the fresh catalog alone: cannot restore effort="max": option "effort" does not offer it; theme="dark": the agent no longer offers this option
	// session/set_config_option model="deep-3"
	// mode: already there
	// session/set_config_option effort="max"
	// theme: not restored: the agent no longer offers this option
}

package replay

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The restore planner gets configs built from fuzz bytes: a few options whose
// ids, categories, types, current values and catalogs come from small pools
// (so collisions and near-misses are common), and the legacy mode and model.
// Whatever it gets, it must keep DESIGN.md's promises: only values the
// catalog offers, model then mode then options by ascending id, a field is a
// step or a failure but never both, and a field already at its target is
// never a step.

// fuzzPool holds values as an agent may spell them, white space included:
// "v1" and ` "v1" ` are the same value.
var fuzzPool = []string{`"v1"`, `"v2"`, ` "v1" `, `"v3"`, `true`, `false`, `1`, `{"a":1}`}

var (
	fuzzIDs        = []string{"alpha", "beta", "zeta", "model", "mode", "m", "effort"}
	fuzzCategories = []string{"", FieldModel, FieldMode, "thought_level"}
	fuzzTypes      = []string{"select", "boolean", ""}
	fuzzLegacyIDs  = []string{"", "l1", "l2", "l3"}
)

// fuzzBytes hands out bytes, then zeros.
type fuzzBytes []byte

func (b *fuzzBytes) next() int {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return int(c)
}

func (b *fuzzBytes) pick(list []string) string { return list[b.next()%len(list)] }

// fuzzConfig builds a config from b.
func fuzzConfig(b *fuzzBytes) *state.Config {
	c := &state.Config{}
	for range b.next() % 6 {
		o := state.Option{ID: b.pick(fuzzIDs), Category: b.pick(fuzzCategories), Type: b.pick(fuzzTypes)}
		if cur := b.next(); cur%(len(fuzzPool)+1) < len(fuzzPool) {
			o.Current = json.RawMessage(fuzzPool[cur%(len(fuzzPool)+1)])
		}
		offered := b.next()
		for i, v := range fuzzPool {
			if offered&(1<<i) != 0 {
				o.Values = append(o.Values, state.Value{Value: json.RawMessage(v)})
			}
		}
		// An agent's option ids are unique; the first of a repeated id is
		// the one every lookup finds, so a repeat is left out.
		if c.Option(o.ID) == nil {
			c.Options = append(c.Options, o)
		}
	}
	legacy := func() *state.Legacy {
		n := b.next()
		if n%3 == 0 {
			return nil
		}
		l := &state.Legacy{Current: b.pick(fuzzLegacyIDs)}
		for i, id := range fuzzLegacyIDs[1:] {
			if n&(4<<i) != 0 {
				l.Available = append(l.Available, id)
			}
		}
		return l
	}
	c.Mode, c.Model = legacy(), legacy()
	return c
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{2, 3, 1, 0, 0, 3, 4, 2, 0, 1, 3}, []byte{2, 3, 1, 0, 1, 3, 4, 2, 0, 0, 3})
	f.Add([]byte{4, 0, 0, 0, 1, 0xff, 3, 1, 0, 2, 0xff, 2, 0, 0, 0, 0xff, 1, 0, 1, 4, 0xff, 7, 2, 0xf7},
		[]byte{4, 0, 0, 0, 0, 0xff, 3, 1, 0, 0, 0xff, 2, 0, 0, 1, 0xff, 1, 0, 1, 3, 0xff, 7, 3, 0xf7})
	f.Add([]byte{1, 5, 1, 1, 4, 0x30, 1, 0}, []byte{1, 5, 1, 1, 5, 0x30, 1, 0})
	f.Fuzz(func(t *testing.T, tb, cb []byte) {
		tbs, cbs := fuzzBytes(tb), fuzzBytes(cb)
		target, catalog := fuzzConfig(&tbs), fuzzConfig(&cbs)
		checkPlan(t, target, catalog)
	})
}

// checkPlan runs Next to the end, as a live restore does against a catalog
// that does not change, and checks every promise on what it decided.
func checkPlan(t *testing.T, target, catalog *state.Config) {
	t.Helper()
	done := map[string]bool{}
	var order []string // fields in the order Next decided them
	steps := map[string]Step{}
	failed := map[string]bool{}
	for range 100 {
		before := maps.Clone(done)
		step, fe, ok := Next(target, catalog, done)
		if !maps.Equal(before, done) {
			t.Fatalf("Next changed done: %v -> %v", before, done)
		}
		if !ok {
			break
		}
		if done[step.Field] {
			t.Fatalf("Next returned field %q, which is done", step.Field)
		}
		order = append(order, step.Field)
		done[step.Field] = true
		switch {
		case fe != nil:
			if step.Method != "" {
				t.Fatalf("field %q is both a step (%v) and a failure (%s)", step.Field, step, fe.Reason)
			}
			if fe.Field != step.Field {
				t.Fatalf("failure names %q for field %q", fe.Field, step.Field)
			}
			failed[fe.Field] = true
			checkFailure(t, fe, target, catalog)
		case step.Method != "":
			steps[step.Field] = step
			checkStep(t, step, target, catalog)
		}
	}
	if len(order) >= 100 {
		t.Fatalf("Next never ended: %v", order)
	}
	// Model first, then mode, then the rest in ascending id order.
	// An option may be called "model" or "mode" without being of that
	// category; it is then ranked among the options by its id.
	rank := func(f string) int {
		switch {
		case f == FieldModel && modelValue(target) != nil:
			return 0
		case f == FieldMode && modeValue(target) != nil:
			return 1
		}
		return 2
	}
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if rank(a) > rank(b) || rank(a) == 2 && rank(b) == 2 && a >= b {
			t.Fatalf("fields decided in order %v", order)
		}
	}
	// Plan agrees with Next.
	plan, err := Plan(target, catalog)
	if len(plan) != len(steps) {
		t.Fatalf("Plan has %d steps, Next %d: %v", len(plan), len(steps), plan)
	}
	for _, s := range plan {
		if failed[s.Field] {
			t.Fatalf("field %q is both a step and a failure in Plan", s.Field)
		}
	}
	var re *RestoreError
	if len(failed) > 0 {
		if re, _ = err.(*RestoreError); re == nil || len(re.Fields) != len(failed) {
			t.Fatalf("Plan err = %v, want %d failed fields", err, len(failed))
		}
	} else if err != nil {
		t.Fatalf("Plan err = %v, want none", err)
	}
	// Every option the target holds is decided: a step, a failure, or
	// already at its target.
	for _, o := range target.Options {
		if o.Current == nil || o.Category == FieldModel || o.Category == FieldMode {
			continue
		}
		if !slices.Contains(order, o.ID) {
			t.Fatalf("target option %q was never decided (order %v)", o.ID, order)
		}
	}
}

// checkStep: the value is offered by the catalog, through the surface the
// step names, and differs from what the catalog has now.
func checkStep(t *testing.T, s Step, target, catalog *state.Config) {
	t.Helper()
	switch s.Method {
	case MethodSetConfigOption:
		o := catalog.Option(s.OptionID)
		if o == nil {
			t.Fatalf("step %v sets an option the catalog lacks", s)
		}
		if s.Field == FieldModel && modelValue(target) != nil || s.Field == FieldMode && modeValue(target) != nil {
			if o.Category != s.Field {
				t.Fatalf("step %v restores the %s through option %q of category %q", s, s.Field, o.ID, o.Category)
			}
		} else if s.OptionID != s.Field {
			t.Fatalf("step %v sets option %q for field %q", s, s.OptionID, s.Field)
		}
		if o.Type == "boolean" {
			if c := string(compact(s.Value)); c != "true" && c != "false" {
				t.Fatalf("step %v sets boolean %q to %s", s, o.ID, s.Value)
			}
		} else if !o.Offers(s.Value) {
			t.Fatalf("step %v sets a value option %q does not offer (%v)", s, o.ID, o.Values)
		}
		if sameJSON(o.Current, s.Value) {
			t.Fatalf("step %v for a field already at %s", s, o.Current)
		}
	case MethodSetModel, MethodSetMode:
		l, field := catalog.Model, FieldModel
		if s.Method == MethodSetMode {
			l, field = catalog.Mode, FieldMode
		}
		if s.Field != field || s.OptionID != "" {
			t.Fatalf("step %v: method for another field", s)
		}
		if catalog.ByCategory(field) != nil {
			t.Fatalf("step %v uses the legacy API though the catalog has a %s option", s, field)
		}
		var id string
		if l == nil || json.Unmarshal(s.Value, &id) != nil || !slices.Contains(l.Available, id) {
			t.Fatalf("step %v sets a %s the catalog does not offer (%+v)", s, field, l)
		}
		if l.Current == id {
			t.Fatalf("step %v for a %s already at %q", s, field, id)
		}
	default:
		t.Fatalf("step %v: unknown method", s)
	}
}

// checkFailure: an option fails only when the catalog cannot take its value.
func checkFailure(t *testing.T, fe *FieldError, target, catalog *state.Config) {
	t.Helper()
	if fe.Field == FieldModel && modelValue(target) != nil || fe.Field == FieldMode && modeValue(target) != nil {
		return
	}
	want := target.Option(fe.Field)
	o := catalog.Option(fe.Field)
	if want == nil || o == nil {
		return
	}
	c := string(compact(want.Current))
	if o.Type == "boolean" && (c == "true" || c == "false") || o.Type != "boolean" && (o.Offers(want.Current) || sameJSON(o.Current, want.Current)) {
		t.Fatalf("option %q failed (%s) though the catalog offers %s: %+v", fe.Field, fe.Reason, want.Current, *o)
	}
}

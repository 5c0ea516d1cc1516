package state

import (
	"bytes"
	"encoding/json"
	"slices"
)

// ByCategory returns the first option of the given category ("model", "mode",
// …), or nil. Model and mode are found by category, never by id, because agents
// name their options as they like (DESIGN.md "The state model"). It is safe on a
// nil Config.
func (c *Config) ByCategory(category string) *Option {
	if c == nil {
		return nil
	}
	for i := range c.Options {
		if c.Options[i].Category == category {
			return &c.Options[i]
		}
	}
	return nil
}

// Option returns the option with the given id, or nil.
func (c *Config) Option(id string) *Option {
	if c == nil {
		return nil
	}
	for i := range c.Options {
		if c.Options[i].ID == id {
			return &c.Options[i]
		}
	}
	return nil
}

// Values returns each option's current value by option id. Legacy mode and
// model are not options and are left out; read c.Mode and c.Model.
func (c *Config) Values() map[string]json.RawMessage {
	if c == nil {
		return nil
	}
	m := make(map[string]json.RawMessage, len(c.Options))
	for _, o := range c.Options {
		m[o.ID] = o.Current
	}
	return m
}

// Offers reports whether the option's catalog lists v (compared as compact JSON).
func (o *Option) Offers(v json.RawMessage) bool {
	return slices.ContainsFunc(o.Values, func(x Value) bool { return sameJSON(x.Value, v) })
}

// Change is one difference between two configs.
type Change struct {
	// OptionID is the option's id, or "mode" / "model" when Legacy is set.
	OptionID string `json:"optionId"`
	Category string `json:"category,omitempty"`
	// Legacy marks a change in the legacy modes or models API; From and To are
	// then JSON strings.
	Legacy bool `json:"legacy,omitempty"`
	// From is nil when the option is new in b, To is nil when b lacks it.
	From json.RawMessage `json:"from,omitempty"`
	To   json.RawMessage `json:"to,omitempty"`
}

// Diff lists what changed from c to next, e.g. baseline.Diff(live) for
// `show`: options in next's order, then options only c has, then legacy mode
// and model. Values compare as compact JSON, so whitespace differences do not
// count. Either config may be nil, c too: a layer never recorded is empty.
func (c *Config) Diff(next *Config) []Change {
	var out []Change
	seen := map[string]bool{}
	if next != nil {
		for _, o := range next.Options {
			seen[o.ID] = true
			var from json.RawMessage
			if p := c.Option(o.ID); p != nil {
				from = p.Current
				if sameJSON(from, o.Current) {
					continue
				}
			}
			out = append(out, Change{OptionID: o.ID, Category: o.Category, From: from, To: o.Current})
		}
	}
	if c != nil {
		for _, o := range c.Options {
			if !seen[o.ID] {
				out = append(out, Change{OptionID: o.ID, Category: o.Category, From: o.Current})
			}
		}
	}
	legacy := func(name string, x, y *Legacy) {
		var from, to json.RawMessage
		if x != nil {
			from, _ = json.Marshal(x.Current)
		}
		if y != nil {
			to, _ = json.Marshal(y.Current)
		}
		if !sameJSON(from, to) {
			out = append(out, Change{OptionID: name, Category: name, Legacy: true, From: from, To: to})
		}
	}
	var am, bm, ao, bo *Legacy
	if c != nil {
		am, ao = c.Mode, c.Model
	}
	if next != nil {
		bm, bo = next.Mode, next.Model
	}
	legacy("mode", am, bm)
	legacy("model", ao, bo)
	return out
}

// sameJSON compares two JSON texts ignoring insignificant whitespace. Invalid
// JSON falls back to a byte comparison.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// sameConfig is the store's test for "the same original": equal as encoded JSON.
func sameConfig(a, b *Config) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

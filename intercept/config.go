package intercept

import (
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The config operations the record and the rebuild share: a config is
// never changed in place, so a capture taken earlier stays what it was.

// cloneConfig copies a config deeply enough that later changes to one never
// show in the other (the capture must be immutable, DESIGN.md step 1).
func cloneConfig(c *state.Config) *state.Config {
	if c == nil {
		return nil
	}
	// A config holds strings and raw JSON that scanned (from a frame or
	// the store), so it always encodes, and what encodes decodes.
	b, _ := json.Marshal(c)
	var out state.Config
	_ = json.Unmarshal(b, &out)
	return &out
}

// withOptions returns c with its options replaced by a full list the agent
// reported: lists are always replaced, never merged (protocol.md §8, 13).
func withOptions(c *state.Config, opts []state.Option) *state.Config {
	n := cloneConfig(c)
	if n == nil {
		n = &state.Config{}
	}
	n.Options = opts
	// The legacy surfaces name the same model and mode: the option the
	// agent just reported is the newer word on them.
	for _, l := range []struct {
		cat string
		leg *state.Legacy
	}{{"model", n.Model}, {"mode", n.Mode}} {
		var id string
		if o := n.ByCategory(l.cat); o != nil && l.leg != nil && json.Unmarshal(o.Current, &id) == nil {
			for _, a := range l.leg.Available {
				if a == id {
					l.leg.Current = id
				}
			}
		}
	}
	return n
}

func withLegacy(c *state.Config, field, current string) *state.Config {
	n := cloneConfig(c)
	if n == nil {
		n = &state.Config{}
	}
	l := &n.Mode
	if field == "model" {
		l = &n.Model
	}
	if *l == nil {
		*l = &state.Legacy{}
	}
	(*l).Current = current
	return n
}

package record

import (
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The config operations the record and the rebuild share: a config is
// never changed in place, so a capture taken earlier stays what it was.

// CloneConfig copies a config deeply enough that later changes to one never
// show in the other (the capture must be immutable, DESIGN.md step 1).
func CloneConfig(c *state.Config) *state.Config {
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

// WithOptions returns c with its options replaced by a full list the agent
// reported: lists are always replaced, never merged (protocol.md §8, 13).
func WithOptions(c *state.Config, opts []state.Option) *state.Config {
	n := CloneConfig(c)
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

// CarryLegacy keeps the legacy modes and models of a session in a load or
// resume result that lacks them (codex-acp 2.6.0's resume has only
// configOptions): the agent still has them and did not report a change, so
// the record keeps what it reported before, with the current value of the
// option of the same category where the result has one.
func CarryLegacy(cfg, prev *state.Config) *state.Config {
	if cfg == nil || prev == nil || (cfg.Mode != nil || prev.Mode == nil) && (cfg.Model != nil || prev.Model == nil) {
		return cfg
	}
	n := CloneConfig(cfg)
	p := CloneConfig(prev)
	if n.Mode == nil {
		n.Mode = p.Mode
	}
	if n.Model == nil {
		n.Model = p.Model
	}
	return WithOptions(n, n.Options) // the options name the current values
}

func WithLegacy(c *state.Config, field, current string) *state.Config {
	n := CloneConfig(c)
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

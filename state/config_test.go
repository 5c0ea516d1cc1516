package state

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConfigLookup(t *testing.T) {
	c := sampleConfig("opus")
	if o := c.ByCategory("model"); o == nil || o.ID != "model" {
		t.Errorf("ByCategory(model) = %+v", o)
	}
	if o := c.ByCategory("mode"); o != nil {
		t.Errorf("ByCategory(mode) = %+v, want nil (mode is legacy here)", o)
	}
	var nilCfg *Config
	if nilCfg.ByCategory("model") != nil || nilCfg.Option("x") != nil || nilCfg.Values() != nil {
		t.Error("nil Config lookups not nil")
	}
	want := map[string]json.RawMessage{"model": json.RawMessage(`"opus"`), "effort": json.RawMessage(`"high"`)}
	if diff := cmp.Diff(want, c.Values()); diff != "" {
		t.Errorf("Values() (-want +got):\n%s", diff)
	}
	if o := c.Option("model"); !o.Offers(json.RawMessage(` "sonnet" `)) || o.Offers(json.RawMessage(`"haiku"`)) {
		t.Error("Offers() wrong")
	}
}

func TestDiff(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	base := sampleConfig("sonnet")
	tests := []struct {
		name string
		a, b *Config
		want []Change
	}{
		{"same", base, sampleConfig("sonnet"), nil},
		{"whitespace only", base, func() *Config {
			c := sampleConfig("sonnet")
			c.Options[0].Current = raw(` "sonnet"`)
			return c
		}(), nil},
		{"value changed", base, sampleConfig("opus"),
			[]Change{{OptionID: "model", Category: "model", From: raw(`"sonnet"`), To: raw(`"opus"`)}}},
		{"option added and removed", base, &Config{Options: []Option{{ID: "new", Current: raw(`1`)}}, Mode: base.Mode},
			[]Change{
				{OptionID: "new", To: raw(`1`)},
				{OptionID: "model", Category: "model", From: raw(`"sonnet"`)},
				{OptionID: "effort", Category: "thought_level", From: raw(`"high"`)},
			}},
		{"legacy mode changed", base, func() *Config {
			c := sampleConfig("sonnet")
			c.Mode = &Legacy{Current: "code"}
			return c
		}(), []Change{{OptionID: "mode", Category: "mode", Legacy: true, From: raw(`"plan"`), To: raw(`"code"`)}}},
		{"from nothing", nil, &Config{Model: &Legacy{Current: "m"}},
			[]Change{{OptionID: "model", Category: "model", Legacy: true, To: raw(`"m"`)}}},
		{"both nil", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.a.Diff(tt.b)); diff != "" {
				t.Errorf("Diff() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

package wire

import (
	"encoding/json"
	"testing"
)

// TestBridge: each dialect gets the pickers it lacks, grouped values
// flatten, and a result that has the client's dialect is left to the byte.
func TestBridge(t *testing.T) {
	const opts = `{"sessionId":"s","configOptions":[` +
		`{"id":"m","name":"Model","category":"model","type":"select","currentValue":"b","options":[{"group":"g","name":"G","options":[{"value":"a","name":"A"},{"value":"b","name":"B","description":"bee"}]}]},` +
		`{"id":"k","name":"Mode","category":"mode","type":"select","currentValue":"code","options":[{"value":"code","name":"Code"},{"value":"plan"}]},` +
		`{"id":"e","category":"thought_level","type":"select","currentValue":"low","options":[{"value":"low"}]}]}`
	const legacy = `{"sessionId":"s","modes":{"currentModeId":"code","availableModes":[{"id":"code","name":"Code"},{"id":"plan","name":"Plan","description":"think first"}]},` +
		`"models":{"currentModelId":"b","availableModels":[{"modelId":"a","name":"A"},{"modelId":"b","name":"B"}]}}`
	for _, tc := range []struct {
		name, in string
		reads    bool
		want     map[string]string // member -> its JSON; "" for absent
	}{
		{"legacy client, options agent", opts, false, map[string]string{
			"models": `{"availableModels":[{"modelId":"a","name":"A"},{"modelId":"b","name":"B","description":"bee"}],"currentModelId":"b"}`,
			"modes":  `{"availableModes":[{"id":"code","name":"Code"},{"id":"plan","name":"plan"}],"currentModeId":"code"}`,
		}},
		{"options client, legacy agent", legacy, true, map[string]string{
			"configOptions": `[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"code","options":[{"value":"code","name":"Code"},{"value":"plan","name":"Plan","description":"think first"}]},` +
				`{"id":"model","name":"Model","category":"model","type":"select","currentValue":"b","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]`,
		}},
		{"legacy client, legacy agent", legacy, false, map[string]string{"configOptions": ""}},
		{"options client, options agent", opts, true, map[string]string{"models": "", "modes": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Bridge(json.RawMessage(tc.in), tc.reads)
			var got map[string]json.RawMessage
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("Bridge wrote %s: %v", out, err)
			}
			for k, want := range tc.want {
				if want == "" {
					if _, ok := got[k]; ok {
						t.Errorf("%s added: %s", k, got[k])
					}
					continue
				}
				if string(CompactJSON(got[k])) != string(CompactJSON(json.RawMessage(want))) {
					t.Errorf("%s = %s\nwant %s", k, got[k], want)
				}
			}
			if len(tc.want) > 0 && allAbsent(tc.want) && string(out) != tc.in {
				t.Errorf("nothing to add, but the result changed:\n%s", out)
			}
		})
	}
	if out := Bridge(json.RawMessage(`null`), false); string(out) != "null" {
		t.Errorf("a null result became %s", out)
	}
}

func allAbsent(m map[string]string) bool {
	for _, v := range m {
		if v != "" {
			return false
		}
	}
	return true
}

func TestReadsOptions(t *testing.T) {
	for in, want := range map[string]bool{
		`{"protocolVersion":1,"clientCapabilities":{}}`:                       false,
		`{"clientCapabilities":{"session":{"configOptions":{}}}}`:             true,
		`{"clientCapabilities":{"session":{"configOptions":{"boolean":{}}}}}`: true,
		`{"clientCapabilities":{"session":{"configOptions":null}}}`:           false,
		`not json`: false,
	} {
		if got := ReadsOptions(json.RawMessage(in)); got != want {
			t.Errorf("ReadsOptions(%s) = %v, want %v", in, got, want)
		}
	}
}

package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

func TestVersionOf(t *testing.T) {
	for in, want := range map[string]Version{
		`{"protocolVersion":2,"info":{}}`: V2,
		`{"protocolVersion":1}`:           V1,
		`{"protocolVersion":"2"}`:         V1, // not a number: the agent judges it, and it reads as v1
		`{}`:                              V1,
		`{"protocolVersion":0}`:           V1,
	} {
		if got := VersionOf(json.RawMessage(in)); got != want {
			t.Errorf("VersionOf(%s) = %d, want %d", in, got, want)
		}
	}
}

// TestOptionsByConfigID: v2 names an option configId where v1 names it id;
// both are read as the option's id.
func TestOptionsByConfigID(t *testing.T) {
	raw := json.RawMessage(`[{"configId":"model","name":"Model","type":"select","currentValue":"sonnet","options":[{"value":"sonnet","name":"Sonnet"},{"value":"opus","name":"Opus"}]},` +
		`{"configId":"fast","name":"Fast","type":"boolean","currentValue":false},{"id":"mode","name":"Mode","type":"select","currentValue":"plan","options":[{"value":"plan","name":"Plan"}]},{"name":"nameless"}]`)
	opts, ok := ParseOptions(raw)
	if !ok || len(opts) != 3 {
		t.Fatalf("ParseOptions = %v %v, want three options", opts, ok)
	}
	if opts[0].ID != "model" || string(opts[0].Current) != `"sonnet"` || len(opts[0].Values) != 2 {
		t.Errorf("model option: %+v", opts[0])
	}
	if opts[1].ID != "fast" || opts[1].Type != "boolean" || len(opts[1].Values) != 2 {
		t.Errorf("boolean option: %+v", opts[1])
	}
	if opts[2].ID != "mode" {
		t.Errorf("v1 option: %+v", opts[2])
	}
}

func TestSetOptionParams(t *testing.T) {
	val := json.RawMessage(`"deep-3"`)
	if p := SetOptionParams(V1, "s", "model", "select", val); p["type"] != nil {
		t.Errorf("v1 select got type %v; v1 agents take none", p["type"])
	}
	if p := SetOptionParams(V2, "s", "model", "select", val); p["type"] != "id" {
		t.Errorf("v2 select type = %v, want id", p["type"])
	}
	for _, v := range []Version{V1, V2} {
		if p := SetOptionParams(v, "s", "fast", "boolean", json.RawMessage("true")); p["type"] != "boolean" {
			t.Errorf("v%d boolean type = %v, want boolean", v, p["type"])
		}
	}
}

// TestOwnTurnV2: the sidecar's own turn in v2 runs the way a v2 agent's
// does, and carries no v1 prompt result.
func TestOwnTurnV2(t *testing.T) {
	lines := OwnTurn(V2, "s1", []byte("7"), json.RawMessage(`[{"type":"text","text":"/reset"}]`), "done")
	var kinds []string
	var user, accepted string
	for _, l := range lines {
		env, err := proxy.Scan(l)
		if err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		switch env.Kind {
		case proxy.KindResponse:
			kinds = append(kinds, "response")
			accepted = string(Member(l, "result", "messageId"))
		default:
			k := string(env.Update)
			if k == "state_update" {
				k += ":" + strings.Trim(string(Member(l, "params", "update", "state")), `"`)
			}
			if k == "user_message" {
				user = string(Member(l, "params", "update", "messageId"))
			}
			kinds = append(kinds, k)
		}
		if strings.Contains(string(l), `"stopReason":"end_turn"}}`) && env.Kind == proxy.KindResponse {
			t.Errorf("a v1 prompt result in v2: %s", l)
		}
	}
	want := "user_message response state_update:running agent_message_chunk state_update:idle"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("own v2 turn = %s, want %s", got, want)
	}
	if user == "" || user != accepted {
		t.Errorf("the prompt is accepted with messageId %s, its user message has %s", accepted, user)
	}
	if idle := lines[len(lines)-1]; string(Member(idle, "params", "update", "stopReason")) != `"end_turn"` {
		t.Errorf("the turn ends %s, want stopReason end_turn", idle)
	}
	if v1 := OwnTurn(V1, "s1", []byte("7"), nil, "done"); len(v1) != 2 || string(Member(v1[1], "result", "stopReason")) != `"end_turn"` {
		t.Errorf("own v1 turn = %q", v1)
	}
}

func TestStateFailed(t *testing.T) {
	l := StateFailed("s1", proxy.CodeAgentGone, "gone")
	u := Member(l, "params", "update")
	if string(Member(u, "state")) != `"idle"` || string(Member(u, "stopReason")) != `"error"` || string(Member(u, "error", "code")) != "-32012" {
		t.Errorf("StateFailed = %s", l)
	}
}

// TestOptionIn: an option recorded in one version is named as the other
// names it; one already in the version's words stays byte for byte.
func TestOptionIn(t *testing.T) {
	v1 := json.RawMessage(`{"id":"model","name":"Model","currentValue":"deep-3"}`)
	v2 := json.RawMessage(`{"configId":"model","name":"Model","currentValue":"deep-3"}`)
	if got := OptionIn(V2, v1, "model"); string(Member(got, "configId")) != `"model"` || Member(got, "id") != nil {
		t.Errorf("v1 option in v2: %s", got)
	}
	if got := OptionIn(V1, v2, "model"); string(Member(got, "id")) != `"model"` || Member(got, "configId") != nil {
		t.Errorf("v2 option in v1: %s", got)
	}
	if got := OptionIn(V2, v2, "model"); string(got) != string(v2) {
		t.Errorf("v2 option in v2 changed: %s", got)
	}
	if got := OptionIn(V1, v1, "model"); string(got) != string(v1) {
		t.Errorf("v1 option in v1 changed: %s", got)
	}
}

package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Fuzz targets for the two places where the sidecar handles bytes it did not
// write: the sessionId splice (DESIGN.md "Data flow" 2: change only what must
// change) and the recorder's decoding of config catalogs and updates (the
// agent's words, kept raw, one bad option never costing the others).

// fzDecode decodes one JSON value as encoding/json reads it, numbers kept
// as written.
func fzDecode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

func FuzzSpliceSessionID(f *testing.F) {
	for _, s := range []struct{ frame, id string }{
		{`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"client-1","prompt":[{"type":"text","text":"hi"}]}}`, "native-7"},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"sessionId":"n1"}}`, "c1"},
		{" { \"params\" : { \"sessionId\" :\t\"a\\u0062c\" , \"x\":1.50e3 } , \"method\":\"m\" } ", "é\"\\</>&\u2028"},
		{`{"method":"m","params":{"sessionId":"first","sessionId":"second"}}`, "third"},
		{`{"method":"m","params":{"sessionId":"a"},"params":{"x":[1,2,{"sessionId":"deep"}],"sessionId":"b"}}`, ""},
		{`{"method":"m","params":{"sessionId":5}}`, "x"},
		{`{"method":"m","params":{"sessionId":{"nested":"o"}}}`, "x"},
		{`{"id":1,"result":{"sessionId":"not-params"},"params":{"sessionId":"p"}}`, "\xff\xfe"},
		{`{"method":"m","params":{"SessionId":"case","sessionId":"exact"}}`, "y"},
	} {
		f.Add([]byte(s.frame), s.id)
	}
	f.Fuzz(func(t *testing.T, frame []byte, id string) {
		env, err := proxy.Scan(frame)
		if err != nil || !env.SessionID.Present() {
			return
		}
		sp := env.SessionID
		out := respliceID(frame, sp, id)
		if !json.Valid(out) {
			t.Fatalf("splice made invalid JSON: %q", out)
		}
		env2, err := proxy.Scan(out)
		if err != nil {
			t.Fatalf("splice result fails Scan: %v: %q", err, out)
		}
		// The bytes outside the span are the frame's own.
		tail := len(frame) - sp.End
		if !bytes.Equal(out[:sp.Start], frame[:sp.Start]) || !bytes.Equal(out[len(out)-tail:], frame[sp.End:]) {
			t.Fatalf("bytes outside the span changed:\n in %q\nout %q", frame, out)
		}
		// The new span is the replacement, and its value is id (as JSON
		// spells it: invalid UTF-8 becomes U+FFFD).
		val, _ := json.Marshal(id)
		if got := out[env2.SessionID.Start:env2.SessionID.End]; !bytes.Equal(got, val) {
			t.Fatalf("sessionId span after splice = %q, want %q", got, val)
		}
		var wantID string
		json.Unmarshal(val, &wantID)
		// Decoded, only params.sessionId changed.
		want, got := fzDecode(t, frame), fzDecode(t, out)
		top, ok := want.(map[string]any)
		if !ok {
			t.Fatalf("Scan found a sessionId in a non-object: %q", frame)
		}
		params, ok := top["params"].(map[string]any)
		if !ok {
			t.Fatalf("Scan found a sessionId where encoding/json has no params object: %q", frame)
		}
		params["sessionId"] = wantID
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("splice changed more than params.sessionId:\n in %q\nout %q", frame, out)
		}
	})
}

// FuzzIDMapper drives the interceptor itself: the fuzzed frame's sessionId,
// when it is a string, is mapped to id; anything else passes untouched.
func FuzzIDMapper(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"c","prompt":[]}}`), "n", true)
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"n","update":{}}}`), "c", false)
	f.Add([]byte(`{"method":"m","params":{"sessionId":null}}`), "n", true)
	f.Add([]byte(`{"method":"m","params":{"sessionId":"\ud800"}}`), "n", true)
	f.Fuzz(func(t *testing.T, frame []byte, to string, toAgent bool) {
		env, err := proxy.Scan(frame)
		if err != nil || !env.SessionID.Present() {
			return
		}
		led := ledger.New(nil)
		var from string
		isString := json.Unmarshal(frame[env.SessionID.Start:env.SessionID.End], &from) == nil
		dir := proxy.AgentToClient
		if toAgent {
			dir = proxy.ClientToAgent
			led.Update(func(f *ledger.Flight) { f.Remap(from, to, 0) })
		} else {
			led.Update(func(f *ledger.Flight) { f.Remap(to, from, 0) })
		}
		// Mapped as if some other session had been rebuilt, whether or
		// not this one's ids differ.
		led.Update(func(f *ledger.Flight) { f.Remap("fz-other", "fz-other-native", 0) })
		m := idMapper{led: led, gate: &ChunkGate{led: led}}
		f := &proxy.Frame{Dir: dir, Raw: frame, Env: env}
		if !m.Claims(dir, &f.Env) {
			t.Fatalf("idMapper does not claim a mapped frame")
		}
		v, err := m.Intercept(context.Background(), f)
		if err != nil {
			t.Fatalf("Intercept: %v", err)
		}
		switch {
		case !isString || from == to:
			if v.Do != proxy.Pass {
				t.Fatalf("verdict %v for a sessionId that needs no change", v.Do)
			}
		case v.Do != proxy.Rewrite || !bytes.Equal(v.Line, respliceID(frame, env.SessionID, to)):
			t.Fatalf("verdict %v %q, want the splice", v.Do, v.Line)
		}
	})
}

// Two options an agent sends well, around the fuzzed one.
const (
	fzGoodA = `{"id":"fz-a","name":"A","category":"model","type":"select","currentValue":"x","options":[{"group":"g1","name":"G1","options":[{"value":"x","name":"X"}]},{"group":"g2","name":"G2","options":[{"value":"y","name":"Y"}]}]}`
	fzGoodB = `{"id":"fz-b","type":"boolean","currentValue":true, "_meta":{"k":[1,2]}}`
)

// fzCheckGood: both good options survive, in the agent's words.
func fzCheckGood(t *testing.T, what string, opts []state.Option) {
	t.Helper()
	var a, b *state.Option
	for i := range opts {
		switch {
		case bytes.Equal(opts[i].Raw, wire.CompactJSON([]byte(fzGoodA))):
			a = &opts[i]
		case bytes.Equal(opts[i].Raw, wire.CompactJSON([]byte(fzGoodB))):
			b = &opts[i]
		}
	}
	if a == nil || b == nil {
		b, _ := json.Marshal(opts)
		t.Fatalf("%s: a good option was lost: %s", what, b)
	}
	if a.ID != "fz-a" || a.Category != "model" || string(a.Current) != `"x"` || len(a.Values) != 2 || !a.Offers(json.RawMessage(`"y"`)) {
		b, _ := json.Marshal(a)
		t.Fatalf("%s: option fz-a decoded as %s", what, b)
	}
	if b.ID != "fz-b" || b.Type != "boolean" || string(b.Current) != "true" {
		j, _ := json.Marshal(b)
		t.Fatalf("%s: option fz-b decoded as %s", what, j)
	}
}

func FuzzRecorderDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"effort","type":"select","currentValue":"high","options":[{"value":"low","name":"Low"},{"value":"high","name":"High"}]}`,
		`{"id":"odd","type":"slider","currentValue":0.5,"min":0,"max":1}`,
		`{"id":"","type":"select"}`,
		`{"id":7}`,
		`{"id":"x","options":[{"value":1}]}`,
		`{"id":"x","options":{"nope":true}}`,
		`{"id":"x","currentValue":{"deep":[[[[[]]]]]}}`,
		`null`, `[]`, `"str"`, `{}`,
		`{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`,
		`{"sessionUpdate":"current_mode_update","currentModeId":5}`,
		`{"sessionUpdate":"current_mode_update"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read","status":"pending","content":[{"type":"content","content":{"type":"text","text":"x"}}]}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}`,
		`{"currentModelId":"m1","availableModels":[{"modelId":"m1","name":"M"}]}`,
		`{"currentModeId":"a","availableModes":[{"id":"a","name":"A"},{"id":5}]}`,
		"{\"id\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, elem []byte) {
		ctx := context.Background()
		// Arbitrary bytes never panic any decoder.
		wire.ParseOptions(elem)
		wire.ConfigFromResult(elem)
		wire.ParseModes(elem)
		wire.ParseModels(elem)
		wire.PromptContent(elem, true)
		r, s := fzRecorder()
		for _, kind := range []string{"config_option_update", "current_mode_update", "agent_message_chunk", "tool_call", "tool_call_update"} {
			r.update(ctx, event{dir: proxy.AgentToClient, method: wire.Update, update: kind, raw: elem})
			frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":` + string(elem) + `}}`)
			r.update(ctx, event{dir: proxy.AgentToClient, method: wire.Update, update: kind, raw: frame})
		}
		s.turn = nil
		r.response(ctx, event{dir: proxy.AgentToClient, raw: []byte(`{"jsonrpc":"2.0","id":1,"result":` + string(elem) + `}`),
			req: &request{method: wire.SetConfigOption, sid: "fz-s", params: json.RawMessage(`{"sessionId":"fz-s","configId":"fz-a","value":"y"}`)}})

		if !json.Valid(elem) {
			return
		}
		// One bad option never loses the others.
		arr := []byte("[" + fzGoodA + "," + string(elem) + "," + fzGoodB + "]")
		opts, ok := wire.ParseOptions(arr)
		if !ok {
			t.Fatalf("parseOptions(%s) = not a list", arr)
		}
		fzCheckGood(t, "parseOptions", opts)
		// The fuzzed option, when it has an id, is kept raw.
		var w struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(elem, &w) == nil {
			if id, _ := w.ID.(string); id != "" {
				want := wire.CompactJSON(elem)
				if !slices.ContainsFunc(opts, func(o state.Option) bool { return bytes.Equal(o.Raw, want) && o.ID == id }) {
					t.Logf("option %q with an id was dropped (its other fields do not decode)", id)
				}
			}
		}
		// A whole session result: options and legacy mode survive a bad
		// legacy models value, and the raw result is kept.
		result := []byte(`{"sessionId":"s","configOptions":` + string(arr) +
			`,"modes":{"currentModeId":"ask","availableModes":[{"id":"ask","name":"Ask"}]},"models":` + string(elem) + `}`)
		c := wire.ConfigFromResult(result)
		if c == nil || c.Mode == nil || c.Mode.Current != "ask" {
			t.Fatalf("configFromResult(%s) lost the mode: %+v", result, c)
		}
		fzCheckGood(t, "configFromResult", c.Options)
		if !bytes.Equal(c.Raw, wire.CompactJSON(result)) {
			t.Fatalf("configFromResult did not keep the raw result")
		}
		// A config_option_update with a bad option still lands in live,
		// and in the store.
		r, s = fzRecorder()
		frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":{"sessionUpdate":"config_option_update","configOptions":` + string(arr) + `}}}`)
		r.update(ctx, event{dir: proxy.AgentToClient, method: wire.Update, update: "config_option_update", raw: frame})
		fzCheckGood(t, "config_option_update", s.rec.Live.Options)
		stored, err := r.cfg.Store.Session(ctx, "fz-s")
		if err != nil {
			t.Fatalf("the update was not stored: %v", err)
		}
		fzCheckGood(t, "stored live", stored.Live.Options)
		// A current_mode_update sets live's mode to what the agent said, or
		// leaves it alone when it said nothing usable.
		r, s = fzRecorder()
		frame = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":{"sessionUpdate":"current_mode_update","currentModeId":` + string(elem) + `}}}`)
		r.update(ctx, event{dir: proxy.AgentToClient, method: wire.Update, update: "current_mode_update", raw: frame})
		var mode string
		if json.Unmarshal(elem, &mode) == nil && mode != "" {
			if s.rec.Live.Mode == nil || s.rec.Live.Mode.Current != mode {
				t.Fatalf("current_mode_update %s: live mode %+v", elem, s.rec.Live.Mode)
			}
		} else if s.rec.Live.Mode == nil || s.rec.Live.Mode.Current != "ask" {
			t.Fatalf("current_mode_update with currentModeId %s changed live's mode to %+v", elem, s.rec.Live.Mode)
		}
	})
}

// fzRecorder is a recorder that knows one session, fz-s, with a running
// turn, in mode "ask"; its methods are called directly, so a panic is not
// caught by apply's recover.
func fzRecorder() (*Recorder, *session) {
	r := NewRecorder(RecorderConfig{Store: state.NewMemory()})
	s := &session{rec: state.Session{ClientID: "fz-s", NativeID: "fz-s",
		Live: &state.Config{Mode: &state.Legacy{Current: "ask", Available: []string{"ask", "plan"}}}}}
	s.turns = []state.Turn{{Index: 1, Status: state.TurnRunning}}
	s.turn = &s.turns[0]
	r.sessions["fz-s"] = s
	return r, s
}

// A tool call's content is a list (ACP ToolCallContent[]), unlike a message
// chunk's single block; its title and status must still be recorded.
func TestFzToolCallWithContentList(t *testing.T) {
	r, s := fzRecorder()
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read file.go","kind":"read","status":"pending","content":[{"type":"content","content":{"type":"text","text":"x"}}],"locations":[]}}}`)
	r.update(context.Background(), event{dir: proxy.AgentToClient, method: wire.Update, update: "tool_call", raw: frame})
	if len(s.turn.ToolCalls) != 1 || s.turn.ToolCalls[0].Title != "Read file.go" || s.turn.ToolCalls[0].Status != "pending" {
		t.Fatalf("tool call with a content list recorded as %+v", s.turn.ToolCalls)
	}
}

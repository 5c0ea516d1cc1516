package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/proxy"
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
		if to == "" {
			// No agent names a session "" (a session/new answered without
			// an id is refused), and to the ledger a native id "" is "no
			// native session yet", which maps nothing.
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
		if env.Kind == proxy.KindResponse {
			// A frame with an id and no method is a response, whose
			// params name no session: it passes as it is, and of an
			// agent's results only a session/list's is rewritten, by the
			// sessions it lists (scenario_list_rebuilt.txtar).
			if !m.Claims(dir, &f.Env) {
				return
			}
			if v, err := m.Intercept(context.Background(), f); err != nil || v.Do != proxy.Pass {
				t.Fatalf("response: verdict %v (err %v), want it passed as it is", v.Do, err)
			}
			return
		}
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

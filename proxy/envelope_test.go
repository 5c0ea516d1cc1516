package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanEnvelope(t *testing.T) {
	tests := []struct {
		name      string
		frame     string
		kind      Kind
		id        string
		method    string
		sessionID string
		update    string
		isErr     bool
	}{
		{name: "request", frame: `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`,
			kind: KindRequest, id: `1`, method: "session/prompt", sessionID: `"s1"`},
		{name: "id zero", frame: `{"jsonrpc":"2.0","id":0,"method":"initialize"}`, kind: KindRequest, id: `0`, method: "initialize"},
		{name: "negative id", frame: `{"id":-6,"method":"x","jsonrpc":"2.0"}`, kind: KindRequest, id: `-6`, method: "x"},
		{name: "string id", frame: `{"id":"abc","method":"x"}`, kind: KindRequest, id: `"abc"`, method: "x"},
		{name: "null id is a request", frame: `{"id":null,"method":"x"}`, kind: KindRequest, id: `null`, method: "x"},
		{name: "notification with update", frame: `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
			kind: KindNotification, method: "session/update", sessionID: `"s"`, update: "agent_message_chunk"},
		{name: "result", frame: `{"jsonrpc":"2.0","id":7,"result":{"sessionId":"x"}}`, kind: KindResponse, id: `7`},
		{name: "error response", frame: `{"jsonrpc":"2.0","id":"q","error":{"code":-32601,"message":"no"}}`, kind: KindResponse, id: `"q"`, isErr: true},
		{name: "white space everywhere", frame: " { \"method\" : \"m\" , \"params\" : { \"sessionId\" : \"a b\" } } \r", kind: KindNotification, method: "m", sessionID: `"a b"`},
		{name: "escaped method", frame: `{"method":"session\/new","id":2}`, kind: KindRequest, id: `2`, method: "session/new"},
		{name: "escaped key", frame: `{"\u0069d":3,"method":"m"}`, kind: KindRequest, id: `3`, method: "m"},
		{name: "later duplicate wins", frame: `{"id":1,"id":2,"method":"a","method":"b"}`, kind: KindRequest, id: `2`, method: "b"},
		{name: "nested sessionId is not the envelope's", frame: `{"method":"m","params":{"x":{"sessionId":"deep"}}}`, kind: KindNotification, method: "m"},
		{name: "sessionId of a result is not read", frame: `{"id":1,"result":{"sessionId":"r"}}`, kind: KindResponse, id: `1`},
		{name: "non-string sessionId", frame: `{"method":"m","params":{"sessionId":42}}`, kind: KindNotification, method: "m", sessionID: `42`},
		{name: "array batch", frame: `[{"id":1,"method":"m"}]`, kind: KindOther},
		{name: "bare value", frame: `"hello"`, kind: KindOther},
		{name: "empty object", frame: `{}`, kind: KindOther},
		{name: "big numbers and html", frame: `{"method":"_x","params":{"_meta":{"n":12345678901234567890,"h":"<>&"}}}`, kind: KindNotification, method: "_x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Scan([]byte(tt.frame))
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if env.Kind != tt.kind || string(env.ID) != tt.id || string(env.Method) != tt.method || string(env.Update) != tt.update || env.Error != tt.isErr {
				t.Errorf("Scan = kind %v id %q method %q update %q error %v; want %v %q %q %q %v",
					env.Kind, env.ID, env.Method, env.Update, env.Error, tt.kind, tt.id, tt.method, tt.update, tt.isErr)
			}
			got := ""
			if env.SessionID.Present() {
				got = tt.frame[env.SessionID.Start:env.SessionID.End]
			}
			if got != tt.sessionID {
				t.Errorf("sessionId span = %q, want %q", got, tt.sessionID)
			}
		})
	}
}

func TestScanRejects(t *testing.T) {
	for name, frame := range map[string]string{
		"not json":          `hello`,
		"truncated":         `{"id":1,"method":"m"`,
		"trailing garbage":  `{"id":1} x`,
		"two values":        `{} {}`,
		"invalid utf-8":     "{\"method\":\"m\",\"params\":{\"t\":\"\xff\xfe\"}}",
		"control char":      "{\"a\":\"x\x01\"}",
		"bad escape":        `{"a":"\q"}`,
		"bad unicode":       `{"a":"\u12"}`,
		"leading zero":      `{"a":01}`,
		"bare minus":        `{"a":-}`,
		"missing colon":     `{"a" 1}`,
		"trailing comma":    `{"a":1,}`,
		"single quotes":     `{'a':1}`,
		"too deep":          strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		"100k levels":       strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000),
		"lone surrogate ok": "",
	} {
		if frame == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if _, err := Scan([]byte(frame)); err == nil {
				t.Errorf("Scan(%.40q) succeeded; want a syntax error", frame)
			}
		})
	}
}

func TestScanPrefixFindsIDOfCutFrame(t *testing.T) {
	head := []byte(`{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"aaaaaaaa`)
	env := ScanPrefix(head)
	if env.Kind != KindRequest || string(env.ID) != "42" || string(env.Method) != "session/prompt" {
		t.Errorf("ScanPrefix = %v %q %q; want request 42 session/prompt", env.Kind, env.ID, env.Method)
	}
}

// TestScanStringStopsAtEveryPlace: a byte a string scan must stop for is
// found at every offset of strings long enough for every stride of the
// scan, and the frame is judged as encoding/json judges it.
func TestScanStringStopsAtEveryPlace(t *testing.T) {
	for _, stop := range []string{`"`, `\n`, `\u00e9`, `\q`, "\x01", "\u00e9", "\xff", "\xe2\x82"} {
		for n := range 100 {
			for at := 0; at <= n; at++ {
				text := strings.Repeat("a", at) + stop + strings.Repeat("b", n-at)
				frame := []byte(`{"method":"m","params":{"text":"` + text + `"}}`)
				_, err := Scan(frame)
				if valid := json.Valid(frame) && utf8.Valid(frame); (err == nil) != valid {
					t.Fatalf("Scan error %v, but json.Valid && utf8.Valid = %v for %q", err, valid, frame)
				}
			}
		}
	}
}

// TestByTailStopsAtEveryPlace reads, by the kept tail, chunks whose text
// holds a byte that stops a string scan at each place: the tail path must
// give Scan's verdict and envelope, by the word check or by the string scan
// it falls back to.
func TestByTailStopsAtEveryPlace(t *testing.T) {
	chunk := func(text string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)
	}
	for _, stop := range []string{`"`, `\n`, `\"`, `\u00e9`, `\q`, `\`, "\x01", "\n", "\u00e9", "\xff", "\xe2\x82"} {
		for n := range 40 {
			for at := 0; at <= n; at++ {
				var ss streamScanner
				var env Envelope
				if err := ss.scan(chunk("first"), &env); err != nil {
					t.Fatal(err)
				}
				frame := chunk(strings.Repeat("a", at) + stop + strings.Repeat("b", n-at))
				want, werr := Scan(frame)
				err := ss.scan(frame, &env)
				if (err == nil) != (werr == nil) {
					t.Fatalf("stream scan error %v, Scan error %v, for %q", err, werr, frame)
				}
				if err == nil && (env.Kind != want.Kind || string(env.Method) != string(want.Method) || env.SessionID != want.SessionID || string(env.Update) != string(want.Update)) {
					t.Fatalf("stream scan read %+v, Scan %+v, for %q", env, want, frame)
				}
			}
		}
	}
}

// FuzzScan checks the scanner against encoding/json: it accepts exactly the
// valid JSON in valid UTF-8, and reads the same id, method and sessionId.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}`,
		`{"id":"x","result":{}}`, `[1,2]`, `{"method":"m","params":{"update":{"sessionUpdate":"u"}}}`,
		`{"\u0069d":1}`, `{"id":1,"id":2}`, "{\"a\":\"\xff\"}", `{"a":1e5,"b":-0.5E-3,"c":[true,false,null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := Scan(b)
		valid := json.Valid(b) && utf8.Valid(b)
		if (err == nil) != valid {
			t.Fatalf("Scan error %v, but json.Valid && utf8.Valid = %v for %q", err, valid, b)
		}
		if err != nil {
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(b, &top) != nil {
			if env.Kind != KindOther {
				t.Fatalf("not an object but kind %v", env.Kind)
			}
			return
		}
		if id, ok := top["id"]; ok != (env.ID != nil) || ok && !bytes.Equal(id, env.ID) {
			t.Fatalf("id = %q, encoding/json says %q (present %v)", env.ID, id, ok)
		}
		if m, ok := top["method"]; ok {
			var s string
			if json.Unmarshal(m, &s) == nil && s != string(env.Method) {
				t.Fatalf("method = %q, encoding/json says %q", env.Method, s)
			}
		} else if env.Method != nil {
			t.Fatalf("method %q found where encoding/json sees none", env.Method)
		}
		var params map[string]json.RawMessage
		sid := []byte(nil)
		if p, ok := top["params"]; ok && json.Unmarshal(p, &params) == nil {
			sid = params["sessionId"]
		}
		got := []byte(nil)
		if env.SessionID.Present() {
			got = b[env.SessionID.Start:env.SessionID.End]
		}
		if !bytes.Equal(got, sid) {
			t.Fatalf("sessionId = %q, encoding/json says %q", got, sid)
		}
	})
}

// FuzzStreamScan checks that a frame scanned after another, from the
// snapshot the first left, gets exactly what Scan gives it.
func FuzzStreamScan(f *testing.F) {
	chunk := func(text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
	}
	for _, p := range [][2]string{
		{chunk("The relay reads one line and writes."), chunk("and the next one, which is longer than it.")},
		{chunk("The relay reads one line and writes."), chunk("The relay reads one line and writes.") + ` x`},
		{chunk("The relay reads one line and writes."), chunk("The relay reads one line and writes.\u00e9\"")},
		{chunk("The relay reads one line and writes."), `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"update":5}}`},
		{`{"id":1,"method":"m","params":{"sessionId":"aaaaaaaaaaaaaaaaaaaa","x":[{"y":"bbbbbbbbbbbbbbbbbbbbbbbbbb"}]}}`, `{"id":1,"method":"m","params":{"sessionId":"aaaaaaaaaaaaaaaaaaaa","x":[{"y":"bbbbbbbbbbbbbbbbbbbbbbbbbb"}],"sessionId":3}}`},
		{`{"method":"a\u0062","params":{"update":{"sessionUpdate":"\u0061aaaaaaaaaaaaaaaaaaa","t":"cccccccccccccccccccccccc"}}}`, `{"method":"a\u0062","params":{"update":{"sessionUpdate":"\u0061aaaaaaaaaaaaaaaaaaa","t":"cccccccccccccccccccccccc","sessionUpdate":"z"}}}`},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"a long text of the first frame"}},"sessionId":"s1"}}`, `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"and a longer one, in the frame after it"}},"sessionId":"s1"}}`},
		{`{"id":["a string that is long enough"],"result":{}}`, `{"id":["a string that is much longer than the first"],"result":{}}`},
		{chunk("The relay reads one line and writes."), chunk(`bad \x escape here, and long`)},
		{chunk("The relay reads one line and writes."), strings.Replace(chunk("x"), `"text":"x"`, `"text":0"`, 1)},
		{chunk("The relay reads one line and writes."), chunk(`a control \u0001 char, and \ud800 alone`)},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// a, then b twice (the second time from what b left), then a.
		var ss streamScanner
		for k, frame := range [][]byte{a, b, b, a} {
			var got Envelope
			gerr := ss.scan(frame, &got)
			want, werr := Scan(frame)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("frame %d of %q, %q: stream scan error %v, Scan error %v", k, a, b, gerr, werr)
			}
			if got.Kind != want.Kind || !bytes.Equal(got.ID, want.ID) || !bytes.Equal(got.Method, want.Method) ||
				(got.Method == nil) != (want.Method == nil) || got.SessionID != want.SessionID ||
				!bytes.Equal(got.Update, want.Update) || (got.Update == nil) != (want.Update == nil) || got.Error != want.Error {
				t.Fatalf("frame %d of %q, %q: stream scan %+v, Scan %+v", k, a, b, got, want)
			}
		}
	})
}

// TestStreamScanSkipsTheSameTail: a chunk after a chunk is scanned in its
// text alone, and still gets Scan's envelope, with spans after the text
// moved by the difference in length.
func TestStreamScanSkipsTheSameTail(t *testing.T) {
	var ss streamScanner
	var env Envelope
	first := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"The relay reads one line."}},"sessionId":"sess_1"}}`
	if err := ss.scan([]byte(first), &env); err != nil || !ss.haveTail {
		t.Fatalf("first frame: %v, tail kept %v", err, ss.haveTail)
	}
	next := []byte(strings.Replace(first, "The relay reads one line.", `and then it writes the same bytes on, \u00e9`, 1))
	if err := ss.scan(next, &env); err != nil {
		t.Fatal(err)
	}
	want, _ := Scan(next)
	if env.SessionID != want.SessionID || string(next[env.SessionID.Start:env.SessionID.End]) != `"sess_1"` ||
		string(env.Update) != "agent_message_chunk" || env.Kind != KindNotification || string(env.Method) != "session/update" {
		t.Errorf("by the tail: %+v, Scan %+v", env, want)
	}
	if err := ss.scan(next[:len(next)-1], &env); err == nil {
		t.Error("a frame cut in its tail was taken by the tail")
	}
	bad := []byte(strings.Replace(first, "The relay reads one line.", `The relay \q reads one line.`, 1))
	if err := ss.scan(bad, &env); err == nil {
		t.Error("a bad escape in the text was taken by the tail")
	}
}

func TestStreamScanResumesAtTheText(t *testing.T) {
	var ss streamScanner
	first := []byte(benchChunk)
	var got Envelope
	if err := ss.scan(first, &got); err != nil {
		t.Fatal(err)
	}
	if want := bytes.LastIndex(first, []byte(`"The relay`)); !ss.have || len(ss.prev) != want {
		t.Fatalf("snapshot at %d (have %v), want at the text, %d", len(ss.prev), ss.have, want)
	}
	next := []byte(strings.Replace(benchChunk, "The relay", "Then \\u00e9", 1))
	err := ss.scan(next, &got)
	want, werr := Scan(next)
	if err != nil || werr != nil || got.Kind != want.Kind || string(got.Method) != string(want.Method) ||
		got.SessionID != want.SessionID || string(got.Update) != string(want.Update) {
		t.Errorf("resumed scan %+v (%v), Scan %+v (%v)", got, err, want, werr)
	}
	if err := ss.scan(next[:len(next)-1], &got); err == nil {
		t.Error("a resumed scan accepted a truncated frame")
	}
}

func TestTailID(t *testing.T) {
	for tail, want := range map[string]string{
		`aaa"},"id":5}`:                 `5`,
		`aaa"}, "id" : "x\"y" }` + "\r": `"x\"y"`,
		`aaa"},"id":null}`:              `null`,
		`"a":{"id":5}}`:                 ``,
		`"text":"\"id\":5}`:             ``,
		`aaa","id":5`:                   ``,
		`x"id":5}`:                      ``,
	} {
		if got := string(TailID([]byte(tail))); got != want {
			t.Errorf("TailID(%q) = %q, want %q", tail, got, want)
		}
	}
}

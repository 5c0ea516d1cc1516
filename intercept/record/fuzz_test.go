package record

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// A fuzz target for the record's decoding of config catalogs and updates
// (the agent's words, kept raw, one bad option never costing the others).

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
		`{"sessionUpdate":"notice","severity":"warning","title":"T","description":null}`,
		`{"sessionUpdate":"session_info_update","title":null}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":[{"type":"text","text":"s"}]}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"type":"text","text":"s"}}`,
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
		for _, kind := range []string{"config_option_update", "current_mode_update", "agent_message_chunk", "tool_call", "tool_call_update",
			updNotice, updNoticeChunk, updSessionInfo, updCompaction, updCompactionChunk} {
			r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: kind, Raw: elem})
			frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":` + string(elem) + `}}`)
			r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: kind, Raw: frame})
		}
		s.Turn = nil
		r.response(ctx, Event{Dir: proxy.AgentToClient, Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":` + string(elem) + `}`),
			Req: &Request{Method: wire.SetConfigOption, SID: "fz-s", Params: json.RawMessage(`{"sessionId":"fz-s","configId":"fz-a","value":"y"}`)}})

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
		r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: "config_option_update", Raw: frame})
		fzCheckGood(t, "config_option_update", s.Rec.Live.Options)
		stored, err := r.cfg.Store.Session(ctx, "fz-s")
		if err != nil {
			t.Fatalf("the update was not stored: %v", err)
		}
		fzCheckGood(t, "stored live", stored.Live.Options)
		// A current_mode_update sets live's mode to what the agent said, or
		// leaves it alone when it said nothing usable.
		r, s = fzRecorder()
		frame = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":{"sessionUpdate":"current_mode_update","currentModeId":` + string(elem) + `}}}`)
		r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: "current_mode_update", Raw: frame})
		var mode string
		if json.Unmarshal(elem, &mode) == nil && mode != "" {
			if s.Rec.Live.Mode == nil || s.Rec.Live.Mode.Current != mode {
				t.Fatalf("current_mode_update %s: live mode %+v", elem, s.Rec.Live.Mode)
			}
		} else if s.Rec.Live.Mode == nil || s.Rec.Live.Mode.Current != "ask" {
			t.Fatalf("current_mode_update with currentModeId %s changed live's mode to %+v", elem, s.Rec.Live.Mode)
		}
	})
}

// fzRecorder is a recorder that knows one session, fz-s, with a running
// turn, in mode "ask"; its methods are called directly, so a panic is not
// caught by apply's recover.
func fzRecorder() (*Recorder, *Session) {
	r := New(Config{Store: state.NewMemory()}, ledger.New(func() {}), life.New(life.NewSignal()))
	s := &Session{Rec: state.Session{ClientID: "fz-s", NativeID: "fz-s",
		Live: &state.Config{Mode: &state.Legacy{Current: "ask", Available: []string{"ask", "plan"}}}}}
	s.Turns = []state.Turn{{Index: 1, Status: state.TurnRunning}}
	s.Turn = &s.Turns[0]
	r.sessions["fz-s"] = s
	return r, s
}

// A tool call's content is a list (ACP ToolCallContent[]), unlike a message
// chunk's single block; its title and status must still be recorded.
func TestFzToolCallWithContentList(t *testing.T) {
	r, s := fzRecorder()
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read file.go","kind":"read","status":"pending","content":[{"type":"content","content":{"type":"text","text":"x"}}],"locations":[]}}}`)
	r.update(context.Background(), Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: "tool_call", Raw: frame})
	if len(s.Turn.ToolCalls) != 1 || s.Turn.ToolCalls[0].Title != "Read file.go" || s.Turn.ToolCalls[0].Status != "pending" {
		t.Fatalf("tool call with a content list recorded as %+v", s.Turn.ToolCalls)
	}
}

// TestSetModeMovesTheModeOption: a session/set_mode the agent accepted moves
// the mode option of live too, before the agent's config_option_update
// says so. A rebuild reads the option first; left stale, a rebuild the
// agent died under before its update came restored the mode the client
// had left (the soak's partial-config, seed 1796184479347269614).
func TestSetModeMovesTheModeOption(t *testing.T) {
	r, s := fzRecorder()
	s.Rec.Live.Options = []state.Option{{ID: "mode", Category: "mode", Type: "select", Current: json.RawMessage(`"ask"`),
		Values: []state.Value{{Value: json.RawMessage(`"ask"`)}, {Value: json.RawMessage(`"plan"`)}}}}
	r.response(context.Background(), Event{Dir: proxy.AgentToClient, Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`),
		Req: &Request{Method: wire.SetMode, SID: "fz-s", Params: json.RawMessage(`{"sessionId":"fz-s","modeId":"plan"}`)}})
	if got := s.Rec.Live.Mode.Current; got != "plan" {
		t.Errorf("legacy mode after set_mode = %q, want plan", got)
	}
	if got := string(s.Rec.Live.ByCategory("mode").Current); got != `"plan"` {
		t.Errorf("mode option after set_mode = %s, want \"plan\"", got)
	}
}

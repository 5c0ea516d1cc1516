package record

import (
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// chunkFrame is raw, an agent's frame, scanned as the relay scans it.
func chunkFrame(t *testing.T, raw string) *proxy.Frame {
	t.Helper()
	env, err := proxy.Scan([]byte(raw))
	if err != nil {
		t.Fatalf("scan %s: %v", raw, err)
	}
	return &proxy.Frame{Dir: proxy.AgentToClient, Raw: []byte(raw), Env: env}
}

// TestCollectCutsAsClip: an answer collected past the budget is what
// putTurn stores of the whole answer, clip's cut, whatever the chunks' sizes,
// and clipped hands it on as it is.
func TestCollectCutsAsClip(t *testing.T) {
	if got, want := clip(strings.Repeat("é", 10), 7), "ééé\xc3"+cutMark; got != want {
		t.Fatalf("clip = %q, want %q: cutMark is not what clip appends", got, want)
	}
	for _, tt := range []struct {
		budget int
		chunks []string
	}{
		{10, []string{"abc", "defg", "hij"}},         // exactly the budget: kept whole, no mark
		{10, []string{"abc", "defg", "hijk", "lmn"}}, // one byte over
		{10, []string{strings.Repeat("x", 100)}},     // one chunk far over
		{10, []string{"ab", "ééééé", "z"}},           // cut inside a rune, as clip cuts
		{10, []string{"abc"}},                        // under the budget
	} {
		led := ledger.New(func() {})
		r := New(Config{Store: state.NewMemory(), HandoffBudget: tt.budget}, led, life.New(life.NewSignal()))
		led.Update(func(f *ledger.Flight) { f.Requests.Record("test-prompt", "session/prompt", "s1") })
		for _, text := range tt.chunks {
			r.text.TakeChunk(chunkFrame(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+text+`"}}}}`))
		}
		got := r.text.TakeAnswer("s1")
		want := clip(strings.Join(tt.chunks, ""), tt.budget)
		if got != want {
			t.Errorf("chunks %q: collected %q, want clip's %q", tt.chunks, got, want)
		}
		if c := clipped(got, tt.budget); c != want {
			t.Errorf("chunks %q: clipped = %q, want %q", tt.chunks, c, want)
		}
		var sink string
		if n := testing.AllocsPerRun(10, func() { sink = clipped(got, tt.budget) }); n != 0 || sink != want {
			t.Errorf("chunks %q: clipped allocates %v times, want no copy", tt.chunks, n)
		}
	}
}

// TestWholeMessages: a v2 agent_message is the message's text from then on:
// an upsert of the same message replaces it, chunks of it append, a new
// message follows the last, and an upsert with no content leaves the text.
func TestWholeMessages(t *testing.T) {
	led := ledger.New(func() {})
	r := New(Config{Store: state.NewMemory()}, led, life.New(life.NewSignal()))
	led.Update(func(f *ledger.Flight) { f.Requests.Record("test-prompt", "session/prompt", "s1") })
	msg := func(id, content string) {
		r.text.Message(chunkFrame(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message","messageId":"`+id+`"`+content+`}}}`))
	}
	chunk := func(id, text string) {
		r.text.TakeChunk(chunkFrame(t, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"`+id+`","content":{"type":"text","text":"`+text+`"}}}}`))
	}
	msg("m1", `,"content":[{"type":"text","text":"draft"}]`)
	msg("m1", `,"content":[{"type":"text","text":"Hello"},{"type":"image","data":"x","mimeType":"image/png"}]`)
	chunk("m1", ", world.")
	msg("m1", "") // no content: unchanged
	msg("m2", `,"content":[{"type":"text","text":" Bye."}]`)
	if got, want := r.text.TakeAnswer("s1"), "Hello, world. Bye."; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

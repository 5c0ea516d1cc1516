package record

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/google/go-cmp/cmp"
)

// update wraps a session update of session fz-s in its frame.
func updateFrame(update string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fz-s","update":` + update + `}}`
}

// claudeNotice is a notice's transcript form as claude-agent-acp 0.101.0
// writes it for a client without notices.
const claudeNotice = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"**Warning:** Stop hook blocked"},"_meta":{"claudeCode":{"kind":"informational","level":"warning"}}}`

func TestNoticeChunkCheck(t *testing.T) {
	for _, tt := range []struct {
		name          string
		update        string
		maybe, notice bool
	}{
		{"claude informational", claudeNotice, true, true},
		{"claude mcp server status", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"**MCP server \"x\" failed to start**"},"_meta":{"claudeCode":{"kind":"mcpServerStatus","server":"x","status":"failed"}}}`, true, true},
		{"text", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi }}}}}"}}`, false, false},
		{"text with a messageId", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m1"}`, false, false},
		{"text with annotations", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi","annotations":{"priority":1}}}`, false, false},
		{"a subagent's text", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m1","_meta":{"claudeCode":{"parentToolUseId":"t1"}}}`, false, false},
		{"text that quotes a kind", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\"kind\":\"informational\""},"_meta":{"claudeCode":{"parentToolUseId":"t1"}}}`, false, false},
		{"a kind of another shape", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"_meta":{"claudeCode":{"kind":"other"}}}`, true, false},
		{"a _meta of another shape", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"_meta":{"claudeCode":[{"kind":"informational"}]}}`, false, false},
		{"kind far from the end", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"_meta":{"claudeCode":{"kind":"informational","x":"` + strings.Repeat("y", 300) + `"}}}`, false, false},
	} {
		for _, end := range []string{"", "\r", " "} {
			raw := []byte(updateFrame(tt.update) + end)
			if got := mayBeNotice(raw); got != tt.maybe {
				t.Errorf("%s %q: mayBeNotice = %v, want %v", tt.name, end, got, tt.maybe)
			}
			if got := mayBeNotice(raw) && noticeChunk(raw); got != tt.notice {
				t.Errorf("%s %q: a notice = %v, want %v", tt.name, end, got, tt.notice)
			}
		}
	}
}

// A notice's chunk is not collected into the answer: it goes to the
// record's goroutine, which keeps it among the turn's notices.
func TestNoticeChunkIsNotTheAnswer(t *testing.T) {
	led := ledger.New(func() {})
	r := New(Config{Store: state.NewMemory()}, led, life.New(life.NewSignal()))
	led.Update(func(f *ledger.Flight) { f.Requests.Record("test-prompt", "session/prompt", "fz-s") })
	s := &Session{Rec: state.Session{ClientID: "fz-s", NativeID: "fz-s"}, Turns: []state.Turn{{Index: 1, Status: state.TurnRunning}}}
	s.Turn = &s.Turns[0]
	r.sessions["fz-s"] = s
	for _, u := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}`,
		claudeNotice,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" world"}}`,
	} {
		r.text.TakeChunk(chunkFrame(t, updateFrame(u)))
	}
	if got := r.text.TakeAnswer("fz-s"); got != "Hello world" {
		t.Errorf("answer %q, want %q", got, "Hello world")
	}
	if len(r.events) != 1 {
		t.Fatalf("%d events queued, want the notice's", len(r.events))
	}
	r.apply(context.Background(), <-r.events)
	if diff := cmp.Diff([]string{"**Warning:** Stop hook blocked"}, s.Turn.Notices); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

func TestNoticeUpdate(t *testing.T) {
	r, s := fzRecorder()
	for _, u := range []string{
		`{"sessionUpdate":"notice","severity":"warning","title":"Model fallback","description":"deep-3 is busy; using smart-2."}`,
		`{"sessionUpdate":"notice","severity":"info","title":"Task stopped by user"}`,
		`{"sessionUpdate":"notice","severity":"_vendor","title":"  Odd  ","description":null}`,
		`{"sessionUpdate":"notice","severity":"error","title":""}`,
	} {
		r.update(context.Background(), Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: updNotice, Raw: []byte(updateFrame(u))})
	}
	want := []string{"warning: Model fallback: deep-3 is busy; using smart-2.", "Task stopped by user", "_vendor: Odd", "error:"}
	if diff := cmp.Diff(want, s.Turn.Notices); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	// Outside a turn a notice belongs to none.
	s.Turn = nil
	r.update(context.Background(), Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: updNotice, Raw: []byte(updateFrame(`{"sessionUpdate":"notice","severity":"info","title":"late"}`))})
	if n := len(s.Turns[0].Notices); n != len(want) {
		t.Errorf("a notice between turns went to a turn (%d notices)", n)
	}
}

// A title is a patch: a string replaces it, null clears it, and an update
// without one leaves it; an empty one, or one the agent made of the
// handoff, leaves it too.
func TestSessionInfoTitle(t *testing.T) {
	r, s := fzRecorder()
	ctx := context.Background()
	for _, tt := range []struct{ update, want string }{
		{`{"sessionUpdate":"session_info_update","title":"Fix the relay","updatedAt":"2026-01-01T00:00:00Z"}`, "Fix the relay"},
		{`{"sessionUpdate":"session_info_update","updatedAt":"2026-01-01T00:01:00Z"}`, "Fix the relay"},
		{`{"sessionUpdate":"session_info_update","title":""}`, "Fix the relay"},
		{`{"sessionUpdate":"session_info_update","title":"` + replay.HandoffTag + `What follows is"}`, "Fix the relay"},
		{`{"sessionUpdate":"session_info_update","title":7}`, "Fix the relay"},
		{`{"sessionUpdate":"session_info_update","title":"Fix the relay, again"}`, "Fix the relay, again"},
		{`{"sessionUpdate":"session_info_update","title":null}`, ""},
	} {
		r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: updSessionInfo, Raw: []byte(updateFrame(tt.update))})
		if s.Rec.Title != tt.want {
			t.Errorf("after %s: title %q, want %q", tt.update, s.Rec.Title, tt.want)
		}
		if stored, err := r.cfg.Store.Session(ctx, "fz-s"); err != nil || stored.Title != tt.want {
			t.Errorf("after %s: stored %+v, %v; want title %q", tt.update, stored, err, tt.want)
		}
	}
}

func TestCompaction(t *testing.T) {
	ctx := context.Background()
	send := func(r *Recorder, kind, u string) {
		r.update(ctx, Event{Dir: proxy.AgentToClient, Method: wire.Update, Update: kind, Raw: []byte(updateFrame(u))})
	}
	start := `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"in_progress"}`
	chunk := func(text string) string {
		return `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"text","text":"` + text + `"}}`
	}
	end := func(status, summary string) string {
		u := `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"` + status + `"`
		if summary != "" {
			u += `,"summary":` + summary
		}
		return u + "}"
	}
	for _, tt := range []struct {
		name  string
		steps [][2]string
		want  *state.Compaction
	}{
		{"streamed", [][2]string{{updCompaction, start}, {updCompactionChunk, chunk("## Kept\\n")}, {updCompactionChunk, chunk("teal")},
			{updCompactionChunk, `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"image","data":"x","mimeType":"image/png"}}`},
			{updCompaction, end("completed", "")}},
			&state.Compaction{ID: "c1", Turn: 1, Summary: "## Kept\nteal"}},
		{"replaced at the end", [][2]string{{updCompaction, start}, {updCompactionChunk, chunk("draft")},
			{updCompaction, end("completed", `[{"type":"text","text":"final "},{"type":"text","text":"summary"}]`)}},
			&state.Compaction{ID: "c1", Turn: 1, Summary: "final summary"}},
		{"cleared", [][2]string{{updCompaction, start}, {updCompactionChunk, chunk("draft")}, {updCompaction, end("completed", `null`)}}, nil},
		{"failed", [][2]string{{updCompaction, start}, {updCompactionChunk, chunk("draft")}, {updCompaction, end("failed", "")}}, nil},
		{"unknown status stays open", [][2]string{{updCompaction, start}, {updCompactionChunk, chunk("draft")}, {updCompaction, end("_paused", "")}}, nil},
		{"completed at once in a turn", [][2]string{{updCompaction, end("completed", `[{"type":"text","text":"all of it"}]`)}},
			&state.Compaction{ID: "c1", Turn: 1, Summary: "all of it"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, s := fzRecorder()
			for _, st := range tt.steps {
				send(r, st[0], st[1])
			}
			got := s.Rec.Compaction
			if got != nil && tt.want != nil {
				tt.want.At = got.At // the clock is not the test's
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("compaction (-want +got):\n%s", diff)
			}
		})
	}

	// Between turns a compaction belongs to the next turn; one first seen
	// finished between turns is the agent's load replaying its history,
	// and moves nothing; a patch of the recorded one keeps its turn.
	r, s := fzRecorder()
	s.Turns[0].Status, s.Turn = state.TurnCompleted, nil
	send(r, updCompaction, start)
	send(r, updCompaction, end("completed", `[{"type":"text","text":"idle summary"}]`))
	if c := s.Rec.Compaction; c == nil || c.Turn != 2 || c.Summary != "idle summary" {
		t.Fatalf("idle compaction recorded as %+v; want turn 2", c)
	}
	send(r, updCompaction, `{"sessionUpdate":"compaction_update","compactionId":"c0","status":"completed","summary":[{"type":"text","text":"old"}]}`)
	send(r, updCompaction, end("completed", ""))
	if c := s.Rec.Compaction; c == nil || c.ID != "c1" || c.Turn != 2 || c.Summary != "idle summary" {
		t.Errorf("after a replay: %+v; want c1 at turn 2 as it was", c)
	}
	stored, err := r.cfg.Store.Session(ctx, "fz-s")
	if err != nil || stored.Compaction == nil || stored.Compaction.Summary != "idle summary" {
		t.Errorf("stored compaction %+v, %v", stored, err)
	}
	// A summary longer than a handoff can carry is cut.
	r, s = fzRecorder()
	send(r, updCompaction, end("completed", `[{"type":"text","text":"`+strings.Repeat("x", 2*replay.MaxBudget)+`"}]`))
	if c := s.Rec.Compaction; c == nil || len(c.Summary) > answerBudget(0)+len(cutMark) {
		t.Errorf("a long summary kept as %d bytes", len(c.Summary))
	}
}

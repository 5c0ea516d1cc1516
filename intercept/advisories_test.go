package intercept_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/state"
	acp "github.com/coder/acp-go-sdk"
)

// What today's agents send that is not the conversation: notices, titles
// and compactions (docs/record.md, docs/sessions.md), through a real
// sidecar and the fake agent.

// promptsAfter are the texts of the session/prompt requests the fake agent
// received after the first n calls, each prompt's text blocks joined.
func promptsAfter(t *testing.T, r *rig, n int) []string {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(r.callLog)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range calls[n:] {
		if c.Method != "session/prompt" {
			continue
		}
		var p struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
		}
		jsonUnmarshal(c.Params, &p)
		var texts []string
		for _, b := range p.Prompt {
			texts = append(texts, b.Text)
		}
		out = append(out, strings.Join(texts, "\n"))
	}
	return out
}

func turnsOf(t *testing.T, r *rig, sid acp.SessionId) []state.Turn {
	t.Helper()
	turns, err := r.store.Turns(t.Context(), string(sid))
	if err != nil {
		t.Fatal(err)
	}
	return turns
}

// TestNoticesAreNotTheAnswer: a turn's notice update and claude's
// informational chunk are the turn's notices; its answer is the agent's
// reply alone, and the handoff a rewind arms carries no notice.
func TestNoticesAreNotTheAnswer(t *testing.T) {
	r := newRig(t, intercept.Config{}, "-notices")
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	reply(t, r, sid, "My favourite colour is teal")
	_, seen, err := r.client.Prompt(ctx, sid, "Warn me "+fakeagent.NoticeTrigger)
	if err != nil || !strings.Contains(seen, fakeagent.InformationalText) {
		t.Fatalf("prompt: %v; the client saw %q, want the informational chunk passed on", err, seen)
	}
	reply(t, r, sid, "My favourite animal is an otter")

	turns := turnsOf(t, r, sid)
	if len(turns) != 3 {
		t.Fatalf("%d turns recorded, want 3", len(turns))
	}
	noticed := turns[1]
	want := []string{"warning: " + fakeagent.NoticeTitle + ": " + fakeagent.NoticeDescription, strings.TrimSpace(fakeagent.InformationalText)}
	if !slices.Equal(noticed.Notices, want) {
		t.Errorf("turn 2 notices %q, want %q", noticed.Notices, want)
	}
	if strings.Contains(noticed.Answer, fakeagent.NoticeMark) {
		t.Errorf("turn 2 answer %q holds the notice", noticed.Answer)
	}
	if r2, ok := fakeagent.ParseReply(noticed.Answer); !ok || !strings.HasPrefix(noticed.Answer, fakeagent.ReplyPrefix) || r2.Turns != 2 {
		t.Errorf("turn 2 answer %q, want the reply line alone", noticed.Answer)
	}
	if len(turns[0].Notices)+len(turns[2].Notices) != 0 {
		t.Errorf("notices on turns without: %q, %q", turns[0].Notices, turns[2].Notices)
	}

	// The rewind takes turn 3 back and hands turns 1 and 2 to a fresh
	// native session: their prompts and answers, no notice.
	calls := len(r.calls(t))
	if _, text, err := r.client.Prompt(ctx, sid, "/rewind"); err != nil || !strings.Contains(text, "2 turn(s) kept") {
		t.Fatalf("/rewind answered %q, %v", text, err)
	}
	after := reply(t, r, sid, "echo: what do you know?")
	handoff := strings.Join(after.Echo, "\n")
	if !strings.Contains(handoff, "teal") || !strings.Contains(handoff, "Warn me") || strings.Contains(handoff, "otter") {
		t.Errorf("handoff %q: want turns 1 and 2, not 3", handoff)
	}
	got := promptsAfter(t, r, calls)
	if len(got) != 1 {
		t.Fatalf("the agent got %d prompts after the rewind, want 1", len(got))
	}
	if strings.Contains(got[0], fakeagent.NoticeMark) || strings.Contains(got[0], "Warning") {
		t.Errorf("the agent was handed a notice:\n%s", got[0])
	}
}

// TestWarningsInText: codex-acp 2.6.0 writes its warnings, to a client
// without notices, as message text, "Warning: …", with no messageId. From
// an agent that names itself so (life.Habits.WarnsInText) the record keeps
// such a chunk as the turn's notice, and the handoff leaves it out; from
// any other agent, whose answer may well start so, it is the answer's.
func TestWarningsInText(t *testing.T) {
	warning := strings.TrimSpace(fakeagent.WarningText)
	for _, tt := range []struct {
		name   string
		agent  []string
		notice bool
	}{
		{"codex-acp 2.6.0", []string{"-agent-name", "@agentclientprotocol/codex-acp", "-agent-version", "2.6.0"}, true},
		{"codex-acp 2.5.0", []string{"-agent-name", "@agentclientprotocol/codex-acp", "-agent-version", "2.5.0"}, false},
		{"another agent", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, intercept.Config{}, append([]string{"-notices", "-warns-in-text", "-message-ids"}, tt.agent...)...)
			ctx := t.Context()
			sess, err := r.client.NewSession(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			sid := sess.SessionId
			if _, seen, err := r.client.Prompt(ctx, sid, "Warn me "+fakeagent.NoticeTrigger); err != nil || !strings.Contains(seen, warning) {
				t.Fatalf("prompt: %v; the client saw %q, want the warning passed on", err, seen)
			}
			turns := turnsOf(t, r, sid)
			if len(turns) != 1 {
				t.Fatalf("%d turns recorded, want 1", len(turns))
			}
			inAnswer, inNotices := strings.Contains(turns[0].Answer, warning), slices.Contains(turns[0].Notices, warning)
			if inNotices != tt.notice || inAnswer == tt.notice {
				t.Errorf("the warning is in the answer %v, in the notices %v (%q); want it a notice: %v", inAnswer, inNotices, turns[0].Notices, tt.notice)
			}
			if !tt.notice {
				return
			}
			reply(t, r, sid, "My favourite animal is an otter")
			calls := len(r.calls(t))
			if _, text, err := r.client.Prompt(ctx, sid, "/rewind"); err != nil || !strings.Contains(text, "1 turn(s) kept") {
				t.Fatalf("/rewind answered %q, %v", text, err)
			}
			reply(t, r, sid, "echo: what do you know?")
			got := promptsAfter(t, r, calls)
			if len(got) != 1 || !strings.Contains(got[0], "Warn me") || strings.Contains(got[0], warning) {
				t.Errorf("the agent was handed, after the rewind: %q; want turn 1 without its warning", got)
			}
		})
	}
}

// TestTitleIsRecorded: the agent's title is the record's, the latest wins,
// one the agent made of a handoff or of a rebuilt native session's own
// first prompt is not taken, a rename is, and the session/list the sidecar
// answers (the fake agent has none) shows it.
func TestTitleIsRecorded(t *testing.T) {
	r := newRig(t, intercept.Config{}, "-info-updates")
	ctx := t.Context()
	cwd := t.TempDir()
	sess, err := r.client.NewSession(ctx, cwd)
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	title := func() string {
		t.Helper()
		rec, err := r.store.Session(ctx, string(sid))
		if err != nil {
			t.Fatal(err)
		}
		return rec.Title
	}
	listed := func() string {
		t.Helper()
		l, err := r.client.List(ctx, cwd)
		if err != nil || len(l.Sessions) != 1 || l.Sessions[0].Title == nil {
			t.Fatalf("session/list = %+v, %v; want the session with a title", l, err)
		}
		return *l.Sessions[0].Title
	}
	reply(t, r, sid, "Plan the relay")
	reply(t, r, sid, "and then?")
	if got := title(); got != "Plan the relay" {
		t.Errorf("title %q, want the agent's %q", got, "Plan the relay")
	}
	// A rewind: the fresh native session's first prompt leads with the
	// handoff, and the agent titles it so; the record keeps its title.
	if _, _, err := r.client.Prompt(ctx, sid, "/rewind"); err != nil {
		t.Fatal(err)
	}
	reply(t, r, sid, "go on")
	if got := title(); got != "Plan the relay" {
		t.Errorf("after a rewind title %q, want it kept from the handoff's", got)
	}
	// A reset: the fresh native session is titled from its own first
	// prompt, which is not the session's: the session keeps its title,
	// turn after turn.
	if _, _, err := r.client.Prompt(ctx, sid, "/reset"); err != nil {
		t.Fatal(err)
	}
	reply(t, r, sid, "Write the docs")
	reply(t, r, sid, "and the tests")
	if got := title(); got != "Plan the relay" {
		t.Errorf("after a reset title %q, want the session's own, %q", got, "Plan the relay")
	}
	if got := listed(); got != "Plan the relay" {
		t.Errorf("session/list title %q, want the session's own %q", got, "Plan the relay")
	}
	// The agent renames the session on a turn the client sent: that is
	// the session's title from then on.
	reply(t, r, sid, "rename Relay plan, docs")
	reply(t, r, sid, "more")
	if got := title(); got != "Relay plan, docs" {
		t.Errorf("after a rename title %q, want the agent's %q", got, "Relay plan, docs")
	}
	if got := listed(); got != "Relay plan, docs" {
		t.Errorf("session/list title %q, want the agent's %q", got, "Relay plan, docs")
	}
}

// TestHandoffAfterCompaction: a compaction of the agent's is the record's,
// and the handoff after it hands over its summary, then the turns from the
// compaction's on, none before it.
func TestHandoffAfterCompaction(t *testing.T) {
	r := newRig(t, intercept.Config{}, "-compaction")
	ctx := t.Context()
	sess, err := r.client.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	reply(t, r, sid, "My favourite colour is teal")
	second := reply(t, r, sid, "My favourite animal is an otter "+fakeagent.CompactTrigger)
	reply(t, r, sid, "My favourite tree is a larch")
	rec, err := r.store.Session(ctx, string(sid))
	if err != nil {
		t.Fatal(err)
	}
	summary := fakeagent.CompactionSummary(second.Session, 2)
	if c := rec.Compaction; c == nil || c.ID != fakeagent.CompactionID(2) || c.Turn != 2 || c.Summary != summary {
		t.Fatalf("compaction recorded as %+v; want %s at turn 2 with %q", c, fakeagent.CompactionID(2), summary)
	}

	calls := len(r.calls(t))
	if _, text, err := r.client.Prompt(ctx, sid, "/rewind"); err != nil || !strings.Contains(text, "2 turn(s) kept") {
		t.Fatalf("/rewind answered %q, %v", text, err)
	}
	reply(t, r, sid, "echo: what do you know?")
	got := promptsAfter(t, r, calls)
	if len(got) != 1 {
		t.Fatalf("the agent got %d prompts after the rewind, want 1", len(got))
	}
	handoff := got[0]
	i, j := strings.Index(handoff, summary), strings.Index(handoff, "otter")
	if i < 0 || j < i {
		t.Errorf("the handoff does not start with the summary before turn 2:\n%s", handoff)
	}
	if head := handoff[:max(i, 0)]; strings.Contains(head, "<turn") {
		t.Errorf("a turn comes before the summary:\n%s", handoff)
	}
	for _, not := range []string{"teal", "larch"} {
		if strings.Contains(handoff, not) {
			t.Errorf("the handoff has %q (turn 1 is in the summary, turn 3 was taken back):\n%s", not, handoff)
		}
	}
}

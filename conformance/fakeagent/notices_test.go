package fakeagent_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestNoticesAndCompaction: under -notices and -compaction the triggers
// send, ahead of the reply line, a notice, claude's informational chunk,
// and a compaction with its summary in two chunks; without the flags the
// same prompt sends none of them.
func TestNoticesAndCompaction(t *testing.T) {
	a := start(t, acpclient.Options{}, "-notices", "-compaction", "-commands=false")
	s, ctx := a.session(t)
	sid := string(s.SessionId)
	a.reply(ctx, t, s.SessionId, "first")
	mark := len(a.Lines())
	stop, text, err := a.Prompt(ctx, s.SessionId, "please "+fakeagent.NoticeTrigger+" and "+fakeagent.CompactTrigger)
	if err != nil || stop != "end_turn" {
		t.Fatalf("prompt: %v, %v", stop, err)
	}
	if !strings.HasPrefix(text, fakeagent.InformationalText) {
		t.Errorf("the client's text %q does not start with the informational chunk", text)
	}
	if r, ok := fakeagent.ParseReply(text); !ok || r.Turns != 2 {
		t.Errorf("reply %+v, %v in %q", r, ok, text)
	}
	var got []string
	for _, l := range a.Lines()[mark:] {
		got = append(got, describe(l))
	}
	chunk := "session/update@" + sid + ":agent_message_chunk"
	want := []string{
		"session/update@" + sid + ":notice",
		chunk,
		"session/update@" + sid + ":compaction_update:in_progress",
		"session/update@" + sid + ":compaction_summary_chunk",
		"session/update@" + sid + ":compaction_summary_chunk",
		"session/update@" + sid + ":compaction_update:completed",
		chunk, chunk,
		"prompt result:end_turn",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames of the turn (-want +got):\n%s", diff)
	}
	lines := a.Lines()[mark:]
	for i, want := range map[int]string{
		0: `"title":"` + fakeagent.NoticeTitle + `","description":"` + fakeagent.NoticeDescription + `"`,
		1: `"_meta":{"claudeCode":{"kind":"informational","level":"warning"}}}}}`,
		3: `"compactionId":"` + fakeagent.CompactionID(2) + `"`,
	} {
		if !strings.Contains(string(lines[i]), want) {
			t.Errorf("line %d = %s, want %s in it", i, lines[i], want)
		}
	}
	if strings.Contains(string(lines[1]), "messageId") {
		t.Errorf("the informational chunk has a messageId: %s", lines[1])
	}

	plain := start(t, acpclient.Options{}, "-commands=false")
	ps, pctx := plain.session(t)
	mark = len(plain.Lines())
	plain.reply(pctx, t, ps.SessionId, fakeagent.NoticeTrigger+" "+fakeagent.CompactTrigger)
	if n := len(plain.Lines()[mark:]); n != 3 {
		t.Errorf("without the flags the turn has %d frames, want the reply's 2 chunks and the result", n)
	}
}

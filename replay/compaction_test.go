package replay

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/google/go-cmp/cmp"
)

// compactedSession is a session whose agent compacted its context in turn 3
// of five.
func compactedSession() (*state.Session, []state.Turn) {
	s := &state.Session{ClientID: "s", Compaction: &state.Compaction{ID: "cmp_1", Turn: 3, Summary: "SUMMARY of teal and otter"}}
	var turns []state.Turn
	for i := 1; i <= 5; i++ {
		turns = append(turns, turn(i, state.TurnCompleted, fmt.Sprintf("P%dP", i), fmt.Sprintf("A%dA", i)))
	}
	return s, turns
}

// labels names each item of a conversation: "summary" for a compaction's
// summary, of(turn) for a turn.
func labels(conv []state.Turn, of func(*state.Turn) string) []string {
	var out []string
	for i := range conv {
		if IsSummary(&conv[i]) {
			out = append(out, "summary")
			continue
		}
		out = append(out, of(&conv[i]))
	}
	return out
}

// The conversation after a compaction is its summary, then the turns from
// the compaction's on; a compaction the conversation no longer has (a reset
// after it, its turn or one before taken back) hands over the turns as
// before.
func TestConversationAfterCompaction(t *testing.T) {
	indexes := func(conv []state.Turn) []string {
		return labels(conv, func(tr *state.Turn) string { return fmt.Sprint(tr.Index) })
	}
	for _, tt := range []struct {
		name string
		mod  func(s *state.Session, turns []state.Turn)
		want []string
	}{
		{"compacted", func(*state.Session, []state.Turn) {}, []string{"summary", "3", "4", "5"}},
		{"between turns", func(s *state.Session, _ []state.Turn) { s.Compaction.Turn = 6 }, []string{"summary"}},
		{"a later turn rolled back", func(_ *state.Session, turns []state.Turn) { turns[4].Status = state.TurnRolledBack }, []string{"summary", "3", "4"}},
		{"its turn rolled back", func(_ *state.Session, turns []state.Turn) {
			turns[2].Status, turns[3].Status, turns[4].Status = state.TurnRolledBack, state.TurnRolledBack, state.TurnRolledBack
		}, []string{"1", "2"}},
		{"reset after it", func(s *state.Session, _ []state.Turn) { s.ContextFrom = 4 }, []string{"4", "5"}},
		{"reset before it", func(s *state.Session, _ []state.Turn) { s.ContextFrom = 2 }, []string{"summary", "3", "4", "5"}},
		{"no summary", func(s *state.Session, _ []state.Turn) { s.Compaction.Summary = " \n" }, []string{"1", "2", "3", "4", "5"}},
		{"a fork's inheritance is in the summary", func(s *state.Session, _ []state.Turn) {
			s.Lineage = &state.Lineage{ParentID: "p", ForkTurn: 1}
		}, []string{"summary", "3", "4", "5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, turns := compactedSession()
			tt.mod(s, turns)
			parent := func(string) (*state.Session, []state.Turn, bool) {
				return &state.Session{}, []state.Turn{turn(1, state.TurnCompleted, "PARENT", "")}, true
			}
			if diff := cmp.Diff(tt.want, indexes(Conversation(s, turns, parent))); diff != "" {
				t.Errorf("Conversation() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A fork inherits its parent's compaction when the compaction summarised
// what the fork inherits: the summary, then the parent's turns from the
// compaction's up to the fork point, then the fork's own; a compaction
// after the fork point, or one the parent took back, leaves the inherited
// turns as they are.
func TestForkInheritsTheParentsCompaction(t *testing.T) {
	label := func(conv []state.Turn) []string {
		return labels(conv, func(tr *state.Turn) string { return tr.PromptText })
	}
	for _, tt := range []struct {
		name     string
		forkTurn int
		mod      func(p *state.Session, turns []state.Turn)
		want     []string
	}{
		{"forked after the compaction", 4, func(*state.Session, []state.Turn) {}, []string{"summary", "P3P", "P4P", "F1"}},
		{"forked at the compaction's turn", 3, func(*state.Session, []state.Turn) {}, []string{"summary", "P3P", "F1"}},
		{"compacted between turns, right after the fork point", 2, func(p *state.Session, _ []state.Turn) { p.Compaction.Turn = 3 }, []string{"summary", "F1"}},
		{"forked before the compaction", 1, func(*state.Session, []state.Turn) {}, []string{"P1P", "F1"}},
		{"the parent took the compaction back", 4, func(_ *state.Session, turns []state.Turn) { turns[2].Status = state.TurnRolledBack }, []string{"P1P", "P2P", "P4P", "P5P", "F1"}},
		{"the grandparent's turns are in the summary", 4, func(p *state.Session, _ []state.Turn) {
			p.Lineage = &state.Lineage{ParentID: "g", ForkTurn: 1}
		}, []string{"summary", "P3P", "P4P", "F1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, pturns := compactedSession()
			tt.mod(p, pturns)
			lookup := func(id string) (*state.Session, []state.Turn, bool) {
				switch id {
				case "p":
					return p, pturns, true
				case "g":
					return &state.Session{}, []state.Turn{turn(1, state.TurnCompleted, "GRAND", "")}, true
				}
				return nil, nil, false
			}
			fork := &state.Session{ClientID: "f", Lineage: &state.Lineage{ParentID: "p", ForkTurn: tt.forkTurn}}
			own := []state.Turn{turn(1, state.TurnCompleted, "F1", "FA1")}
			if diff := cmp.Diff(tt.want, label(Conversation(fork, own, lookup))); diff != "" {
				t.Errorf("the fork's conversation (-want +got):\n%s", diff)
			}
		})
	}
}

// The handoff after a compaction starts with the summary, leaves out the
// turns before it, and counts only turns as kept.
func TestHandoffStartsWithTheSummary(t *testing.T) {
	s, turns := compactedSession()
	h := BuildHandoff(Kept(Conversation(s, turns, nil)), 0)
	body := strings.TrimPrefix(h.Text, handoffHeader)
	if !strings.HasPrefix(body, summaryOpen+"SUMMARY of teal and otter\n"+summaryClose) {
		t.Errorf("handoff does not start with the summary:\n%s", h.Text)
	}
	for _, not := range []string{"P1P", "A1A", "P2P", "A2A"} {
		if strings.Contains(h.Text, not) {
			t.Errorf("handoff has %q from before the compaction:\n%s", not, h.Text)
		}
	}
	for _, want := range []string{"<turn 1 user>\nP3P", "A5A"} {
		if !strings.Contains(h.Text, want) {
			t.Errorf("handoff lacks %q:\n%s", want, h.Text)
		}
	}
	if h.Kept != 3 || h.Items != 7 || h.Omitted != 0 {
		t.Errorf("kept %d, items %d, omitted %d; want 3, 7, 0", h.Kept, h.Items, h.Omitted)
	}

	// A compaction between turns: the summary is the whole handoff.
	s.Compaction.Turn = 6
	if h := BuildHandoff(Kept(Conversation(s, turns, nil)), 0); !strings.Contains(h.Text, "SUMMARY") || h.Kept != 0 || h.Items != 1 {
		t.Errorf("summary alone: %+v", h)
	}
}

// A summary too long for what the latest turn leaves of the budget is cut
// to fit, not left out: it is all that is left of the turns before it.
func TestHandoffCutsALongSummary(t *testing.T) {
	s, turns := compactedSession()
	s.Compaction.Summary = "START " + strings.Repeat("é", 8000) + " END"
	turns[4].Answer = strings.Repeat("a", 900)
	const budget = 4 << 10
	h := BuildHandoff(Kept(Conversation(s, turns, nil)), budget)
	if len(h.Text) > budget {
		t.Fatalf("handoff of %d bytes over its budget %d", len(h.Text), budget)
	}
	if !strings.Contains(h.Text, "START é") || strings.Contains(h.Text, "END") || !strings.Contains(h.Text, summaryCut) {
		t.Errorf("summary not cut to fit:\n%s", h.Text)
	}
	if !strings.Contains(h.Text, "P5P") || !strings.Contains(h.Text, turns[4].Answer) {
		t.Errorf("the latest turn did not come first:\n%s", h.Text)
	}
	if !utf8.ValidString(h.Text) {
		t.Errorf("the cut split a rune")
	}
}

// Notices are advisories to the user: no handoff carries them.
func TestHandoffLeavesOutNotices(t *testing.T) {
	tr := turn(1, state.TurnCompleted, "do it", "done")
	tr.Notices = []string{"**Warning:** NOTICE-TEXT", "MCP server failed"}
	h := BuildHandoff(Kept([]state.Turn{tr}), 0)
	if strings.Contains(h.Text, "NOTICE-TEXT") || strings.Contains(h.Text, "MCP server") || !strings.Contains(h.Text, "done") {
		t.Errorf("handoff:\n%s", h.Text)
	}
}

package replay

import (
	"strings"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// A compaction is the agent's own: it replaced the turns before it in its
// context by a summary (ACP's session-compaction RFD), so what the agent
// held of them when a fresh native session replaced it was the summary,
// not the turns (docs/sessions.md, "Compaction"). Conversation hands over
// the summary in their place, as a summary item (SummaryStatus) ahead of
// the turns that came after it; BuildHandoff renders that item as the
// summary and fits it in the same budget as the turns.

// SummaryStatus marks the item Conversation puts in place of the turns a
// compaction summarised. It is no status a turn of the record can have (a
// recorded turn's Index is 1 or more, and this one's is 0), and nothing
// stores it: it lives between Conversation and BuildHandoff.
const SummaryStatus state.TurnStatus = "acp-sidecar:compaction-summary"

// IsSummary reports whether t is the compaction summary Conversation puts
// ahead of the turns after it, rather than a turn.
func IsSummary(t *state.Turn) bool { return t.Status == SummaryStatus }

// compacted is the compaction a handoff of s hands over in place of the
// turns before it, nil for none. A compaction from before a reset is void
// (the reset cleared that context on purpose), and so is one whose turn,
// or a turn before it, was taken back: its summary may tell of what the
// user took back. A summary of white space is no summary.
func compacted(s *state.Session, turns []state.Turn) *state.Compaction {
	c := s.Compaction
	if c == nil || strings.TrimSpace(c.Summary) == "" || c.Turn < s.ContextFrom {
		return nil
	}
	for _, t := range turns {
		if t.Index >= s.ContextFrom && t.Index <= c.Turn && t.Status == state.TurnRolledBack {
			return nil
		}
	}
	return c
}

// summaryItem is c's summary as the item Conversation puts in place of the
// turns it stands for.
func summaryItem(c *state.Compaction) state.Turn {
	return state.Turn{Index: 0, Answer: c.Summary, Status: SummaryStatus, Started: c.At}
}

// afterCompaction is the conversation of a compacted session: the summary
// item, then the visible turns from the compaction's on. A fork's inherited
// turns are before any compaction of its own, so the summary holds them too.
func afterCompaction(s *state.Session, turns []state.Turn, c *state.Compaction) []state.Turn {
	out := []state.Turn{summaryItem(c)}
	for _, t := range turns {
		if InConversation(s, &t) && t.Index >= c.Turn {
			out = append(out, t)
		}
	}
	return out
}

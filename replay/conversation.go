package replay

import "github.com/acp-sidecar/acp-sidecar/state"

// Visible are the turns of a session's current conversation that were not
// taken back, in order: the turns a rewind counts and a fork point names.
// A reset starts a new conversation, so turns before ContextFrom are not in it.
func Visible(s *state.Session, turns []state.Turn) []state.Turn {
	var out []state.Turn
	for _, t := range turns {
		if InConversation(s, &t) {
			out = append(out, t)
		}
	}
	return out
}

// InConversation reports whether t is one of s's visible turns.
func InConversation(s *state.Session, t *state.Turn) bool {
	return t.Index >= s.ContextFrom && t.Status != state.TurnRolledBack
}

// Lookup finds a parent session and its turns for a fork's inheritance.
type Lookup func(id string) (*state.Session, []state.Turn, bool)

// maxLineage bounds how far a fork's chain of parents is followed.
const maxLineage = 16

// Conversation is what a fresh native session must be told for s: a fork's
// inherited turns first (the parent's own inheritance before them, so a fork
// of a fork carries the whole chain), then the session's own visible turns.
// After a compaction of the agent's (s.Compaction) it is the compaction's
// summary instead of everything before the compaction, as an item that
// IsSummary tells from a turn, then the turns from the compaction's on.
func Conversation(s *state.Session, turns []state.Turn, parent Lookup) []state.Turn {
	if c := compacted(s, turns); c != nil {
		return afterCompaction(s, turns, c)
	}
	return append(Inherited(s, parent), Visible(s, turns)...)
}

// Inherited is the part of a fork's conversation that comes from its
// parents: what a fork must keep when its parent is deleted.
func Inherited(s *state.Session, parent Lookup) []state.Turn {
	return inherited(s.Lineage, parent, maxLineage)
}

func inherited(l *state.Lineage, parent Lookup, depth int) []state.Turn {
	if l == nil || parent == nil || depth == 0 {
		return nil
	}
	p, turns, ok := parent(l.ParentID)
	if !ok {
		return nil
	}
	vis := Visible(p, turns)
	vis = vis[:min(l.ForkTurn, len(vis))]
	if c := compacted(p, turns); c != nil && len(vis) > 0 && c.Turn <= vis[len(vis)-1].Index+1 {
		// The parent's agent had compacted what the fork inherits: the
		// fork is handed the summary in place of the turns before it, and
		// of the parent's own inheritance, which the summary holds too.
		out := []state.Turn{summaryItem(c)}
		for _, t := range vis {
			if t.Index >= c.Turn {
				out = append(out, t)
			}
		}
		return out
	}
	return append(inherited(p.Lineage, parent, depth-1), vis...)
}

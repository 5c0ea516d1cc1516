package record

import (
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// A compaction is the agent replacing the earlier turns in its context by
// a summary (ACP's session-compaction RFD: compaction_update and
// compaction_summary_chunk, sent to a client that advertised
// clientCapabilities.session.compaction). The record keeps the latest one
// that completed with a summary (state.Session.Compaction), with the turn
// it ran in, and a handoff after it hands over the summary in place of the
// turns before it (replay.Conversation): that is what the agent held.
//
// The RFD's rules, as the record follows them: the first compaction_update
// of an id fixes its place (here: the turn it came in); a chunk appends a
// content block to the summary; an update with a summary replaces it, and
// a summary of null or [] clears it; an update without one leaves it.
// Only `completed` makes the summary the session's: `failed` and
// `cancelled` replaced nothing, and a status the record does not know
// leaves the compaction open.

// Update kinds of a compaction.
const (
	updCompaction      = "compaction_update"
	updCompactionChunk = "compaction_summary_chunk"
)

// compacting is a compaction that has not completed yet.
type compacting struct {
	turn int
	text strings.Builder
}

// add appends text to the summary, up to what a handoff can carry of it.
func (c *compacting) add(text string, limit int) {
	if room := limit - c.text.Len(); room > 0 {
		c.text.WriteString(clip(text, room))
	}
}

// compaction applies a compaction_update or compaction_summary_chunk to s,
// keeping no more of a summary than limit bytes, and says whether the
// session's record changed (a compaction completed with a summary, at now).
func compaction(log *slog.Logger, s *Session, ev Event, limit int, now time.Time) (changed bool) {
	var n struct {
		Params struct {
			Update struct {
				CompactionID string          `json:"compactionId"`
				Status       string          `json:"status"`
				Summary      json.RawMessage `json:"summary"`
				Content      json.RawMessage `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	decoded(log, ev.Update, ev.Raw, &n) // what could be read is kept
	u := n.Params.Update
	if u.CompactionID == "" {
		return false // the RFD requires the id: an update without one patches nothing
	}
	c := s.compacting[u.CompactionID]
	if c == nil {
		done := s.Rec.Compaction
		switch {
		case done != nil && done.ID == u.CompactionID:
			// The one the record has, patched again: it keeps its place.
			c = &compacting{turn: done.Turn}
			c.add(done.Summary, limit)
		case ev.Update == updCompaction && u.Status != "in_progress" && s.Turn == nil:
			// A compaction first seen finished, between turns: the
			// agent's load replaying its history (the RFD lets a replay
			// send the terminal status first). It happened before, and
			// the record either has it or never had the turns it
			// summarised.
			return false
		default:
			c = &compacting{turn: turnOf(s)}
		}
		if s.compacting == nil {
			s.compacting = map[string]*compacting{}
		}
		s.compacting[u.CompactionID] = c
	}
	if ev.Update == updCompactionChunk {
		c.add(contentText(u.Content), limit)
		return false
	}
	// Omitted, the summary stays as it is, and so it does when it is no
	// list (the schema reads a malformed one as absent); null and [] clear
	// it.
	var blocks []json.RawMessage
	if len(u.Summary) > 0 && json.Unmarshal(u.Summary, &blocks) == nil {
		c.text.Reset()
		for _, b := range blocks {
			c.add(contentText(b), limit)
		}
	}
	switch u.Status {
	case "completed":
		delete(s.compacting, u.CompactionID)
		summary := strings.TrimSpace(c.text.String())
		if summary == "" {
			// Compacted with no summary the user may see: the record
			// has nothing to hand over in the turns' place, so it keeps
			// handing over the turns (and any earlier summary).
			return false
		}
		s.Rec.Compaction = &state.Compaction{ID: u.CompactionID, Turn: c.turn, Summary: summary, At: now}
		return true
	case "failed", "cancelled":
		delete(s.compacting, u.CompactionID)
	}
	return false
}

// contentText is the text of a text content block, "" for any other.
func contentText(block json.RawMessage) string {
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(block, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}

// turnOf is the index the compaction of s now belongs to: the running
// turn's, or the next turn's between turns.
func turnOf(s *Session) int {
	if s.Turn != nil {
		return s.Turn.Index
	}
	return len(s.Turns) + 1
}

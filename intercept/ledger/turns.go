package ledger

import (
	"sort"

	"github.com/acp-sidecar/acp-sidecar/replay"
)

// A session's turns: the handoff its next prompt carries, a prompt that
// never reached the agent, and the v2 turn that runs from the prompt's
// acceptance (or the agent's report) to its idle.

// Arm readies a handoff for a session's next prompt; an empty one disarms.
func (b *Sessions) Arm(sid string, h replay.Handoff) {
	s := b.session(sid)
	if h.Text == "" {
		s.Armed = nil
		return
	}
	s.Armed = &h
}

// TakeHandoff hands out the armed handoff once, and remembers that the
// prompt now in flight carries it, for the record.
func (b *Sessions) TakeHandoff(sid string) (replay.Handoff, bool) {
	s := b.all[sid]
	if s == nil || s.Armed == nil {
		return replay.Handoff{}, false
	}
	h := *s.Armed
	s.Armed, s.Carried = nil, &h
	return h, true
}

// CarriedBy reports, once, the handoff the prompt just taken carries.
func (b *Sessions) CarriedBy(sid string) (replay.Handoff, bool) {
	s := b.all[sid]
	if s == nil || s.Carried == nil {
		return replay.Handoff{}, false
	}
	h := *s.Carried
	s.Carried = nil
	return h, true
}

// TurnTakenBack clears the unsent mark once the record has taken back the
// turn of the prompt that never reached the agent (Flight.Unsent).
func (b *Sessions) TurnTakenBack(sid string) {
	if s := b.all[sid]; s != nil {
		s.Unsent = false
	}
}

// TurnAccepted notes that the agent accepted v2 prompt q of client session
// sid: its turn runs, and the record reads its chunks, until TurnIdle. A
// prompt whose turn was reported running before (Began) starts nothing:
// that turn may have ended already, its idle ahead of the acceptance.
func (b *Sessions) TurnAccepted(sid string, q Request) {
	if q.Began {
		return
	}
	b.beginTurn(sid)
}

// beginTurn starts sid's v2 turn, and says whether none ran before.
func (b *Sessions) beginTurn(sid string) bool {
	s := b.session(sid)
	if s.Turn {
		return false
	}
	s.Turn = true
	b.turnsN++
	return true
}

// TurnIdle ends the v2 turn of client session sid, and says whether one
// ran: an idle state the agent reports at other times (after a resume, or
// its own background work) ends nothing.
func (b *Sessions) TurnIdle(sid string) bool {
	s := b.all[sid]
	if s == nil || !s.Turn {
		return false
	}
	s.Turn = false
	b.turnsN--
	return true
}

// EndTurns ends every running v2 turn and returns their client sessions,
// sorted, for the caller to end on the wire: the client waits for an idle
// state_update that the agent will never send.
func (b *Sessions) EndTurns() []string {
	var ended []string
	for sid, s := range b.all {
		if s.Turn {
			s.Turn = false
			ended = append(ended, sid)
		}
	}
	b.turnsN = 0
	sort.Strings(ended)
	return ended
}

package rebuild

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// ACP has no truncate, so a rollback is a fresh native session with the
// config restored and the kept turns handed over once (DESIGN.md
// "Rebuilding a native session"). A rollback never uses session/load or
// resume: the agent's own history holds the turns taken back.

// RollbackReport is the answer to a rollback.
type RollbackReport struct {
	Report
	Kept       int      `json:"keptTurns"`
	RolledBack []string `json:"rolledBack"` // the first line of each turn taken back
}

// Visible are the turns of the current conversation that were not taken
// back, in order: the ones a rewind counts.
func Visible(s *record.Session) []*state.Turn {
	var out []*state.Turn
	for i := range s.Turns {
		if t := &s.Turns[i]; replay.InConversation(&s.Rec, t) {
			out = append(out, t)
		}
	}
	return out
}

// NewClientID names a session the sidecar made: the client never saw a
// native id for it, and it must not collide with one.
func NewClientID() string {
	var b [8]byte
	rand.Read(b[:])
	return "acp-sidecar-" + hex.EncodeToString(b[:])
}

func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func (r RollbackReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: rewound; %d turn(s) kept", r.Kept)
	if len(r.RolledBack) > 0 {
		b.WriteString(", taken back:")
		for _, l := range r.RolledBack {
			fmt.Fprintf(&b, "\n- %s", l)
		}
	}
	if len(r.Config) > 0 {
		fmt.Fprintf(&b, "\nconfig %s", ConfigLine(r.Config))
	}
	if len(r.Failed) > 0 {
		b.WriteString("\n" + r.Report.Text("rollback"))
	}
	return b.String()
}

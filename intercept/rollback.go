package intercept

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
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

// visible are the turns of the current conversation that were not taken
// back, in order: the ones a rewind counts.
func visible(s *session) []*state.Turn {
	var out []*state.Turn
	for i := range s.turns {
		if t := &s.turns[i]; replay.InConversation(&s.rec, t) {
			out = append(out, t)
		}
	}
	return out
}

// Rewind takes back the last n turns.
func (r *Recorder) Rewind(ctx context.Context, sid string, n int) (RollbackReport, error) {
	count := 0
	if err := r.onSession(ctx, sid, func(_ context.Context, s *session) { count = len(visible(s)) }); err != nil {
		return RollbackReport{}, err
	}
	if n < 1 || n > count {
		return RollbackReport{}, refuse(proxy.CodeInvalidParams, "cannot rewind %d turns: the conversation has %d", n, count)
	}
	return r.Rollback(ctx, sid, count-n)
}

// Rollback keeps turns 1..keep of the current conversation and takes the
// rest back (rollbackPlan).
func (r *Recorder) Rollback(ctx context.Context, sid string, keep int) (RollbackReport, error) {
	var rep RollbackReport
	res, err := r.Run(ctx, r.rollbackPlan(sid, keep, &rep))
	if err != nil {
		return RollbackReport{}, err
	}
	rep.Report = res
	return rep, nil
}

// arm marks the session's native session as lacking the kept turns, and
// readies the text its next prompt carries.
func (r *Recorder) arm(s *session) {
	h := replay.BuildHandoff(replay.Kept(r.conversation(s)), r.cfg.HandoffBudget)
	s.rec.HandoffPending = h.Text != ""
	r.led.Update(func(f *ledger.Flight) { f.Arm(s.rec.ClientID, h) })
}

// conversation is what a fresh native session must be told for s.
func (r *Recorder) conversation(s *session) []state.Turn {
	return replay.Conversation(&s.rec, r.fullTurns(r.ctx, s), r.lookup(r.ctx))
}

// Fork starts a new client session from a parent's conversation up to its
// kept turn at (all of it when at is 0), with the parent's config restored
// and the lineage recorded. A fork of the whole conversation on an agent
// that forks is the agent's session/fork; any other is a fresh native
// session, handed the inherited turns with its first prompt.
func (r *Recorder) Fork(ctx context.Context, parent string, at int) (Report, error) {
	var snap snapshot
	var fail error
	whole := false // the fork takes the whole conversation
	err := r.do(ctx, func(ctx context.Context) {
		p := r.sessions[parent]
		if p == nil {
			fail = refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", parent)
			return
		}
		n := len(visible(p))
		if at == 0 {
			at = n
		}
		if at < 0 || at > n {
			fail = refuse(proxy.CodeInvalidParams, "atTurn %d is out of range: the session has %d turns", at, n)
			return
		}
		whole = at == n
		snap = snapshot{native: p.rec.NativeID, live: cloneConfig(r.led.TargetOr(parent, p.rec.Live)), cwd: p.rec.Cwd, mcp: p.rec.McpServers, dirs: p.rec.AdditionalDirectories}
	})
	if err != nil {
		return Report{}, fmt.Errorf("fork %s: %w", parent, err)
	}
	if fail != nil {
		return Report{}, fail
	}
	child := newClientID()
	return r.Run(ctx, r.forkPlan(parent, child, at, whole, snap))
}

// newClientID names a session the sidecar made: the client never saw a
// native id for it, and it must not collide with one.
func newClientID() string {
	var b [8]byte
	rand.Read(b[:])
	return "acp-sidecar-" + hex.EncodeToString(b[:])
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func (r RollbackReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: rewound; %d turn(s) kept", r.Kept)
	if len(r.RolledBack) > 0 {
		b.WriteString(", taken back:")
		for _, l := range r.RolledBack {
			fmt.Fprintf(&b, "\n- %s", l)
		}
	}
	if len(r.Config) > 0 {
		fmt.Fprintf(&b, "\nconfig %s", configLine(r.Config))
	}
	if len(r.Failed) > 0 {
		b.WriteString("\n" + r.Report.text("rollback"))
	}
	return b.String()
}

// forkHere implements lifelineRecord: a fork of the whole conversation, and
// the session/fork result that tells the client about it.
func (r *Recorder) forkHere(ctx context.Context, parent string) (string, []byte, error) {
	rep, err := r.Fork(ctx, parent, 0)
	if err != nil {
		return "", nil, err
	}
	snap, err := r.snapshot(ctx, rep.SessionID)
	if err != nil {
		return "", nil, fmt.Errorf("fork %s: %w", parent, err)
	}
	result := wire.Encode(map[string]string{"sessionId": rep.SessionID})
	return rep.SessionID, withPickers(result, nil, snap.live), nil
}

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

// rollbackReport is the answer to a rollback.
type rollbackReport struct {
	report
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
func (r *Recorder) Rewind(ctx context.Context, sid string, n int) (rollbackReport, error) {
	count := 0
	if err := r.onSession(ctx, sid, func(_ context.Context, s *session) { count = len(visible(s)) }); err != nil {
		return rollbackReport{}, err
	}
	if n < 1 || n > count {
		return rollbackReport{}, refuse(proxy.CodeInvalidParams, "cannot rewind %d turns: the conversation has %d", n, count)
	}
	return r.Rollback(ctx, sid, count-n)
}

// Rollback keeps turns 1..keep of the current conversation and takes the
// rest back: they are marked rolled_back, never deleted, and a fresh native
// session with the config restored gets the kept turns with the next prompt.
func (r *Recorder) Rollback(ctx context.Context, sid string, keep int) (rollbackReport, error) {
	if what, ok := begin(r.led, sid, "rollback"); !ok {
		return rollbackReport{}, refuse(proxy.CodeBusy, "a %s is already running on this session", what)
	}
	defer r.led.Update(func(f *ledger.Flight) { f.End(sid) })
	var rep rollbackReport
	var fail error
	var snap snapshot
	err := r.do(ctx, func(ctx context.Context) {
		s := r.sessions[sid]
		switch {
		case s == nil:
			fail = refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
			return
		case s.turn != nil:
			fail = refuse(proxy.CodeBusy, "a turn is running; a rollback waits until it ends or is cancelled")
			return
		}
		vis := visible(s)
		if keep < 0 || keep > len(vis) {
			fail = refuse(proxy.CodeInvalidParams, "keepTurns %d is out of range: the conversation has %d turns", keep, len(vis))
			return
		}
		snap = snapshot{native: s.rec.NativeID, live: cloneConfig(s.rec.Live), cwd: s.rec.Cwd, mcp: s.rec.McpServers, dirs: s.rec.AdditionalDirectories}
		rep.Kept = keep
		for _, t := range vis[keep:] {
			rep.RolledBack = append(rep.RolledBack, firstLine(t.PromptText))
		}
	})
	if err != nil {
		return rollbackReport{}, fmt.Errorf("rollback %s: %w", sid, err)
	}
	if fail != nil {
		return rollbackReport{}, fail
	}
	capture := r.led.TargetOr(sid, snap.live)
	err = r.eng.rebuilding(ctx, sid, capture, func(ctx context.Context, gen uint64) (bool, error) {
		native, catalog, err := r.eng.newNative(ctx, sid, snap)
		if err != nil {
			return agentLost(err), fmt.Errorf("rollback %s: %w", sid, err)
		}
		out := r.eng.restore(ctx, native, capture, catalog)
		if r.eng.lostSince(gen, out) {
			return true, nil
		}
		rep.report = r.settleRollback(ctx, sid, native, out, keep)
		r.eng.settled(sid, gen) // the fresh session lives on the agent that is up now
		return false, nil
	})
	if err != nil {
		return rollbackReport{}, err
	}
	return rep, nil
}

// settleRollback records a rollback that landed: the turns after keep are
// taken back, and the kept ones are handed to the fresh native session.
func (r *Recorder) settleRollback(ctx context.Context, sid, native string, out outcome, keep int) report {
	return r.settle(ctx, sid, native, out, func(s *session) {
		vis := visible(s)
		after := s.rec.ContextFrom - 1 // the last turn kept, by index
		if keep > 0 {
			after = vis[keep-1].Index
		}
		for _, t := range vis[keep:] {
			t.Status = state.TurnRolledBack
		}
		// The store marks them (memory may hold them without their text).
		if err := r.cfg.Store.RollBack(ctx, sid, max(after, 0)); err != nil {
			r.log.Warn("record rollback", "session", sid, "err", err)
		}
		r.arm(s)
	})
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
func (r *Recorder) Fork(ctx context.Context, parent string, at int) (report, error) {
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
		return report{}, fmt.Errorf("fork %s: %w", parent, err)
	}
	if fail != nil {
		return report{}, fail
	}
	child := newClientID()
	var rep report
	err = r.eng.rebuilding(ctx, child, nil, func(ctx context.Context, gen uint64) (bool, error) {
		// Where the agent forks, a fork of the whole conversation is the
		// agent's own: it keeps the real history, tool results and all,
		// where a handoff would carry a summary. Its native session must
		// live, though: the agent cannot fork one that died with it.
		agentForks := whole && r.life.Caps().Fork && snap.native != "" && !r.led.IsStale(parent)
		var native string
		var catalog *state.Config
		if agentForks {
			native, catalog, err = r.eng.forkNative(ctx, child, snap.native, snap)
		} else {
			native, catalog, err = r.eng.newNative(ctx, child, snap)
		}
		if err != nil {
			return agentLost(err), fmt.Errorf("fork %s: %w", parent, err)
		}
		err = r.do(ctx, func(ctx context.Context) {
			now := r.cfg.Now()
			s := &session{started: true}
			s.rec = state.Session{
				ClientID: child, NativeID: native, NativeHistory: []string{native}, Agent: r.cfg.Agent, AgentName: r.cfg.Name,
				Cwd: snap.cwd, McpServers: snap.mcp, AdditionalDirectories: snap.dirs, Created: now,
				Baseline: cloneConfig(catalog), Live: catalog, Original: cloneConfig(snap.live),
				Lineage: &state.Lineage{ParentID: parent, ForkTurn: at},
			}
			r.sessions[child] = s
			r.putSession(ctx, s)
		})
		if err != nil {
			return false, fmt.Errorf("fork %s: record the child: %w", parent, err)
		}
		out := r.eng.restore(ctx, native, snap.live, catalog)
		if r.eng.lostSince(gen, out) {
			return true, nil
		}
		rep = r.settle(ctx, child, native, out, func(s *session) {
			if !agentForks {
				r.arm(s) // the fresh session lacks the conversation: hand it over
			}
		})
		r.eng.settled(child, gen)
		return false, nil
	})
	return rep, err
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

func (r rollbackReport) text() string {
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
		b.WriteString("\n" + r.report.text("rollback"))
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

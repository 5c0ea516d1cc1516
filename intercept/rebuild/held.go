package rebuild

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// FollowUps is what the record does after a response it held (record.Then):
// each follow-up is a plan run under the held response (RunHeld), or, for
// a change the agent refused, the change asked the other way (compat.go).
// Each runs on the record's goroutine and lets the response go itself.
type FollowUps struct{ b *Rebuilder }

// FollowUps is the record's follow-ups over these rebuilds.
func (b *Rebuilder) FollowUps() *FollowUps { return &FollowUps{b: b} }

var _ record.Then = (*FollowUps)(nil)

// When the client opens a session (session/new, load, resume, fork), the
// record holds the agent's response until it is written, and then lets it
// go with what the sidecar owes the client for that open: its own slash
// commands when the agent has sent no list for the native session since
// the open (the agent's later list is merged with them, commands.go), and
// for a load or resume the pickers the result lacks (pickers.go).
//
// Agents drop the chosen model and mode after their own session/load
// (agents.md), and may return a fork on their defaults. A load or resume of
// a session this process already knows, and a fork of one, therefore get
// the session's (the parent's) config back before the client sees the
// result, restored as any rebuild restores it, and failing closed
// (openRestore).

// Opened lets an open's held response go, once the record has it, after
// the restore of before when the agent's own open dropped it.
func (f *FollowUps) Opened(ctx context.Context, s *record.Session, req *record.Request, ev record.Event, result json.RawMessage, before *state.Config) {
	b := f.b
	reopened := req.Method == wire.SessionLoad || req.Method == wire.SessionResume
	if before != nil && (reopened || req.Method == wire.SessionFork) {
		b.RunHeld(&openRestore{s: s, ev: ev, result: result, before: before,
			opened: s.Rec.NativeID, catalog: record.CloneConfig(s.Rec.Live)})
		return
	}
	line := b.bridged(ev.Raw)
	if reopened {
		line = withResult(ev.Raw, b.WithPickers(result, s.Rec.Baseline, s.Rec.Live))
	}
	if req.Method == wire.SessionNew {
		s.Shown = true
	}
	b.rec.Flush(ctx)
	ev.Release(append([][]byte{line}, b.cfg.Commands(s.Rec.NativeID, s.Rec.ClientID)...)...)
}

// An agent's own session/load or resume can fail for a session the record
// holds whole: gemini-cli 0.61.0 answers -32603 for a session it made a
// moment before. The client would get that error, and a user who reopens
// the conversation in the editor would lose it, though the sidecar can
// answer: it does what it does for a session an earlier process recorded
// (absorb).

// OpenFailed takes over the held error response ev of a load or resume of
// s, which the agent failed with agentErr, and says whether it did.
func (f *FollowUps) OpenFailed(_ context.Context, s *record.Session, ev record.Event, agentErr json.RawMessage) bool {
	b := f.b
	env, err := proxy.Scan(ev.Raw)
	if err != nil {
		return false // it was scanned on its way in; unreadable now, its error stands
	}
	sid, method := s.Rec.ClientID, ev.Req.Method
	b.log.Warn("the agent failed the client's "+method+" of a session the record holds; answering it from the record on a fresh native session",
		"session", sid, "native", s.Rec.NativeID, "agentError", string(agentErr))
	b.RunHeld(&absorb{snap: snapshotOf(s), method: method, id: append([]byte(nil), env.ID...), ev: ev})
	return true
}

// ApplySettings applies the start-up settings (--set) to a new session
// while its session/new response is held (settings).
func (f *FollowUps) ApplySettings(_ context.Context, s *record.Session, ev record.Event) {
	target, setErrs := settingsTarget(s.Rec.Live, f.b.cfg.Settings)
	f.b.RunHeld(&settings{s: s, ev: ev, want: target, setErrs: setErrs,
		made: s.Rec.NativeID, catalog: record.CloneConfig(s.Rec.Live)})
}

// openRestore puts the config a session had before the agent's own load or
// resume (or a fork's parent had) back on it, and then lets the held
// response go with the restored config in it. The agent's reports of the
// restore's calls would reach the client after the held response, which
// carries the settled config, and name interim values (the
// config_option_update that follows a model change names the effort and
// mode before their calls): they are kept from the client, and the
// response is followed by the restore's own report of where it settled.
type openRestore struct {
	s      *record.Session // touched only in the record's Settle
	ev     record.Event
	result json.RawMessage
	before *state.Config
	// opened and catalog are the session's native session and config as
	// the open left them, copied on the record's goroutine.
	opened  string
	catalog *state.Config
}

// Shape: the client's open holds the session already; the restore dies
// with the native session the client opened.
func (p *openRestore) Shape() Shape {
	return Shape{What: "restore after " + p.ev.Req.Method, Session: p.s.Rec.ClientID, Mark: Shared, Death: Once, Hush: ledger.HushConfig}
}

func (p *openRestore) capture(context.Context, *Rebuilder) (Snapshot, error) { return Snapshot{}, nil }

func (p *openRestore) native(_ context.Context, _ *Rebuilder, a *Attempt) error {
	a.native, a.Catalog = p.opened, p.catalog // the one the client opened
	return nil
}

func (p *openRestore) target(*Rebuilder, *Attempt) *state.Config { return p.before }

func (p *openRestore) settle(_ context.Context, b *Rebuilder, a *Attempt) Report {
	out, s, client := a.Out, p.s, p.s.Rec.ClientID
	b.rec.Settle(p.ev, func(ctx context.Context) {
		var blocked *state.Blocked
		switch {
		case out.lost:
			// The agent died under the restore: the rebuild that follows
			// aims at the whole target, not at what landed.
			b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, p.before) })
		case len(out.failed) > 0:
			blocked = blockedBy(out, b.cfg.Now())
			b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, p.before) })
		default:
			b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(client, nil) })
		}
		b.led.Update(func(f *ledger.Flight) { f.Sessions.SetBlocked(client, blocked) })
		s.Rec.Live, s.Rec.Blocked = out.Catalog, blocked
		b.rec.PutSession(ctx, s)
		b.rec.Flush(ctx)
		res := p.result
		if out.OptionsRaw != nil {
			if next, err := wire.SetPath(res, out.OptionsRaw, "configOptions"); err == nil {
				res = next
			}
		}
		lines := [][]byte{withResult(p.ev.Raw, b.WithPickers(res, p.before, out.Catalog))}
		lines = append(lines, b.cfg.Commands(p.opened, client)...)
		p.ev.Release(append(lines, b.notifications(out, client)...)...)
	})
	return Report{}
}

func (p *openRestore) done(context.Context, *Rebuilder, *Attempt) {}

// failed: the settle lets the response go whatever the restore met, so an
// error here is one the plan never reached its settle with.
func (p *openRestore) failed(b *Rebuilder, err error) {
	b.log.Error("the restore after the client's open did not run", "session", p.s.Rec.ClientID, "err", err)
}

// absorb answers from the record a client's load or resume of a live
// session that the agent failed (OpenFailed): a fresh native session with
// the session's config and its kept turns armed, the recorded history for
// a load, and the held response let go as a success, under the client's id.
type absorb struct {
	snap    Snapshot
	method  string
	id      []byte // the client's request id
	ev      record.Event
	history [][]byte
}

// Shape: the client's open holds the session already.
func (p *absorb) Shape() Shape {
	return Shape{What: "reopen after the agent's failed " + p.method, Session: p.snap.Client, Mark: Shared, Death: AgainOwing}
}

func (p *absorb) capture(context.Context, *Rebuilder) (Snapshot, error) { return p.snap, nil }

func (p *absorb) native(ctx context.Context, b *Rebuilder, a *Attempt) error {
	return b.fresh(ctx, "reopen", a)
}

func (p *absorb) target(b *Rebuilder, a *Attempt) *state.Config { return b.owed(a) }

func (p *absorb) settle(ctx context.Context, b *Rebuilder, a *Attempt) Report {
	sid := p.snap.Client
	return b.settle(ctx, sid, b.made(state.MadeAbsorbed, a), a.Out, func(s *record.Session) {
		s.Reopened()
		b.Arm(s)
		var turns []state.Turn
		if wire.WantsHistory(b.version(), p.method, p.ev.Req.Params) {
			turns = replay.Visible(&s.Rec, b.rec.FullTurns(b.ctx, s))
		}
		p.history = HistoryUpdates(b.version(), sid, turns)
	})
}

func (p *absorb) done(_ context.Context, b *Rebuilder, a *Attempt) {
	sid := p.snap.Client
	lines := append(p.history, wire.Response(p.id, b.ReopenResult(a)))
	p.ev.Release(append(lines, b.cfg.Commands(a.native, sid)...)...)
	b.log.Info("session reopened from the record", "session", sid, "method", p.method, "native", a.native)
}

func (p *absorb) failed(b *Rebuilder, err error) {
	b.log.Error("the record could not answer the "+p.method+" the agent failed; the agent's error goes to the client", "session", p.snap.Client, "err", err)
	p.ev.Release(p.ev.Raw)
}

// settings applies the start-up settings to a new session while its
// session/new response is held, so the client's first sight of the
// session is followed at once by the settled config, and the original is
// taken only after it. A setting the agent does not take is recorded and
// logged, not blocking: the session runs on the agent's value.
type settings struct {
	s       *record.Session // touched only in the record's Settle
	ev      record.Event
	want    *state.Config    // the settings over the session's config
	setErrs []state.SetError // settings the agent has no field for
	made    string           // the native session the client made
	catalog *state.Config
}

// Shape: the client does not know the session yet, so nothing marks it;
// the restore dies with the native session the client made.
func (p *settings) Shape() Shape {
	return Shape{What: "start-up settings", Session: p.s.Rec.ClientID, Mark: Unmarked, Death: Once, Hush: ledger.HushConfig}
}

func (p *settings) capture(context.Context, *Rebuilder) (Snapshot, error) { return Snapshot{}, nil }

func (p *settings) native(_ context.Context, _ *Rebuilder, a *Attempt) error {
	a.native, a.Catalog = p.made, p.catalog // the one the client made
	return nil
}

func (p *settings) target(*Rebuilder, *Attempt) *state.Config { return p.want }

func (p *settings) settle(_ context.Context, b *Rebuilder, a *Attempt) Report {
	out, s, client := a.Out, p.s, p.s.Rec.ClientID
	b.rec.Settle(p.ev, func(ctx context.Context) {
		s.Rec.Live = out.Catalog
		for _, f := range out.failed {
			s.Rec.SetErrors = append(s.Rec.SetErrors, state.SetError{OptionID: f.Field, Value: wire.Unquote(f.Want), Err: f.Reason})
		}
		s.Rec.SetErrors = append(s.Rec.SetErrors, p.setErrs...)
		for _, e := range s.Rec.SetErrors {
			b.log.Error("start-up setting not applied; the session runs on the agent's value", "session", client, "option", e.OptionID, "value", e.Value, "reason", e.Err)
		}
		s.Shown = true
		b.rec.PutSession(ctx, s)
		b.rec.Flush(ctx)
		lines := append([][]byte{b.bridged(p.ev.Raw)}, b.cfg.Commands(p.made, client)...)
		p.ev.Release(append(lines, b.notifications(out, client)...)...)
	})
	return Report{}
}

func (p *settings) done(context.Context, *Rebuilder, *Attempt) {}

// failed: the settle lets the response go whatever the restore met.
func (p *settings) failed(b *Rebuilder, err error) {
	b.log.Error("the start-up settings did not run", "session", p.s.Rec.ClientID, "err", err)
}

// bridged is a session result's response line with the pickers the
// client's dialect lacks (Bridge); the line the agent wrote, to the byte,
// when the client lacks none.
func (b *Rebuilder) bridged(line []byte) []byte {
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || wire.IsNull(msg.Result) {
		return line
	}
	if out := b.Bridge(msg.Result); !bytes.Equal(out, msg.Result) {
		return withResult(line, out)
	}
	return line
}

// withResult is a response line with its result replaced.
func withResult(line []byte, result json.RawMessage) []byte {
	out, err := wire.SetPath(line, result, "result")
	if err != nil {
		return line // not an object: it goes as it came
	}
	return out
}

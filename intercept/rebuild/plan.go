package rebuild

import (
	"context"
	"errors"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// A Plan is one kind of rebuild, as a value (plans.go, held.go). Its Shape
// says how it stands to its session and to the agent's death; its steps,
// which Run takes in this order for every plan, say what it does:
//
//   - capture: what it needs of the session, read once before the first
//     attempt, so nothing the session reports later changes what is
//     restored (DESIGN.md "Rebuilding a native session", step 1);
//   - native: how an attempt gets its native session;
//   - target: the config that goes onto it (restored model, then mode,
//     then the rest, failing closed, by the one engine);
//   - settle: what the record makes of the Outcome, and what the client
//     is told;
//   - done: what follows once the session is settled.
//
// Every step is a method each plan has, so a plan reads top to bottom in
// one place, with nothing optional to chase.
type Plan interface {
	Shape() Shape
	capture(ctx context.Context, b *Rebuilder) (Snapshot, error)
	native(ctx context.Context, b *Rebuilder, a *Attempt) error
	target(b *Rebuilder, a *Attempt) *state.Config
	settle(ctx context.Context, b *Rebuilder, a *Attempt) Report
	done(ctx context.Context, b *Rebuilder, a *Attempt)
}

// A HeldPlan runs under a response the record holds (held.go): it starts
// on the record's goroutine, which must go on draining the agent's answers
// to the plan's calls, so it runs on a goroutine of its own (RunHeld), and
// what goes wrong goes to failed, as no caller waits for it.
type HeldPlan interface {
	Plan
	failed(b *Rebuilder, err error)
}

// Shape is how a plan stands to its session and to the agent.
type Shape struct {
	What    string // names it: the session's busy mark, the log, the refusals
	Session string // the client session it rebuilds
	Mark    Mark
	Death   Death
	// Hush is what of the agent's reports of the restore's calls the
	// client does not see (0: the client sees them): a restore under a
	// held response reports where it settled itself, after the response.
	Hush ledger.Hush
}

// Mark is how a plan holds its session while it runs.
type Mark int

const (
	// Busy marks the session busy throughout: its requests wait, and a
	// plan that finds it busy already is refused.
	Busy Mark = iota
	// Shared marks it busy beside whatever holds it already: a plan under
	// a response held while the client's own open runs.
	Shared
	// Unmarked: nothing can reach the session yet (a fork's child, a new
	// session whose response is held).
	Unmarked
)

// Death is what a plan does when the agent dies under an attempt.
type Death int

const (
	// Again: once a restarted agent is up, the attempt runs again from the
	// same capture. So a kill at any point converges.
	Again Death = iota
	// AgainOwing: as Again, and the target is owed meanwhile, so any
	// rebuild that follows aims at it and not at a partial config.
	AgainOwing
	// Once: the plan is not run again; it settles the Outcome as it is (a
	// restore on a native session the client opened dies with it).
	Once
)

// errNothingToDo is a capture's word that the plan has nothing left to do
// (another request rebuilt the session meanwhile): Run ends it at once.
var errNothingToDo = errors.New("nothing to rebuild")

// Run carries out a plan: mark the session, capture, attempt (a native
// session, then the restore), settle, done, unmark. When the agent dies
// under an attempt, nothing of it is settled, and the plan's Death says
// what follows (DESIGN.md "While the agent's side is being rebuilt, the
// client waits").
func (b *Rebuilder) Run(ctx context.Context, p Plan) (Report, error) {
	end, err := b.mark(p.Shape())
	if err != nil {
		return Report{}, err
	}
	defer end()
	return b.attempts(ctx, p)
}

// RunHeld starts a plan under a held response: the mark is made here, and
// the attempts run on a goroutine the record's Close waits for.
func (b *Rebuilder) RunHeld(p HeldPlan) {
	end, err := b.mark(p.Shape())
	if err != nil {
		p.failed(b, err)
		return
	}
	b.rec.Go(func(ctx context.Context) {
		defer end()
		if _, err := b.attempts(ctx, p); err != nil {
			p.failed(b, err)
		}
	})
}

// mark holds the plan's session as its Mark says, and returns what lets
// it go.
func (b *Rebuilder) mark(sh Shape) (end func(), err error) {
	if sh.Mark == Unmarked {
		return func() {}, nil
	}
	end, cur, ok := begin(b.led, sh.Session, sh.What)
	if !ok && sh.Mark == Busy {
		return nil, wire.Refuse(proxy.CodeBusy, "a %s is already running on this session", cur)
	}
	return end, nil
}

// attempts is Run's loop: it tries the plan until an attempt settles on an
// agent that stayed up through it, or fails for a reason of its own.
func (b *Rebuilder) attempts(ctx context.Context, p Plan) (Report, error) {
	sh := p.Shape()
	snap, err := p.capture(ctx, b)
	if errors.Is(err, errNothingToDo) {
		return Report{}, nil
	}
	if err != nil {
		return Report{}, err
	}
	for {
		// An attempt starts on an agent that is up: one begun while the
		// agent restarts would count the life it then fails in as its
		// own, and wait for yet another death before it tried again.
		// The life is read before the phase; Agent.Gone sets the phase
		// before it counts the life, so an attempt never pairs the dead
		// agent's phase with the next life's count.
		a := &Attempt{gen: b.life.Gen(), Snap: snap}
		if sh.Death != Once && b.life.Phase() != life.Up {
			if err := b.watch.awaitUp(ctx, func() bool { return true }); err != nil {
				return Report{}, fmt.Errorf("%s %s: %w", sh.What, sh.Session, err)
			}
			continue
		}
		rep, again, err := b.attempt(ctx, p, a)
		if again {
			continue
		}
		return rep, err
	}
}

// attempt is one try of plan p: a native session, the restore, the
// settle. again says the agent died under it and the plan runs again.
// What the agent says of a native session the attempt made (engine.create)
// is kept from the client until the attempt is over.
func (b *Rebuilder) attempt(ctx context.Context, p Plan, a *Attempt) (rep Report, again bool, err error) {
	sh := p.Shape()
	err = p.native(ctx, b, a)
	if a.native != "" && (a.path == "new" || a.path == "fork") {
		defer b.eng.unhushNew(a.native)
	}
	if err != nil {
		if !agentLost(err) || sh.Death == Once {
			return Report{}, false, err
		}
		if err := b.lost(ctx, sh, a); err != nil {
			return Report{}, false, err
		}
		return Report{}, true, nil
	}
	a.target = p.target(b, a)
	unhush := func() {}
	if sh.Hush != 0 {
		unhush = b.led.Hush(a.native, sh.Hush)
	}
	a.Out = b.eng.restore(ctx, a.native, a.target, a.Catalog)
	unhush()
	if (a.Out.lost || b.life.Gen() != a.gen) && sh.Death != Once {
		if err := b.lost(ctx, sh, a); err != nil {
			return Report{}, false, err
		}
		return Report{}, true, nil
	}
	rep = p.settle(ctx, b, a)
	// The session is no longer stale, unless the agent died meanwhile:
	// the native session this attempt made died with that agent.
	b.led.Update(func(f *ledger.Flight) { f.Settled(sh.Session, a.gen) })
	p.done(ctx, b, a)
	return rep, false, nil
}

// lost ends an attempt the agent died under: the target is owed when the
// plan says so, and the next attempt waits for a restarted agent.
func (b *Rebuilder) lost(ctx context.Context, sh Shape, a *Attempt) error {
	if sh.Death == AgainOwing && a.target != nil {
		b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(sh.Session, a.target) })
	}
	b.log.Info("the agent exited during a rebuild; it runs again from its capture once the agent is back", "session", sh.Session, "rebuild", sh.What)
	if err := b.watch.awaitAgent(ctx, a.gen); err != nil {
		return fmt.Errorf("%s %s: %w", sh.What, sh.Session, err)
	}
	return nil
}

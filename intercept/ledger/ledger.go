package ledger

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// Ledger holds the Flight behind one lock. Build it with New.
type Ledger struct {
	// What the relay's goroutines read on every frame without the lock;
	// Update stores them from the Flight after each change.
	mapped   atomic.Bool  // some client id differs from its native id
	anyStale atomic.Bool  // some session died with the agent and awaits a rebuild
	creating atomic.Int32 // the sidecar's own session/new calls in flight
	busyN    atomic.Int32 // sessions a rebuild runs on
	hushN    atomic.Int32 // native sessions whose updates are kept from the client
	running  atomic.Int32 // prompts the record waits to see answered
	opened   atomic.Int32 // sessions the ledger knows
	waiting  atomic.Int32 // client requests waiting for their session
	closedN  atomic.Int32 // sessions the client closed and has not reopened
	proving  atomic.Bool  // some session's resumed native session awaits its first prompt

	// wake tells whoever waits for a session (a held request, a rebuild)
	// that something they wait for may have changed.
	wake func()

	mu sync.Mutex
	f  Flight
}

// New builds an empty ledger; wake is called after every change that ends a
// rebuild or makes a session ready (nil: nobody is told).
func New(wake func()) *Ledger {
	if wake == nil {
		wake = func() {}
	}
	return &Ledger{wake: wake, f: newFlight()}
}

// Update runs fn on the flight under the ledger's lock: the one way to
// change it. fn must not block nor call back into the ledger.
func (l *Ledger) Update(fn func(f *Flight)) {
	l.mu.Lock()
	fn(&l.f)
	woke := l.settle()
	l.mu.Unlock()
	if woke {
		l.wake()
	}
}

// settle stores the lock-free counters from the flight, and says whether
// the change must wake the waiters. It runs under the lock.
func (l *Ledger) settle() bool {
	f := &l.f
	ss := &f.Sessions
	l.mapped.Store(ss.mapped)
	l.anyStale.Store(ss.staleN > 0)
	l.creating.Store(int32(f.Natives.creating))
	l.busyN.Store(int32(ss.busyN))
	l.hushN.Store(int32(len(f.Natives.hushes)))
	l.running.Store(int32(f.Requests.prompts + ss.turnsN))
	l.opened.Store(int32(len(ss.all)))
	l.waiting.Store(int32(len(f.Waiters.queue)))
	l.closedN.Store(int32(len(ss.closed)))
	l.proving.Store(ss.unprovenN > 0)
	woke := ss.woke
	ss.woke = false
	return woke
}

// view runs fn on the flight under the lock, to read it.
func (l *Ledger) view(fn func(f *Flight)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(&l.f)
}

// What the stages ask of the ledger as frames pass. The ones asked of every
// frame (Opened, Splicing, Hushing, Running, AnyWait) are single atomic
// loads; the others take the lock for a map lookup, and most are asked
// only once one of those says something is going on.

// Opened says whether the ledger knows some session: what an agent sends
// between turns may then be a turn's background work. Until a session is
// opened, the record leaves the agent's chunks alone at the cost of one load.
func (l *Ledger) Opened() bool { return l.opened.Load() > 0 }

// Splicing says whether any session id may need splicing now: some client
// id is mapped, or the sidecar is creating a session.
func (l *Ledger) Splicing() bool { return l.mapped.Load() || l.creating.Load() > 0 }

// Hushing says whether some native session's updates are kept back.
func (l *Ledger) Hushing() bool { return l.hushN.Load() > 0 }

// Running says whether some prompt the record waits for is in flight.
func (l *Ledger) Running() bool { return l.running.Load() > 0 }

// Waiting says whether some client request waits for its session.
func (l *Ledger) Waiting() bool { return l.waiting.Load() > 0 }

// AnyStale says whether some session awaits a rebuild after the agent died.
func (l *Ledger) AnyStale() bool { return l.anyStale.Load() }

// AnyBusy says whether a rebuild runs on some session.
func (l *Ledger) AnyBusy() bool { return l.busyN.Load() > 0 }

// NativeOf returns the native id behind a client id (itself when unmapped).
func (l *Ledger) NativeOf(client string) string {
	if !l.mapped.Load() {
		return client
	}
	n := client
	l.view(func(f *Flight) {
		if s := f.Sessions.all[client]; s != nil && s.Native != "" {
			n = s.Native
		}
	})
	return n
}

// ClientOf returns the client id for a native id (itself when unmapped).
func (l *Ledger) ClientOf(native string) string {
	if !l.mapped.Load() {
		return native
	}
	c := native
	l.view(func(f *Flight) {
		if id, ok := f.Sessions.clients[native]; ok {
			c = id
		}
	})
	return c
}

// IsClosed says whether the client closed sid and has not reopened it. It
// costs one atomic load while no session is closed.
func (l *Ledger) IsClosed(sid string) bool {
	if l.closedN.Load() == 0 {
		return false
	}
	closed := false
	l.view(func(f *Flight) { closed = f.Sessions.closed[sid] })
	return closed
}

// IsStale says whether sid awaits a rebuild after the agent died.
func (l *Ledger) IsStale(sid string) bool {
	if !l.anyStale.Load() {
		return false
	}
	stale := false
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			stale = s.Stale
		}
	})
	return stale
}

// IsBusy says whether a rebuild runs on sid, or an operation that may
// rebuild it was taken and has not ended (Flight.Announce).
func (l *Ledger) IsBusy(sid string) bool {
	if l.busyN.Load() == 0 {
		return false
	}
	busy := false
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			busy = s.Busy != "" || s.Announced > 0
		}
	})
	return busy
}

// BusyWith says what rebuild runs on sid, "" for none.
func (l *Ledger) BusyWith(sid string) string {
	what := ""
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			what = s.Busy
		}
	})
	return what
}

// BlockedOf is sid's block, nil when prompts go through.
func (l *Ledger) BlockedOf(sid string) *state.Blocked {
	var b *state.Blocked
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			b = s.Blocked
		}
	})
	return b
}

// TargetOr is what a rebuild of sid restores: the config a failed restore
// still owes, else live.
func (l *Ledger) TargetOr(sid string, live *state.Config) *state.Config {
	t := live
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil && s.Owed != nil {
			t = s.Owed
		}
	})
	return t
}

// TurnStateOf says where the client session behind native stands: a turn
// of it runs, it is being opened, it is between turns, or it is unknown. The record asks
// it once a turn, at its first chunk, and for each chunk the agent sends
// between turns. A v1 turn runs while its prompt is in flight; in v2 (v2
// true) the prompt is answered as it is accepted, and a turn runs from
// then, or from the agent's report that it runs, to its idle: a prompt in
// flight that the agent has not accepted is not running yet.
func (l *Ledger) TurnStateOf(native string, v2 bool) TurnState {
	st := Between
	l.view(func(f *Flight) {
		sid := native
		if c, ok := f.Sessions.clients[native]; ok {
			sid = c
		}
		if s := f.Sessions.all[sid]; s != nil && s.Turn {
			st = Running
			return
		}
		for _, q := range f.Requests.requests {
			if q.Session != sid {
				continue
			}
			switch q.Method {
			case promptMethod:
				if q.Recorded && !v2 {
					st = Running
					return
				}
			case "session/load", "session/resume":
				st = Opening
			}
		}
		if _, known := f.Sessions.all[sid]; st == Between && !known {
			st = Unknown
		}
	})
	return st
}

// Proving says whether some session's resumed native session awaits its
// first prompt (Flight.Resumed).
func (l *Ledger) Proving() bool { return l.proving.Load() }

// LiedOf is the native session of sid whose resume the agent accepted and
// could not serve, "" for none: no rebuild resumes it again.
func (l *Ledger) LiedOf(sid string) string {
	var n string
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			n = s.Lied
		}
	})
	return n
}

// Request is the client request in flight under id.
func (l *Ledger) Request(id string) (Request, bool) {
	var q Request
	ok := false
	l.view(func(f *Flight) {
		if r := f.Requests.requests[id]; r != nil {
			q, ok = *r, true
		}
	})
	return q, ok
}

// AgentCommandsOf is the agent's own command list for a native session, as
// it last gave it in v2 (Flight.AgentCommands); nil for none.
func (l *Ledger) AgentCommandsOf(native string) []json.RawMessage {
	var list []json.RawMessage
	l.view(func(f *Flight) { list = f.Natives.agentCommands[native] })
	return list
}

// CommandsSent says whether the agent sent a command list for a native
// session since it was opened; if not, the sidecar sends its own after the
// open, since each list replaces the one before.
func (l *Ledger) CommandsSent(native string) bool {
	sent := false
	l.view(func(f *Flight) { sent = f.Natives.commands[native] })
	return sent
}

// HushOf is what of native's updates is kept back now, every kind held
// combined; 0 for nothing.
func (l *Ledger) HushOf(native string) Hush {
	var h Hush
	l.view(func(f *Flight) {
		for _, k := range f.Natives.hushes[native] {
			h |= k
		}
	})
	return h
}

// Early says whether an agent frame for native must wait: no session is
// known by that id while the sidecar creates one. It returns what closes
// when the last creation in flight ends, or nil.
func (l *Ledger) Early(native string) <-chan struct{} {
	var ch <-chan struct{}
	l.view(func(f *Flight) {
		if f.Natives.creating == 0 {
			return
		}
		if _, known := f.Sessions.clients[native]; known {
			return
		}
		ch = f.Natives.created
	})
	return ch
}

// UnsentPrompt says whether a prompt of sid never reached the agent that
// died: its turn is taken back, not recorded as interrupted.
func (l *Ledger) UnsentPrompt(sid string) bool {
	unsent := false
	l.view(func(f *Flight) {
		if s := f.Sessions.all[sid]; s != nil {
			unsent = s.Unsent
		}
	})
	return unsent
}

// Hush keeps h of native's updates from the client until done is called.
func (l *Ledger) Hush(native string, h Hush) (done func()) {
	l.Update(func(f *Flight) { f.Natives.Hush(native, h) })
	return func() { l.Update(func(f *Flight) { f.Natives.Unhush(native, h) }) }
}

// Respond is Flight.Respond in an update of its own: the one gate of an
// answer to a client request (the chain's, for the agent's answers and the
// stages'). first false: the answer is a second one, to drop.
func (l *Ledger) Respond(id string) (q Request, first bool) {
	l.Update(func(f *Flight) { q, first = f.Requests.Respond(id) })
	return q, first
}

// Take notes a client request the chain took, before any stage decides
// it: every request is in the ledger from then until it is answered, so
// a stage's answer to it is checked like the agent's, and a client that
// uses an id again is told apart from a second answer.
func (l *Ledger) Take(id, method, sid string) {
	l.Update(func(f *Flight) { f.Requests.Note(id, method, sid) })
}

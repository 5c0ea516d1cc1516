package life

import (
	"encoding/json"
	"sync"
	"sync/atomic"
)

// Phase is where the agent's life stands.
type Phase int32

const (
	Up         Phase = iota
	Restarting       // the agent died; a new one is being started and initialized
	Dead             // the restart budget is used up
)

// Caps is what the agent said it can do, from its initialize result.
type Caps struct {
	// Protocol is the ACP version the agent chose (wire.Version); 0 before
	// its initialize result, which reads as v1.
	Protocol                                int
	Load, Resume, List, Fork, Close, Delete bool
	// Agent and Version are its agentInfo name and version ("" when it
	// gave none); Habits what the sidecar knows of it by them (known.go).
	Agent, Version string
	Habits         Habits
}

// Life is the agent's life. The zero value is not ready: use New.
type Life struct {
	phase atomic.Int32
	gen   atomic.Uint64
	ready Waker
	// keepsMessageIDs is caps.Habits.ForksAtMessage, or an agent of ACP v2,
	// for the record's chunk path, which keeps each turn's message id only
	// then and must not take a lock to know it: a native rewind forks at
	// it, and a v2 replay from the record gives the answer under it.
	keepsMessageIDs atomic.Bool
	// warnsInText is caps.Habits.WarnsInText, for the same path.
	warnsInText atomic.Bool
	// sawResult: the record has read a session result of the agent's, and
	// legacyModes: one of them had legacy `modes` (SawResult), so the agent
	// reports mode changes in legacy words.
	sawResult, legacyModes atomic.Bool
	// lastExit is atomic so that an exit takes no lock of the life's: the
	// agent's death is one update of the ledger's, and nothing else locks.
	lastExit atomic.Pointer[string]

	mu   sync.Mutex
	caps Caps
	// What a restarted agent must be told, as the client told the first.
	initParams, authParams json.RawMessage
}

// A Waker wakes whoever waits for the agent's life (a Signal).
type Waker interface {
	// Fire wakes every waiter; it must not block.
	Fire()
}

// New is the life of an agent that is up. ready is fired at every change of
// phase; the Signal it fires is also fired by whatever else the waiters
// wait for (the ledger's rebuilds).
func New(ready Waker) *Life { return &Life{ready: ready} }

// Phase is where the agent's life stands now.
func (l *Life) Phase() Phase { return Phase(l.phase.Load()) }

// Gen is the agent's generation: how many times it has exited.
func (l *Life) Gen() uint64 { return l.gen.Load() }

// Gone notes the agent's exit and returns the generation that begins. The
// phase goes first, then the generation: a rebuild reads the generation,
// then the phase, and must not pair the new generation with the old
// agent's phase.
func (l *Life) Gone(reason string) uint64 {
	l.phase.Store(int32(Restarting))
	gen := l.gen.Add(1)
	l.lastExit.Store(&reason)
	return gen
}

// Back notes that a restarted agent is up and initialized.
func (l *Life) Back() {
	l.phase.Store(int32(Up))
	l.ready.Fire()
}

// Dead notes that the agent will not be restarted again.
func (l *Life) Dead(reason string) {
	l.lastExit.Store(&reason)
	l.phase.Store(int32(Dead))
	l.ready.Fire()
}

// LastExit says why the agent last exited.
func (l *Life) LastExit() string {
	if p := l.lastExit.Load(); p != nil {
		return *p
	}
	return ""
}

// Caps is what the agent said it can do.
func (l *Life) Caps() Caps {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.caps
}

// LearnCaps keeps what the agent said it can do, and returns what it said
// before.
func (l *Life) LearnCaps(caps Caps) (old Caps) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, l.caps = l.caps, caps
	l.keepsMessageIDs.Store(caps.Habits.ForksAtMessage || caps.Protocol >= 2)
	l.warnsInText.Store(caps.Habits.WarnsInText)
	return old
}

// SawResult notes a session result of the agent's, and whether it had
// legacy modes.
func (l *Life) SawResult(legacyModes bool) {
	if legacyModes {
		l.legacyModes.Store(true)
	}
	l.sawResult.Store(true)
}

// WithoutLegacyModes says, without a lock, that the agent has answered
// with session results and none had legacy modes. Before its first result
// nothing is known: agents send updates before it (DESIGN.md "Data flow").
func (l *Life) WithoutLegacyModes() bool { return l.sawResult.Load() && !l.legacyModes.Load() }

// KeepsMessageIDs says, without a lock, whether the record keeps each
// turn's message ids: the agent forks at a message, or speaks v2.
func (l *Life) KeepsMessageIDs() bool { return l.keepsMessageIDs.Load() }

// WarnsInText is Caps().Habits.WarnsInText, without a lock.
func (l *Life) WarnsInText() bool { return l.warnsInText.Load() }

// Told keeps the client's initialize or authenticate params, for the
// agent's successors.
func (l *Life) Told(initialize bool, params json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if initialize {
		l.initParams = params
	} else {
		l.authParams = params
	}
}

// Params are the initialize and authenticate params a restarted agent is
// given (nil where the client sent none).
func (l *Life) Params() (initialize, authenticate json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.initParams, l.authParams
}

// Signal wakes everyone who waits for a change of the agent's phase or of a
// session's rebuild. A waiter takes the channel before it looks at the
// state, so a change between the look and the wait is never missed.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

var _ Waker = (*Signal)(nil)

// NewSignal is a signal nobody has fired.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{})} }

// Changed is closed at the next Fire.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Fire wakes every waiter.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

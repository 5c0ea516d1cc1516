package intercept

import (
	"sync"
	"sync/atomic"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// table is what the relay goroutines must know at once about sessions,
// without waiting for the recorder: which native session is behind each
// client id, and which sessions refuse prompts for now. It is small and
// guarded by one lock; the common frame never touches it, because mapped
// stays false until the first rebuild.
type table struct {
	mapped   atomic.Bool  // some client id differs from its native id
	anyStale atomic.Bool  // some session lost its native session with the agent
	creating atomic.Int32 // creatingN, for the lock-free check of every frame
	busyN    atomic.Int32 // len(busy), for the lock-free check of every request

	// ready fires when a rebuild ends or a session stops being stale, for
	// the requests that wait for it (wait.go).
	ready *signal

	mu        sync.Mutex
	native    map[string]string // client id -> current native id
	client    map[string]string // native id (current and past) -> client id
	blocked   map[string]*state.Blocked
	busy      map[string]string         // client id -> what the sidecar is doing to it
	created   chan struct{}             // closed when the creations in flight end
	stale     map[string]bool           // client ids to rebuild before their next request
	commands  map[string]bool           // native ids the agent sent a command list for
	creatingN int                       // the sidecar's own session/new calls in flight
	targets   map[string]*state.Config  // client id -> the config a failed restore still owes
	armed     map[string]replay.Handoff // client id -> handoff for its next prompt
	carried   map[string]replay.Handoff // client id -> handoff the prompt in flight carries
}

// arm readies a handoff for a session's next prompt; an empty one disarms.
func (t *table) arm(clientID string, h replay.Handoff) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.armed == nil {
		t.armed, t.carried = map[string]replay.Handoff{}, map[string]replay.Handoff{}
	}
	if h.Text == "" {
		delete(t.armed, clientID)
		return
	}
	t.armed[clientID] = h
}

// takeHandoff hands out the armed handoff once, and remembers that the
// prompt now in flight carries it, for the recorder.
func (t *table) takeHandoff(clientID string) (replay.Handoff, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.armed[clientID]
	if ok {
		delete(t.armed, clientID)
		t.carried[clientID] = h
	}
	return h, ok
}

// carriedBy reports, once, the handoff the prompt just seen carries.
func (t *table) carriedBy(clientID string) (replay.Handoff, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.carried[clientID]
	delete(t.carried, clientID)
	return h, ok
}

func newTable(ready *signal) *table {
	return &table{
		native: map[string]string{}, client: map[string]string{},
		blocked: map[string]*state.Blocked{}, busy: map[string]string{},
		ready: ready,
	}
}

// nativeOf returns the native id behind a client id (itself when unmapped).
func (t *table) nativeOf(clientID string) string {
	if !t.mapped.Load() {
		return clientID
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.native[clientID]; ok {
		return n
	}
	return clientID
}

// clientOf returns the client id for a native id (itself when unmapped).
func (t *table) clientOf(nativeID string) string {
	if !t.mapped.Load() {
		return nativeID
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.client[nativeID]; ok {
		return c
	}
	return nativeID
}

// remap puts a new native session behind a client id. The old native id
// keeps pointing at the client, so its late frames are still attributed.
func (t *table) remap(clientID, nativeID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.native[clientID] = nativeID
	t.client[nativeID] = clientID
	if clientID != nativeID {
		t.mapped.Store(true)
	}
}

func (t *table) setBlocked(clientID string, b *state.Blocked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == nil {
		delete(t.blocked, clientID)
		return
	}
	t.blocked[clientID] = b
}

func (t *table) blockedOf(clientID string) *state.Blocked {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked[clientID]
}

// begin marks a client session busy with a rebuild; it fails when one runs.
func (t *table) begin(clientID, what string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.busy[clientID]; ok {
		return cur, false
	}
	t.busy[clientID] = what
	t.busyN.Store(int32(len(t.busy)))
	return "", true
}

func (t *table) end(clientID string) {
	t.mu.Lock()
	delete(t.busy, clientID)
	t.busyN.Store(int32(len(t.busy)))
	t.mu.Unlock()
	t.ready.fire()
}

// isBusy says whether a rebuild runs on the session.
func (t *table) isBusy(clientID string) bool {
	if t.busyN.Load() == 0 {
		return false
	}
	return t.busyWith(clientID) != ""
}

func (t *table) busyWith(clientID string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.busy[clientID]
}

func (t *table) markStale(clientID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stale == nil {
		t.stale = map[string]bool{}
	}
	t.stale[clientID] = true
	t.anyStale.Store(true)
}

func (t *table) isStale(clientID string) bool {
	if !t.anyStale.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stale[clientID]
}

// clearStaleIf clears the mark when still holds, under the lock markStale
// takes: a rebuild clears it only while the agent it rebuilt on lives.
func (t *table) clearStaleIf(clientID string, still func() bool) {
	t.mu.Lock()
	if still() {
		delete(t.stale, clientID)
		t.anyStale.Store(len(t.stale) > 0)
	}
	t.mu.Unlock()
	t.ready.fire()
}

// owe keeps the target of a restore that failed, so a retry (/reset, a
// rollback, a crash recovery) aims at it again instead of at the partial
// config the agent reported; nil clears it (the restore succeeded, or the
// user accepted the agent's config).
func (t *table) owe(clientID string, target *state.Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if target == nil {
		delete(t.targets, clientID)
		return
	}
	if t.targets == nil {
		t.targets = map[string]*state.Config{}
	}
	t.targets[clientID] = target
}

// targetOr is what a rebuild restores: the config a failed restore still
// owes, else live.
func (t *table) targetOr(clientID string, live *state.Config) *state.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	if owed := t.targets[clientID]; owed != nil {
		return owed
	}
	return live
}

// forget drops what the table knows of a session that left this agent,
// except the native ids it had: their late frames keep the client's id.
func (t *table) forget(clientID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.native, clientID)
	delete(t.blocked, clientID)
	delete(t.stale, clientID)
	t.anyStale.Store(len(t.stale) > 0)
	delete(t.targets, clientID)
	delete(t.armed, clientID)
	delete(t.carried, clientID)
}

// ownCommands is the command list the sidecar sends after a new session's
// response, in case the agent never sends one: none when the agent's own
// list (with the sidecar's merged in) already went out, because each list
// replaces the one before.
func (t *table) ownCommands(native, client string) [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.commands[native] {
		return nil
	}
	return [][]byte{ownCommandsUpdate(client)}
}

// opening forgets that the agent sent a command list for a native session
// it is asked to load or resume again: the sidecar's own list follows the
// open unless the agent sends one anew.
func (t *table) opening(native string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.commands, native)
}

// sawCommands notes that the agent sent a command list for a native session.
func (t *table) sawCommands(native string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.commands == nil {
		t.commands = map[string]bool{}
	}
	t.commands[native] = true
}

// splicing says whether any session id may need splicing now: some client
// id is mapped, or the sidecar is creating a session.
func (t *table) splicing() bool { return t.mapped.Load() || t.creating.Load() > 0 }

// early says whether an agent frame for native must wait: no session is
// known by that id while the sidecar creates one. It returns what closes
// when the last creation in flight ends, or nil.
func (t *table) early(native string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.creatingN == 0 {
		return nil
	}
	if _, known := t.client[native]; known {
		return nil
	}
	return t.created
}

// beginCreating notes one of the sidecar's own session/new calls.
func (t *table) beginCreating() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.creatingN == 0 {
		t.created = make(chan struct{})
	}
	t.creatingN++
	t.creating.Store(int32(t.creatingN))
}

// endCreating ends one, and when none is left lets every held frame go
// (holdEarly). It runs whatever the call's outcome, and under the lock
// early takes, so no frame can be held after the last release.
func (t *table) endCreating() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.creatingN--
	t.creating.Store(int32(t.creatingN))
	if t.creatingN == 0 {
		close(t.created)
		t.created = nil
	}
}

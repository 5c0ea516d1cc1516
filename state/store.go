package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrNotFound: no such session, or no session for that native id.
	ErrNotFound = errors.New("not found")
	// ErrOriginalExists: the session already has a different original config.
	// The original is written once (DESIGN.md "The state model"), so a second,
	// different one is refused rather than silently replacing it.
	ErrOriginalExists = errors.New("original config already recorded")
	// ErrNewerSchema: the store on disk was written by a newer acp-sidecar.
	// Reading it with this version could misread or damage it.
	ErrNewerSchema = errors.New("store written by a newer acp-sidecar")
	// ErrCorrupt: the files in the state directory cannot be opened. The error
	// wraps badger's cause; see Fallback.
	ErrCorrupt = errors.New("state store is damaged")
	// ErrNoSpace: the state directory's disk has too little room. badger
	// writes through memory-mapped files, and a write into one on a full
	// disk kills the process (SIGBUS) rather than failing, so the store is
	// not opened on a disk short of room.
	ErrNoSpace = errors.New("too little free disk space for the state store")
	// ErrUnavailable: a read of a shared store needed the store on disk and no
	// backend could be reached in time. Writes never fail this way: they wait
	// in memory (see Shared).
	ErrUnavailable = errors.New("store unavailable")
	// ErrDeleted: the session was deleted (DeleteSession). A write for it is
	// refused, so that a process still holding the session in memory cannot
	// write it back. A read of it, and a second delete, fail with an error
	// that is both ErrNotFound and ErrDeleted.
	ErrDeleted = errors.New("session deleted")
)

// errGone is what a read or a delete of a deleted session wraps: the session
// is not found, and it was deleted.
var errGone = gone{}

type gone struct{}

func (gone) Error() string   { return "not found: session deleted" }
func (gone) Unwrap() []error { return []error{ErrNotFound, ErrDeleted} }

// SchemaVersion is the layout version this code writes. A store with a higher
// version is refused with ErrNewerSchema.
const SchemaVersion = 1

// Store is the contract every store meets: in memory (NewMemory), badger on disk
// and a store shared between processes (Open). One contract test runs against
// all of them.
//
// Writes are upserts and safe to repeat: a write that is retried after a broken
// connection lands once. Stores copy what they are given and what they return,
// so callers may reuse their values.
type Store interface {
	// PutSession creates or replaces the session record s.ClientID. A nil
	// s.Original leaves a stored original alone; a non-nil one is stored if
	// there is none and must otherwise equal it, or the put fails with
	// ErrOriginalExists. NativeID and NativeHistory become native→client
	// mappings for ClientID.
	PutSession(ctx context.Context, s *Session) error
	// Session returns the session record, or ErrNotFound.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions lists every session, most recent activity first.
	Sessions(ctx context.Context) ([]Summary, error)
	// PutTurn appends or replaces turn t.Index (from 1) of the session.
	PutTurn(ctx context.Context, sessionID string, t *Turn) error
	// Turns lists the session's turns by index, rolled-back ones included.
	Turns(ctx context.Context, sessionID string) ([]Turn, error)
	// RollBack marks every turn after the first keep TurnRolledBack. It
	// deletes none: show and the trace keep them.
	RollBack(ctx context.Context, sessionID string, keep int) error
	// ClientID returns the client session id that nativeID belongs or belonged
	// to, or ErrNotFound.
	ClientID(ctx context.Context, nativeID string) (string, error)
	// DeleteSession forgets session id (DESIGN.md "A session's whole life"):
	// its record and original, every turn (rolled-back ones too), the
	// handoff bookkeeping, the lineage, the listing entry and every native
	// id that maps to it. Afterwards Session and Turns fail with ErrNotFound,
	// Sessions leaves it out, and ClientID of any of its native ids fails
	// with ErrNotFound. A tombstone that holds the id and nothing else
	// stays, so that a later PutSession, PutTurn or RollBack for id fails
	// with ErrDeleted. An id the store never had fails with ErrNotFound; one
	// deleted before fails with an error that is both ErrNotFound and
	// ErrDeleted, so the caller can tell.
	//
	// On disk, DeleteSession returns once none of the deleted values is left
	// in any file of the state directory: not in badger's memtable logs, its
	// tables or its value log (badgerStore.DeleteSession says how). The
	// shared store sends the delete to the owner after the writes queued
	// before it and returns when the owner has done it; when ctx ends
	// first, the error says so and the delete stays queued, in order, until
	// a backend takes it.
	DeleteSession(ctx context.Context, id string) error
	// PutAgent creates or replaces the record a.Name: the newest initialize
	// result is the one that describes the agent now. An empty Name is an
	// error, since the name is the key.
	PutAgent(ctx context.Context, a *AgentInfo) error
	// Agent returns the record of the named agent, or ErrNotFound when this
	// agent was never started with a store.
	Agent(ctx context.Context, name string) (*AgentInfo, error)
	// Flush returns once every write made before the call is as durable as the
	// store gets (in badger's log, which survives a process kill), or ctx ends.
	// DESIGN.md "Processes": a config change and a turn's end must land before
	// the response that completes them is forwarded. It also reports write
	// errors that a store applying writes in the background could not return
	// from the write itself.
	Flush(ctx context.Context) error
	// Close releases the store; a background store first tries to land its
	// queued writes.
	Close() error
}

// encode marshals v as JSON without HTML escaping, so raw values keep their
// characters (<, >, & stay as they are).
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// clone deep-copies v through its JSON form, which is also what the disk store
// returns: stores behave alike.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	b, err := encode(v)
	if err != nil {
		panic(fmt.Sprintf("state: clone %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("state: clone %T: %v", v, err))
	}
	return out
}

func checkTurn(sessionID string, t *Turn) error {
	if t == nil || t.Index < 1 {
		return fmt.Errorf("put turn %s: index must be 1 or more", sessionID)
	}
	return nil
}

// checkAgent refuses a record that has no key.
func checkAgent(a *AgentInfo) error {
	if a == nil || a.Name == "" {
		return errors.New("put agent: empty name")
	}
	return nil
}

// nativeIDs are the native ids a session record maps to its client id.
func nativeIDs(s *Session) []string {
	ids := append([]string(nil), s.NativeHistory...)
	if s.NativeID != "" {
		ids = append(ids, s.NativeID)
	}
	return ids
}

// sortSummaries orders a listing most recent first, then by id for stability.
func sortSummaries(l []Summary) {
	sort.Slice(l, func(i, j int) bool {
		if !l[i].LastActivity.Equal(l[j].LastActivity) {
			return l[i].LastActivity.After(l[j].LastActivity)
		}
		return l[i].ID < l[j].ID
	})
}

// activity is the latest time a turn shows.
func (t *Turn) activity() time.Time {
	return later(t.Started, t.Ended)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

var (
	_ Store = (*memStore)(nil)
	_ Store = (*badgerStore)(nil)
	_ Store = (*owned)(nil)
	_ Store = (*remote)(nil)
	_ Store = (*Shared)(nil)
)

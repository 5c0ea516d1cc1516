package state

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease errors. A fleet's store (OpenPostgres) refuses a write for a session
// another sidecar holds, with an error that is a *LeaseError and one of
// these.
var (
	// ErrLeaseHeld: another sidecar holds the session's lease and it has
	// not expired. Its holder may still be writing: taking the session over
	// now would fork the record (see Leaser.Acquire's takeover).
	ErrLeaseHeld = errors.New("session held by another sidecar")
	// ErrFenced: this sidecar held the session's lease, and another took it
	// since (it expired while this one slept or was cut off, or was taken
	// over). This sidecar never writes the session again; the editor must
	// reconnect to the sidecar that holds it.
	ErrFenced = errors.New("session taken over by another sidecar")
)

// Holder names a sidecar process of a fleet.
type Holder struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Instance is random per process, so that a pid reused after a restart,
	// or a container's pid 1 on every host, is never taken for the same
	// holder.
	Instance string `json:"instance"`
}

func (h Holder) String() string {
	if h.Host == "" {
		return "an unknown sidecar"
	}
	return fmt.Sprintf("the sidecar on %s (pid %d)", h.Host, h.PID)
}

// LeaseError says who holds a session this sidecar may not write.
type LeaseError struct {
	Session string
	Holder  Holder
	// Until is when the holder's lease ends unless it renews it, on the
	// database's clock.
	Until time.Time
	// Fenced: this sidecar held the lease and lost it (ErrFenced); else
	// another held it first (ErrLeaseHeld).
	Fenced bool
}

func (e *LeaseError) Error() string {
	if e.Fenced {
		return fmt.Sprintf("session %s is now held by %s; this sidecar lost its lease and no longer writes it: reconnect the editor to the sidecar that holds it", e.Session, e.Holder)
	}
	return fmt.Sprintf("session %s is held by %s until %s unless it renews; open it there, wait for the lease to end, or take it over (--takeover) if that host is gone",
		e.Session, e.Holder, e.Until.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

func (e *LeaseError) Unwrap() error {
	if e.Fenced {
		return ErrFenced
	}
	return ErrLeaseHeld
}

// Leaser is what a fleet's store adds to Store: the leases that keep each
// session to one writer. A store of one host has none.
type Leaser interface {
	// Acquire takes session id's lease for this sidecar before it serves
	// the client's load or resume of it: at once when the lease is free,
	// expired or this sidecar's, at the next epoch. A lease live elsewhere
	// is refused with a *LeaseError (ErrLeaseHeld), unless takeover, which
	// takes it anyway and fences the old holder. A session the store does
	// not have is not an error: its first write takes the lease.
	Acquire(ctx context.Context, id string, takeover bool) error
	// Lost says whether this sidecar lost session id's lease, and to whom.
	// It is known without asking the database: the renewal and every write
	// notice it.
	Lost(id string) (*LeaseError, bool)
	// Confirm asks the database whether this sidecar still holds session
	// id's lease, before a prompt runs on it: a turn never starts here
	// after another host took the session. A lease found lost is a
	// *LeaseError (ErrFenced); a database out of reach is not an error
	// (the session goes on, not shared), nor a session this sidecar never
	// wrote.
	Confirm(ctx context.Context, id string) error
	// Sharing says whether session id's record is shared with the fleet
	// now, and if not, why: its lease was lost, or the database is out of
	// reach and its writes wait in this process.
	Sharing(id string) (shared bool, why string)
}

// LeaseOf is the store's Leaser, or nil for a store without leases.
func LeaseOf(s Store) Leaser {
	l, _ := s.(Leaser) // a store without leases is the common case, not an error
	return l
}

package intercept

import (
	"context"
	"errors"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// leases are a fleet's: a session is served here only while this sidecar
// holds its lease in the fleet's store (DESIGN.md "The store"). With a
// store of one host there are none, and each question costs a nil check.
type leases struct {
	leaser   state.Leaser // nil for a store of one host
	takeover bool         // --takeover: a client's open takes a lease even from a live holder
	rec      *record.Recorder
	led      *ledger.Ledger
	log      *slog.Logger
}

// Acquire takes session sid's lease in a fleet's store before the client's
// load or resume of it is served here (--takeover: even from a live
// holder). A lease another sidecar holds is refused with the holder's name.
// A copy of the session this sidecar kept after it lost the lease is
// dropped, so that the session is rebuilt from what the holder since wrote.
// A database out of reach does not refuse the open: the session goes on
// here, not shared, and its writes wait for the database.
func (l *leases) Acquire(ctx context.Context, sid string) error {
	if l.leaser == nil {
		return nil
	}
	_, wasLost := l.leaser.Lost(sid)
	err := l.leaser.Acquire(ctx, sid, l.takeover)
	switch {
	case errors.Is(err, state.ErrUnavailable):
		l.log.Warn("the fleet's store is out of reach; the session is served here, not shared, until it is back", "session", sid, "err", err)
		return nil
	case err != nil:
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", err)
	case wasLost:
		return l.rec.Do(ctx, func(ctx context.Context) {
			l.rec.SetSession(sid, nil)
			l.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
		})
	}
	return nil
}

// Fleet says whether sessions are a fleet's, with leases: each prompt is
// then confirmed with the database before it runs (Confirm).
func (l *leases) Fleet() bool { return l.leaser != nil }

// Confirm checks, before a prompt on session sid goes to the agent, that
// this sidecar still holds the session's lease in the fleet's store: a
// lease another host took is refused with its name, and the turn never
// starts here.
func (l *leases) Confirm(ctx context.Context, sid string) error {
	if l.leaser == nil || sid == "" {
		return nil
	}
	if err := l.leaser.Confirm(ctx, sid); err != nil {
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", err)
	}
	return nil
}

// Lost is the error for request f on a session another sidecar took the
// lease of: this one no longer serves it (nil while it does). Without a
// fleet it costs a nil check.
func (l *leases) Lost(f *proxy.Frame) error {
	if l.leaser == nil {
		return nil
	}
	if le, lost := l.leaser.Lost(wire.SessionIDOf(f)); lost {
		return wire.Refuse(proxy.CodeLeaseHeld, "acp-sidecar: %v", le)
	}
	return nil
}

// Sharing says, in a fleet, whether session sid's writes reach the fleet's
// store, and why not when they do not (`_sidecar/status`); ok is false
// without a fleet.
func (l *leases) Sharing(sid string) (shared bool, why string, ok bool) {
	if l.leaser == nil {
		return false, "", false
	}
	shared, why = l.leaser.Sharing(sid)
	return shared, why, true
}

package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// Feed is a store's change feed: *state.Shared (a state dir's owner tells
// it) and *state.Fleet (PostgreSQL's LISTEN/NOTIFY) have one. Watch calls
// listening once it listens, then changed with the id of each session that
// changes, until ctx ends (nil) or the feed breaks (an error: what it
// missed meanwhile is lost, so the caller reads again and watches again).
type Feed interface {
	Watch(ctx context.Context, listening func(), changed func(id string)) error
}

// hub hands the feed's changes to the open pages' streams. A stream is
// woken, never sent data: it reads the record again itself, so any number
// of changes while it renders cost one more render.
type hub struct {
	mu   sync.Mutex
	subs map[*follower]struct{}
	// gen counts the changes seen; following says a watch listens now, so
	// that a listing read at generation gen is current while gen stays.
	gen       uint64
	following bool
	// all counts the changes of every session at once (the feed listening
	// again); of counts each session's own. A session's page is current
	// while their sum stays.
	all uint64
	of  map[string]uint64
}

// follower is one stream's subscription.
type follower struct {
	id   string        // the session it follows; "" follows every session
	wake chan struct{} // capacity 1
}

func (h *hub) join(id string) *follower {
	f := &follower{id: id, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*follower]struct{}{}
	}
	h.subs[f] = struct{}{}
	return f
}

func (h *hub) leave(f *follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, f)
}

// changed wakes the followers of session id, and of every session; id ""
// (the feed listens again after a break) wakes everyone.
func (h *hub) changed(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	if id == "" {
		h.all++
	} else {
		if h.of == nil {
			h.of = map[string]uint64{}
		}
		h.of[id]++
	}
	for f := range h.subs {
		if id == "" || f.id == "" || f.id == id {
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
	}
}

// setFollowing notes whether a watch listens; either way the cached
// listing is stale.
func (h *hub) setFollowing(on bool) {
	h.mu.Lock()
	h.following = on
	h.mu.Unlock()
	h.changed("")
}

// current is the generation and whether changes are being followed.
func (h *hub) current() (gen uint64, following bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen, h.following
}

// genOf is session id's generation: it moves when id changes, or every
// session does, and only then.
func (h *hub) genOf(id string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.all + h.of[id]
}

// follow runs the store's feed into the hub until ctx ends, watching
// again after each break, with a growing pause so a store that is gone is
// not hammered. It is the Server's, started and waited for by Serve.
func (s *Server) follow(ctx context.Context) {
	feed, ok := s.store.(Feed)
	if !ok {
		return
	}
	const first, most = 50 * time.Millisecond, 5 * time.Second
	pause := first
	said := "" // the last failure logged: an owner without a feed fails every time
	for {
		listened := false
		err := feed.Watch(ctx, func() {
			listened = true
			s.forget("")
			s.hub.setFollowing(true) // and every page reads again
		}, func(id string) {
			s.forget(id)
			s.hub.changed(id)
		})
		s.hub.setFollowing(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			pause, said = first, ""
		}
		if msg := fmt.Sprint(err); msg != said {
			// The store changing hands (a sidecar that owned it exited) is
			// routine; anything else is worth a line on stderr.
			said = msg
			level := slog.LevelWarn
			if errors.Is(err, state.ErrUnavailable) {
				level = slog.LevelInfo
			}
			s.log.Log(ctx, level, "the store's change feed broke; the pages follow it again once it is back", "err", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, most)
	}
}

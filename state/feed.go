package state

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// The change feed of a state dir (docs/ui.md, "Live"): the owner tells
// whoever watches the id of each session whose record, turns or liveness
// changed, as its writes land. Every write of the directory goes through
// the owner's badger handle, whichever process made it, so the handle is
// the one place that sees them all; the feed reads no data, and a watcher
// reads what it shows afterwards. A process that owns the store watches its
// handle; the others watch over the owner's socket, on a connection of
// their own ("watch", then one {"changed": id} line a change).

// featureWatch says an owner serves the "watch" op.
const featureWatch = "watch"

// errOwnerCannotWatch: the owner is an older acp-sidecar without the feed.
var errOwnerCannotWatch = errors.New("the process that owns the store is an older acp-sidecar without a change feed")

// feed fans the ids of changed sessions out to its watchers. The zero
// value is ready. publish never blocks: a watcher that is slow to take its
// ids gets each id once, however often it changed meanwhile.
type feed struct {
	mu   sync.Mutex
	subs map[*watcher]struct{}
}

// watcher is one subscription to a feed.
type watcher struct {
	wake chan struct{} // capacity 1: pending has ids

	mu      sync.Mutex
	pending []string // changed since the last take, oldest first, each once
}

func (f *feed) subscribe() *watcher {
	w := &watcher{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[*watcher]struct{}{}
	}
	f.subs[w] = struct{}{}
	return w
}

func (f *feed) unsubscribe(w *watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, w)
}

// publish tells every watcher that the sessions ids changed. It runs on the
// write path after the write landed, so it only notes the ids.
func (f *feed) publish(ids ...string) {
	if len(ids) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.subs {
		w.mu.Lock()
		for _, id := range ids {
			if !slices.Contains(w.pending, id) {
				w.pending = append(w.pending, id)
			}
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// take returns the ids changed since the last take.
func (w *watcher) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.pending
	w.pending = nil
	return ids
}

// Watch calls changed with the id of each session whose record, turns or
// liveness changes in the state dir, as the writes land at the directory's
// owner, whichever process made them, until ctx ends (nil). listening is
// called once the owner has the subscription, before any change: what the
// caller reads then misses nothing that follows. It is Fleet.Watch for one
// host, and like it the feed carries ids only.
//
// When the owner goes away or the store changes hands, Watch returns an
// error wrapping ErrUnavailable: changes while nobody watched are not kept,
// so the caller reads again what it shows and calls Watch again (the store
// looks for the next owner meanwhile). An owner of an older acp-sidecar,
// without the feed, fails it at once with an error that says so.
func (s *Shared) Watch(ctx context.Context, listening func(), changed func(id string)) error {
	b, err := s.link.wait(ctx)
	if err == nil && b == nil {
		err = ErrUnavailable
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.dir, err)
	}
	switch b := b.(type) {
	case *owned:
		return s.watchOwned(ctx, b, listening, changed)
	case *remote:
		d, ok := s.src.(*diskSource)
		if !ok {
			break
		}
		err := watchRemote(ctx, d.sock, listening, changed)
		if errors.Is(err, errConn) {
			// The owner went away: the writer's connection is as dead as
			// this one, and the next watch needs the next owner.
			s.link.drop(b, err)
			return fmt.Errorf("watch %s: %w: %w", s.dir, ErrUnavailable, err)
		}
		return err
	}
	return fmt.Errorf("watch %s: this store has no change feed", s.dir)
}

// watchOwned follows this process's own badger handle, until ctx ends or
// the handle stops being the store's backend.
func (s *Shared) watchOwned(ctx context.Context, o *owned, listening func(), changed func(id string)) error {
	w := o.feed.subscribe()
	defer o.feed.unsubscribe(w)
	listening()
	for {
		cur, handover := s.link.current()
		if cur != Store(o) {
			return fmt.Errorf("watch %s: %w: the store changed hands", s.dir, ErrUnavailable)
		}
		for _, id := range w.take() {
			changed(id)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-handover: // the backend changed: is it still o?
		}
	}
}

// change is one line of the owner's feed after the "watch" op's answer.
type change struct {
	Changed string `json:"changed"`
}

// watchRemote follows the owner at path on a connection of its own. A
// broken connection is an error wrapping errConn.
func watchRemote(ctx context.Context, path string, listening func(), changed func(id string)) error {
	r, err := dial(ctx, path, nil)
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer r.Close()
	if !slices.Contains(r.features, featureWatch) {
		return fmt.Errorf("watch %s: %w", path, errOwnerCannotWatch)
	}
	if _, err := r.call(ctx, &request{Op: "watch"}); err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	if err := r.c.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("watch %s: %w: %w", path, errConn, err)
	}
	stop := context.AfterFunc(ctx, func() { r.c.Close() })
	defer stop()
	listening()
	for {
		line, err := r.r.ReadBytes('\n')
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w: %w", path, errConn, err)
		}
		var c change
		if err := json.Unmarshal(line, &c); err != nil {
			return fmt.Errorf("watch %s: %w: bad line from the owner: %w", path, errConn, err)
		}
		changed(c.Changed)
	}
}

// watchWriteTimeout bounds one write of the feed to a watcher: one that
// stopped reading is cut off rather than holding a goroutine of the owner.
const watchWriteTimeout = 30 * time.Second

// serveWatch turns connection c into a feed: the answer to the "watch"
// request id, then a line for each change, until either side closes. The
// watcher sends nothing more, so the reader only notices the end.
func (srv *server) serveWatch(c net.Conn, r *bufio.Reader, w *bufio.Writer, id uint64) {
	sub := srv.st.feed.subscribe()
	defer srv.st.feed.unsubscribe(sub)
	gone := make(chan struct{})
	go func() {
		// Owned by serveWatch, which closes c and waits for it.
		defer close(gone)
		_, _ = io.Copy(io.Discard, r)
	}()
	defer func() {
		c.Close()
		<-gone
	}()
	ack, err := encode(&response{ID: id})
	if err != nil {
		return
	}
	send := func(b []byte) bool {
		if err := c.SetWriteDeadline(time.Now().Add(watchWriteTimeout)); err != nil {
			return false
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return false
		}
		return w.Flush() == nil
	}
	if !send(ack) {
		return
	}
	for {
		select {
		case <-gone:
			return
		case <-sub.wake:
		}
		for _, sid := range sub.take() {
			b, err := encode(&change{Changed: sid})
			if err != nil || !send(b) {
				return
			}
		}
	}
}

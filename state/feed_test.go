package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

// feedBound only turns a hang into a failure; nothing here is timed.
const feedBound = 30 * time.Second

// watchRun is one s.Watch on a goroutine the test owns.
type watchRun struct {
	ids    chan string
	ended  chan error
	cancel context.CancelFunc
	done   bool // the result was taken
	err    error
}

// result waits for the Watch to return.
func (w *watchRun) result() error {
	if !w.done {
		w.err, w.done = <-w.ended, true
	}
	return w.err
}

// watching starts s.Watch and returns once it listens; the test's end
// stops it, and a Watch that ended by itself with an error nobody looked
// at fails the test.
func watching(t *testing.T, s *Shared) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watchRun{ids: make(chan string, 100), ended: make(chan error, 1), cancel: cancel}
	listening := make(chan struct{})
	go func() {
		w.ended <- s.Watch(ctx, func() { close(listening) }, func(id string) { w.ids <- id })
	}()
	t.Cleanup(func() {
		looked := w.done
		cancel()
		if err := w.result(); err != nil && !looked {
			t.Errorf("Watch: %v", err)
		}
	})
	select {
	case <-listening:
	case <-w.ended:
		w.done = true
		t.Fatal("Watch ended before it listened")
	case <-time.After(feedBound):
		t.Fatal("Watch did not listen")
	}
	return w
}

// expectChange waits for id among the reported changes.
func expectChange(t *testing.T, ids <-chan string, id string) {
	t.Helper()
	timeout := time.After(feedBound)
	for {
		select {
		case got := <-ids:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("no change reported for %s", id)
		}
	}
}

// The owner's watch sees its own writes and the other process's; the
// client's watch, over the socket, sees both too, and the delete.
func TestWatchOwnerAndClient(t *testing.T) {
	dir := t.TempDir()
	owner := openShared(t, dir)
	client := openShared(t, dir)
	if !owner.Owner() || client.Owner() {
		t.Fatal("want the first Open to own the store and the second to be its client")
	}
	ownIDs := watching(t, owner).ids
	clientIDs := watching(t, client).ids

	for _, w := range []struct {
		by *Shared
		id string
	}{{owner, "by-owner"}, {client, "by-client"}} {
		if err := writeSample(t.Context(), w.by, w.id); err != nil {
			t.Fatal(err)
		}
		if err := w.by.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		expectChange(t, ownIDs, w.id)
		expectChange(t, clientIDs, w.id)
	}
	if err := client.RollBack(t.Context(), "by-owner", 1); err != nil {
		t.Fatal(err)
	}
	if err := client.DeleteSession(t.Context(), "by-client"); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ownIDs, "by-client")
	expectChange(t, clientIDs, "by-client")
}

// A session stops being live when the process that wrote it goes: the
// feed says so, with no write.
func TestWatchLiveEnds(t *testing.T) {
	dir := t.TempDir()
	owner := openShared(t, dir)
	ids := watching(t, owner).ids
	client, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSample(t.Context(), client, "leaving"); err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ids, "leaving")
	closeOK(t, client)
	expectChange(t, ids, "leaving")
	list, err := owner.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == "leaving" && s.Live {
			t.Error("the session is still live after its process closed the store")
		}
	}
}

// When the owner goes, a client's watch ends with ErrUnavailable, and a
// watch started again follows the next owner: here the client itself.
func TestWatchOwnerGoes(t *testing.T) {
	dir := t.TempDir()
	owner, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	client := openShared(t, dir)
	first := watching(t, client)
	closeOK(t, owner)
	if err := first.result(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Watch when the owner went = %v, want ErrUnavailable", err)
	}
	// The watch that follows finds the next owner: the store looked for
	// one when the first watch's connection broke.
	ids := watching(t, client).ids
	if err := writeSample(t.Context(), client, "after"); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ids, "after")
	if !client.Owner() {
		t.Error("the client did not take the store over")
	}
}

package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// checkSamples asserts that sessions prefix-from..prefix-(to-1) are there with
// their three completed turns.
func checkSamples(t *testing.T, s Store, prefix string, from, to int) {
	t.Helper()
	ctx := t.Context()
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := s.Session(ctx, id); err != nil {
			t.Errorf("Session(%s): %v", id, err)
			continue
		}
		turns, err := s.Turns(ctx, id)
		if err != nil || len(turns) != 3 {
			t.Errorf("Turns(%s) = %d turns, %v, want 3", id, len(turns), err)
		}
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := writeSample(t.Context(), s, fmt.Sprintf("r-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	closeOK(t, s) // lands the queue and flushes a table: the reopen checks it
	checkSamples(t, openShared(t, dir), "r", 0, 50)
}

// A process killed right after Flush keeps every flushed write: badger's log
// is memory-mapped and survives a process kill without fsync (go-libs.md §4).
func TestKillAfterFlush(t *testing.T) {
	const n = 40
	dir := t.TempDir()
	h := startHelper(t, "durability", dir, fmt.Sprintf("ACP_STATE_TEST_N=%d", n))
	h.expect("ready")
	h.kill()

	s := openShared(t, dir)
	turns, err := s.Turns(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != n {
		t.Fatalf("after SIGKILL: %d turns, want %d", len(turns), n)
	}
	for i, tr := range turns {
		if tr.Index != i+1 || tr.Status != TurnCompleted {
			t.Errorf("turn %d = #%d %s, want #%d completed", i, tr.Index, tr.Status, i+1)
		}
	}
	if !s.Owner() {
		t.Error("reopen after a killed owner did not take the store over")
	}
}

// Two writer processes share one directory; this process reads both while both
// run; the owner is SIGKILLed; the other takes over and finishes; nothing is
// missing.
func TestMultiProcess(t *testing.T) {
	dir := t.TempDir()
	a := startHelper(t, "writer", dir)
	a.expect("ready owner=true")
	b := startHelper(t, "writer", dir)
	b.expect("ready owner=false")

	a.send("write a 0 5")
	b.send("write b 0 5")
	a.expect("ok owner=true")
	b.expect("ok owner=false")

	func() {
		c := openShared(t, dir)
		if c.Owner() {
			t.Fatal("third process became owner while the first runs")
		}
		checkSamples(t, c, "a", 0, 5)
		checkSamples(t, c, "b", 0, 5)
		l := mustList(t, c)
		if len(l) != 10 {
			t.Fatalf("Sessions() lists %d, want 10", len(l))
		}
		for _, sum := range l {
			if !sum.Live || sum.Turns != 3 {
				t.Errorf("summary %+v, want live with 3 turns", sum)
			}
		}
		closeOK(t, c)
	}()

	a.kill()
	b.send("write b 5 10")
	b.expect("ok owner=true") // took over
	b.send("exit")
	b.expect("closed")

	s := openShared(t, dir)
	checkSamples(t, s, "a", 0, 5)
	checkSamples(t, s, "b", 0, 10)
	for _, sum := range mustList(t, s) {
		if sum.Live {
			t.Errorf("%s still live after its processes ended", sum.ID)
		}
	}
}

// In one process: the owner closes, the client notices on its next write and
// takes over; nothing queued is lost.
func TestTakeoverInProcess(t *testing.T) {
	dir := t.TempDir()
	owner, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	client := openShared(t, dir)
	if client.Owner() {
		t.Fatal("second Open is owner")
	}
	writeAll(t, client, "c", 0, 5)
	closeOK(t, owner)
	writeAll(t, client, "c", 5, 10)
	if !client.Owner() {
		t.Error("client did not take over")
	}
	checkSamples(t, client, "c", 0, 10)
}

// A read that the owner's exit breaks under it waits for the next owner
// and reads there: a native id still finds its client session, and the
// session is still listed by its client id, never as missing.
func TestReadsWaitThroughAHandOver(t *testing.T) {
	dir := t.TempDir()
	owner, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	client := openShared(t, dir)
	if client.Owner() {
		t.Fatal("second Open is owner")
	}
	mustPut(t, owner, sampleSession("a"))
	if err := owner.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	closeOK(t, owner)
	// The client has written nothing: its next read is what finds the
	// owner gone.
	if id, err := client.ClientID(t.Context(), "n-a-1"); err != nil || id != "a" {
		t.Errorf("ClientID(n-a-1) across the hand-over = %q, %v; want a", id, err)
	}
	closeOK(t, client)
	owner, err = Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	client = openShared(t, dir)
	closeOK(t, owner)
	list, err := client.Sessions(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != "a" {
		t.Errorf("Sessions() across the hand-over = %v, %v; want a alone", list, err)
	}
	if got, err := client.Session(t.Context(), "a"); err != nil || got.ClientID != "a" {
		t.Errorf("Session(a) after the hand-over = %v, %v", got, err)
	}
}

func writeAll(t *testing.T, s *Shared, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := writeSample(t.Context(), s, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// With the directory locked and nobody serving it, Open still succeeds, writes
// are accepted and readable from memory, Flush waits, and everything lands once
// the lock is free.
func TestNoBackendCatchesUp(t *testing.T) {
	dir := t.TempDir()
	squatter, err := openBadger(dir, testLogger(t)) // holds the lock, serves nothing
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t), ConnectTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open with a busy dir: %v", err)
	}
	t.Cleanup(func() { closeOK(t, s) })
	for i := range 3 {
		if err := writeSample(t.Context(), s, fmt.Sprintf("q-%d", i)); err != nil {
			t.Fatalf("write with no backend: %v", err)
		}
	}
	if err := s.RollBack(t.Context(), "q-0", 1); err != nil {
		t.Fatal(err)
	}
	checkSamples(t, s, "q", 0, 3) // from memory
	if turns, _ := s.Turns(t.Context(), "q-0"); turns[1].Status != TurnRolledBack {
		t.Errorf("queued rollback not visible: turn 2 is %s", turns[1].Status)
	}
	if _, err := s.Session(t.Context(), "elsewhere"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Session(not queued) err = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with no backend = %v, want context.Canceled", err)
	}

	closeOK(t, squatter)
	if err := s.Flush(t.Context()); err != nil {
		t.Fatalf("Flush after the lock is free: %v", err)
	}
	if !s.Owner() {
		t.Error("not owner after the lock is free")
	}
	checkSamples(t, s, "q", 0, 3)
	kept := map[string]int{}
	for _, sum := range mustList(t, s) {
		kept[sum.ID] = sum.Turns
	}
	if want := map[string]int{"q-0": 1, "q-1": 3, "q-2": 3}; !maps.Equal(kept, want) {
		t.Errorf("kept turns = %v, want %v", kept, want)
	}
}

// A different original this process could not know of at put time (no
// backend) is refused when the write lands; the rest of the record still lands
// and Flush reports the refusal.
func TestOriginalRefusedLate(t *testing.T) {
	dir := t.TempDir()
	b, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutSession(t.Context(), sampleSession("o")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t), ConnectTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, s) })
	late := sampleSession("o")
	late.Original = sampleConfig("sonnet")
	late.Cwd = "/late"
	if err := s.PutSession(t.Context(), late); err != nil {
		t.Fatalf("PutSession with no backend: %v", err)
	}
	closeOK(t, b)
	if err := s.Flush(t.Context()); !errors.Is(err, ErrOriginalExists) {
		t.Errorf("Flush() = %v, want ErrOriginalExists", err)
	}
	got, err := s.Session(t.Context(), "o")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cwd != "/late" || !sameConfig(got.Original, sampleConfig("opus")) {
		t.Errorf("got cwd %q original %v, want /late and the first original", got.Cwd, got.Original.ByCategory("model"))
	}
}

// A PutAgent made while the owner is gone and nobody can take over waits in
// memory, reads back from there (the newest put of a name wins), and lands
// once the directory is free.
func TestAgentQueuedWhileOwnerGone(t *testing.T) {
	dir := t.TempDir()
	owner, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(t.Context(), dir, Options{Logger: testLogger(t), ConnectTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, client) })
	if client.Owner() {
		t.Fatal("second Open is owner")
	}
	closeOK(t, owner)
	// The client has not noticed (it notices on its next call), so this takes
	// the lock first and serves nothing: there is no backend to be had.
	squatter, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.PutAgent(t.Context(), sampleAgent("claude")); err != nil {
		t.Fatalf("PutAgent with the owner gone: %v", err)
	}
	want := sampleAgent("claude")
	want.Init = json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{}}`)
	if err := client.PutAgent(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := client.Agent(t.Context(), "claude")
	if err != nil {
		t.Fatalf("Agent(queued): %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Agent(queued) mismatch (-want +got):\n%s", diff)
	}
	if _, err := client.Agent(t.Context(), "codex"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Agent(not queued) err = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := client.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with no backend = %v, want context.Canceled", err)
	}

	closeOK(t, squatter)
	if err := client.Flush(t.Context()); err != nil {
		t.Fatalf("Flush after the lock is free: %v", err)
	}
	if !client.Owner() {
		t.Error("not owner after the lock is free")
	}
	closeOK(t, client) // read it back from disk, not from the queue
	b, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, b)
	got, err = b.Agent(t.Context(), "claude")
	if err != nil {
		t.Fatalf("Agent after landing: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Agent on disk mismatch (-want +got):\n%s", diff)
	}
}

// A delete made while no backend can be reached waits in the queue, behind
// the writes made before it: it is neither lost nor applied before them
// (which would leave them to write the session back). Meanwhile the session
// reads as gone and takes no writes.
func TestDeleteQueuedWithoutBackend(t *testing.T) {
	dir := t.TempDir()
	squatter, err := openBadger(dir, testLogger(t)) // holds the lock, serves nothing
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t), ConnectTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, s) })
	for _, id := range []string{"q", "kept"} {
		if err := writeSample(t.Context(), s, id); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.DeleteSession(ctx, "q"); !errors.Is(err, context.Canceled) {
		t.Fatalf("DeleteSession with no backend and an ended ctx = %v, want context.Canceled", err)
	}
	if err := s.PutTurn(t.Context(), "q", sampleTurn(4, TurnCompleted)); !errors.Is(err, ErrDeleted) {
		t.Errorf("PutTurn(q) with its delete queued = %v, want ErrDeleted", err)
	}
	checkGone(t, s, "q", "n-q-1", "n-q-2") // from the queue
	if l := mustList(t, s); len(l) != 1 || l[0].ID != "kept" {
		t.Errorf("Sessions() with the delete queued = %+v, want kept alone", l)
	}

	closeOK(t, squatter)
	// A write of q landing after the delete would meet the tombstone, and
	// Flush would report ErrDeleted: nil says they landed in order.
	if err := s.Flush(t.Context()); err != nil {
		t.Fatalf("Flush after the lock is free: %v", err)
	}
	if !s.Owner() {
		t.Fatal("not owner after the lock is free")
	}
	checkGone(t, s, "q", "n-q-1", "n-q-2") // from the store
	if turns, err := s.Turns(t.Context(), "kept"); err != nil || len(turns) != 3 {
		t.Errorf("Turns(kept) = %d turns, %v, want 3", len(turns), err)
	}
	if err := s.DeleteSession(t.Context(), "q"); !errors.Is(err, ErrDeleted) {
		t.Errorf("DeleteSession(q) again = %v, want the session gone", err)
	}
}

// A session deleted by another process: this one's next write for it lands
// on the tombstone and Flush reports ErrDeleted; the write after that is
// refused at once.
func TestDeletedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	a := openShared(t, dir)
	b := openShared(t, dir)
	if err := writeSample(t.Context(), b, "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteSession(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.PutTurn(t.Context(), "x", sampleTurn(4, TurnCompleted)); err != nil {
		t.Fatalf("PutTurn in the other process = %v, want it queued", err)
	}
	if err := b.Flush(t.Context()); !errors.Is(err, ErrDeleted) {
		t.Errorf("Flush in the other process = %v, want ErrDeleted", err)
	}
	if err := b.PutSession(t.Context(), sampleSession("x")); !errors.Is(err, ErrDeleted) {
		t.Errorf("the next PutSession = %v, want ErrDeleted at once", err)
	}
	checkGone(t, b, "x", "n-x-1", "n-x-2")
}

// flakyDelete deletes, then reports a broken connection, as when the owner
// did the delete and the connection broke before its answer came.
type flakyDelete struct {
	Store
	broke bool
}

func (f *flakyDelete) DeleteSession(ctx context.Context, id string) error {
	err := f.Store.DeleteSession(ctx, id)
	if !f.broke {
		f.broke = true
		return fmt.Errorf("delete: %w: reset by peer", errConn)
	}
	return err
}

// The worker sends a delete again after a broken connection; finding the
// session gone then means the first attempt did it.
func TestDeleteResentAfterBrokenConnection(t *testing.T) {
	mem := NewMemory()
	mustPut(t, mem, sampleSession("a"))
	f := &flakyDelete{Store: mem}
	o := &op{sid: "a", del: &deletes{done: make(chan error, 1)}}
	if err := o.apply(t.Context(), f); !errors.Is(err, errConn) {
		t.Fatalf("first attempt = %v, want errConn", err)
	}
	if err := o.apply(t.Context(), f); err != nil {
		t.Errorf("second attempt = %v, want nil: the first one deleted", err)
	}
	fresh := &op{sid: "a", del: &deletes{done: make(chan error, 1)}}
	if err := fresh.apply(t.Context(), mem); !errors.Is(err, ErrDeleted) {
		t.Errorf("a new delete of it = %v, want it gone", err)
	}
}

// An owner from before deletes existed lists no features in its hello: the
// delete fails with a message that says why, and nothing is sent.
func TestDeleteOlderOwner(t *testing.T) {
	var r remote // no connection: sending would fail differently
	err := r.DeleteSession(t.Context(), "a")
	if !errors.Is(err, errOwnerCannotDelete) {
		t.Errorf("DeleteSession through an older owner = %v, want errOwnerCannotDelete", err)
	}
}

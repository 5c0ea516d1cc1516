package ui

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// The targets of docs/ui.md ("Fast"): the sessions page of 10 000 sessions
// and the page of a session of 1 000 turns each render in under 300 ms of
// server time, and no page weighs 200 KB. The tests below check the
// weight and what the listing reads, which do not depend on the machine;
// the benchmarks measure the time:
//
//	go test -run XXX -bench . -benchtime 20x ./cmd/acp-sidecar/ui/

const (
	manySessions = 10_000
	manyTurns    = 1_000
	maxPageBytes = 200_000 // 200 KB
)

// fillSessions writes n sessions: half titled by their agent, half with a
// first prompt instead, on a few agents and directories.
func fillSessions(tb testing.TB, st state.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("sess-%05d", i)
		s := &state.Session{
			ClientID: id, NativeID: "n-" + id, NativeHistory: []string{"n-" + id},
			Agent: []string{"/usr/local/bin/agent-" + fmt.Sprint(i%3), "--acp"}, Cwd: fmt.Sprintf("/home/me/src/project-%d", i%40),
			Created: t0, Updated: t0.Add(time.Duration(i) * time.Second), Baseline: config("m", "code"), Live: config("m", "code"),
		}
		if i%2 == 0 {
			s.Title = fmt.Sprintf("Session %d: fix the relay's ordering when a response overtakes", i)
		}
		if i%7 == 0 {
			s.Closed = &t0
		}
		if err := st.PutSession(ctx, s); err != nil {
			tb.Fatal(err)
		}
		if i%2 == 1 {
			tr := turn(1, "n-"+id, fmt.Sprintf("prompt %d: why does the build fail on Windows?\nsecond line", i), state.TurnCompleted)
			if err := st.PutTurn(ctx, id, &tr); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := st.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
}

// fillLongSession writes one session of n turns, on native sessions made
// by resets, rewinds and restarts, with prompts, answers and tool calls of
// a real conversation's size.
func fillLongSession(tb testing.TB, st state.Store, id string, n int) {
	tb.Helper()
	answer := strings.Repeat("The relay copies each frame in order; the recorder reads a copy. ", 16) // about 1 KiB
	var history []string
	native := ""
	var turns []state.Turn
	for i := 1; i <= n; i++ {
		if i%50 == 1 {
			native = fmt.Sprintf("native-%03d", len(history)+1)
			history = append(history, native)
		}
		tr := turn(i, native, fmt.Sprintf("turn %d: look at proxy/relay.go and tell me why the response can overtake the notification; keep it short", i), state.TurnCompleted)
		tr.Answer = answer
		tr.ToolCalls = []state.ToolCall{{ID: "a", Title: "Read proxy/relay.go", Status: "completed"}, {ID: "b", Title: "grep -n overtake", Status: "completed"}, {ID: "c", Title: "Edit proxy/relay.go", Status: "completed"}}
		switch {
		case i%50 == 1 && i > 1 && (i/50)%3 == 0:
			// a reset: no handoff
		case i%50 == 1 && i > 1:
			tr.HandoffDelivered = true
			if (i/50)%3 == 1 {
				turns[len(turns)-1].Status = state.TurnRolledBack // a rewind took the turn before back
			}
		}
		turns = append(turns, tr)
	}
	s := &state.Session{ClientID: id, NativeID: native, NativeHistory: history, Agent: []string{"claude-agent-acp"}, Cwd: "/home/me/src/acp-sidecar",
		Created: t0, Updated: t0, Baseline: config("sonnet", "default"), Original: config("opus", "default"), Live: config("opus", "plan"), Title: "A long one"}
	put(tb, st, s, turns...)
}

// counting counts the store's reads.
type counting struct {
	state.Store
	sessions, session, turns atomic.Int64
}

func (c *counting) Sessions(ctx context.Context) ([]state.Summary, error) {
	c.sessions.Add(1)
	return c.Store.Sessions(ctx)
}

func (c *counting) Session(ctx context.Context, id string) (*state.Session, error) {
	c.session.Add(1)
	return c.Store.Session(ctx, id)
}

func (c *counting) Turns(ctx context.Context, id string) ([]state.Turn, error) {
	c.turns.Add(1)
	return c.Store.Turns(ctx, id)
}

// The listing of 10 000 sessions reads the store's listing once and the
// first turn of the page's untitled rows, no session's record, and weighs
// well under the limit, on every page and filter.
func TestListingOfManySessions(t *testing.T) {
	st := &counting{Store: state.NewMemory()}
	fillSessions(t, st.Store, manySessions)
	s := newTestServer(t, st)
	for _, path := range []string{"/", "/?page=2", "/?page=200", "/?state=closed", "/?cwd=project-3&agent=agent-1", "/?state=live"} {
		st.sessions.Store(0)
		st.session.Store(0)
		st.turns.Store(0)
		w := get(t, s, path)
		b := body(t, w)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, b)
		}
		if len(b) > maxPageBytes {
			t.Errorf("%s weighs %d bytes, more than %d", path, len(b), maxPageBytes)
		}
		if n := st.sessions.Load(); n != 1 {
			t.Errorf("%s read the listing %d times", path, n)
		}
		if n := st.session.Load(); n != 0 {
			t.Errorf("%s read %d session records", path, n)
		}
		if n := st.turns.Load(); n > listPageSize {
			t.Errorf("%s read the turns of %d sessions, more than a page's rows", path, n)
		}
	}
	if b := body(t, get(t, s, "/")); !strings.Contains(b, "1–50 of 10000") || !strings.Contains(b, "prompt 9999: why does the build fail") {
		t.Errorf("the first page does not show the newest sessions, or not the first prompt of an untitled one")
	}
}

// The page of a session of 1 000 turns weighs under the limit: the turns
// come a hundred to a page.
func TestPageOfALongSession(t *testing.T) {
	st := state.NewMemory()
	fillLongSession(t, st, "long", manyTurns)
	s := newTestServer(t, st)
	for _, path := range []string{"/session?id=long", "/session?id=long&tp=1", "/session/turn?id=long&n=500", "/session/handoff?id=long&native=2"} {
		w := get(t, s, path)
		b := body(t, w)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %.500s", path, w.Code, b)
		}
		if len(b) > maxPageBytes {
			t.Errorf("%s weighs %d bytes, more than %d", path, len(b), maxPageBytes)
		}
	}
	b := body(t, get(t, s, "/session?id=long"))
	if !strings.Contains(b, `id="turn-1000"`) || strings.Contains(b, `id="turn-900"`) || !strings.Contains(b, "turns 901–1000 of 1000") {
		t.Error("the session's page does not show its newest hundred turns")
	}
	for _, ev := range []string{evReset, evRewind, evRestart} {
		if !strings.Contains(b, `data-event="`+ev+`"`) {
			t.Errorf("no %s among the native sessions", ev)
		}
	}

	// Rebuilt before every turn: the page lists and draws the newest
	// native sessions only.
	st2 := state.NewMemory()
	var history []string
	var turns []state.Turn
	for i := 1; i <= manyTurns; i++ {
		n := fmt.Sprintf("n-%d", i)
		history = append(history, n)
		tr := turn(i, n, "a turn on a fresh native session", state.TurnCompleted)
		tr.HandoffDelivered = i > 1
		turns = append(turns, tr)
	}
	put(t, st2, &state.Session{ClientID: "rebuilt", NativeID: history[len(history)-1], NativeHistory: history, Updated: t0}, turns...)
	w := get(t, newTestServer(t, st2), "/session?id=rebuilt")
	if b := body(t, w); w.Code != http.StatusOK || len(b) > maxPageBytes || strings.Count(b, `<li id="native-`) != maxDrawn {
		t.Errorf("a session of %d native sessions: %d, %d bytes, %d listed", manyTurns, w.Code, len(b), strings.Count(b, `<li id="native-`))
	}
}

// stores are the stores a benchmark renders from: in memory; badger owned
// by the ui's own process (no sidecar runs); and badger through a
// sidecar's socket (one runs, and owns the state dir).
func stores(b *testing.B, fill func(testing.TB, state.Store)) map[string]state.Store {
	b.Helper()
	mem := state.NewMemory()
	fill(b, mem)
	dir := b.TempDir()
	owner, err := state.Open(context.Background(), dir, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { owner.Close() })
	fill(b, owner)
	client, err := state.Open(context.Background(), dir, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	return map[string]state.Store{"memory": mem, "disk-owner": owner, "disk-socket": client}
}

func benchPage(b *testing.B, st state.Store, path string) {
	s := newTestServer(b, st)
	var bytes int
	for b.Loop() {
		w := get(b, s, path)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d", path, w.Code)
		}
		bytes = w.Body.Len()
	}
	b.ReportMetric(float64(bytes), "page-bytes")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
}

// BenchmarkSessionsPage renders the first page of 10 000 sessions, the
// listing read afresh each time (no feed: the worst case).
func BenchmarkSessionsPage(b *testing.B) {
	for name, st := range stores(b, func(tb testing.TB, st state.Store) { fillSessions(tb, st, manySessions) }) {
		b.Run(name, func(b *testing.B) { benchPage(b, st, "/") })
	}
}

// BenchmarkSessionPage renders a session of 1 000 turns.
func BenchmarkSessionPage(b *testing.B) {
	for name, st := range stores(b, func(tb testing.TB, st state.Store) { fillLongSession(tb, st, "long", manyTurns) }) {
		b.Run(name, func(b *testing.B) { benchPage(b, st, "/session?id=long") })
	}
}

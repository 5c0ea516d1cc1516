package ui

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// liveBound only turns a hang into a failure: nothing here is timed.
const liveBound = 30 * time.Second

// serving runs s on a loopback listener until the test ends, and returns
// its base URL.
func serving(t *testing.T, st state.Store) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Store: st, Addr: ln.Addr().String(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// sse is one event stream, read by the test.
type sse struct {
	t    *testing.T
	r    *bufio.Reader
	stop func()
}

type event struct{ name, data string }

func openStream(t *testing.T, s *Server, url string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: s.guard.cookie, Value: testToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	return &sse{t: t, r: bufio.NewReader(resp.Body), stop: cancel}
}

// next reads the next event; a stream that ends is a failure.
func (s *sse) next() event {
	s.t.Helper()
	type got struct {
		ev  event
		err error
	}
	ch := make(chan got, 1)
	go func() {
		var ev event
		var data []string
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				ch <- got{err: err}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				ev.data = strings.Join(data, "\n")
				ch <- got{ev: ev}
				return
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			s.t.Fatalf("the stream ended: %v", g.err)
		}
		return g.ev
	case <-time.After(liveBound):
		s.stop() // ends the reader
		s.t.Fatal("no event")
		return event{}
	}
}

// until reads events until one satisfies ok.
func (s *sse) until(what string, ok func(event) bool) event {
	s.t.Helper()
	for {
		if ev := s.next(); ok(ev) {
			return ev
		} else if ev.name == "gone" {
			s.t.Fatalf("waiting for %s: the stream says the session is gone", what)
		}
	}
}

// A page follows the record as another process writes it: a sidecar owns
// the state dir, the ui reads through its socket, and each change reaches
// the open page's stream with the content rendered again.
func TestLiveThroughTheOwnersSocket(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	sidecar, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sidecar.Close()
	uiStore, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer uiStore.Close()
	if !sidecar.Owner() || uiStore.Owner() {
		t.Fatal("want the sidecar to own the store and the ui to read through its socket")
	}
	put(t, sidecar, &state.Session{ClientID: "s1", NativeID: "n1", NativeHistory: []string{"n1"}, Baseline: config("m1", "code"), Live: config("m1", "code"), Updated: t0},
		turn(1, "n1", "first prompt", state.TurnCompleted))
	s, base := serving(t, uiStore)

	page := openStream(t, s, base+"/session/events?id=s1")
	list := openStream(t, s, base+"/events")
	if ev := page.next(); ev.name != "refresh" || !strings.Contains(ev.data, "first prompt") {
		t.Fatalf("first event %q: %.300s", ev.name, ev.data)
	}
	list.until("the listing", func(ev event) bool { return strings.Contains(ev.data, "s1") })

	// A turn begins, a config change, a rebuild: each shows.
	running := turn(2, "n1", "second prompt", state.TurnRunning)
	running.Ended = time.Time{}
	put(t, sidecar, &state.Session{ClientID: "s1", NativeID: "n1", NativeHistory: []string{"n1"}, Baseline: config("m1", "code"), Live: config("m1", "code"), Updated: t0}, running)
	page.until("the running turn", func(ev event) bool {
		return strings.Contains(ev.data, "second prompt") && strings.Contains(ev.data, "running")
	})
	put(t, sidecar, &state.Session{ClientID: "s1", NativeID: "n1", NativeHistory: []string{"n1"}, Baseline: config("m1", "code"), Live: config("m2-live", "code"), Updated: t0})
	page.until("the config change", func(ev event) bool { return strings.Contains(ev.data, "m2-live") })
	put(t, sidecar, &state.Session{ClientID: "s1", NativeID: "n2", NativeHistory: []string{"n1", "n2"}, ContextFrom: 3, Baseline: config("m1", "code"), Live: config("m2-live", "code"), Updated: t0})
	page.until("the reset", func(ev event) bool { return strings.Contains(ev.data, `data-event="reset"`) })

	put(t, sidecar, &state.Session{ClientID: "s2", NativeID: "x", Updated: t0.Add(time.Hour)})
	list.until("the new session", func(ev event) bool { return strings.Contains(ev.data, "s2") })

	if err := sidecar.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if ev := page.until("the delete", func(ev event) bool { return ev.name == "gone" }); !strings.Contains(ev.data, "not found") {
		t.Errorf("gone event: %q", ev.data)
	}
	if _, err := uiStore.Session(ctx, "s1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the ui's store still has s1: %v", err)
	}
}

// With no sidecar running the ui owns the state dir itself, and a sidecar
// that comes later writes through the ui's socket: the page follows it.
func TestLiveAsTheOwner(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	uiStore, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer uiStore.Close()
	s, base := serving(t, uiStore)
	list := openStream(t, s, base+"/events")
	list.until("the empty listing", func(ev event) bool { return strings.Contains(ev.data, "No sessions") })
	sidecar, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sidecar.Close()
	if !uiStore.Owner() {
		t.Fatal("the ui does not own the store")
	}
	put(t, sidecar, &state.Session{ClientID: "later", NativeID: "n", Updated: t0}, turn(1, "n", "a later prompt", state.TurnCompleted))
	list.until("the sidecar's session", func(ev event) bool { return strings.Contains(ev.data, "a later prompt") })
}

//go:build unix

package agenthost

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// bound is how long a test waits for an event before it fails. It is
// generous on purpose: nothing waits it out unless the code is broken, so
// a slow machine only makes a failing test slower.
const bound = 30 * time.Second

// await returns what ch delivers, or fails the test after bound.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound):
		t.Fatalf("no %s within %s", what, bound)
		panic("unreachable")
	}
}

// sh is the argv of a shell running script with args as $1...
func sh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script, "sh"}, args...)
}

// fakeLife records what the Agent tells it, in order. Back answers with
// back(n) for the n-th restarted agent (from 1), or nil.
type fakeLife struct {
	events chan string
	mu     sync.Mutex
	backs  int
	back   func(n int) error
}

func newLife(back func(n int) error) *fakeLife {
	return &fakeLife{events: make(chan string, 100), back: back}
}

func (l *fakeLife) End()                             { l.events <- "end" }
func (l *fakeLife) Gone(_ context.Context, r string) { l.events <- "gone: " + r }
func (l *fakeLife) Dead(reason string)               { l.events <- "dead: " + reason }

func (l *fakeLife) Back(context.Context) error {
	l.mu.Lock()
	l.backs++
	n := l.backs
	l.mu.Unlock()
	l.events <- "back"
	if l.back != nil {
		return l.back(n)
	}
	return nil
}

var _ Life = (*fakeLife)(nil)

// until reads events until one starts with prefix, and returns them all.
func (l *fakeLife) until(t *testing.T, prefix string) []string {
	t.Helper()
	var seen []string
	for {
		e := await(t, l.events, "life event "+prefix+" (seen "+strings.Join(seen, ", ")+")")
		seen = append(seen, e)
		if strings.HasPrefix(e, prefix) {
			return seen
		}
	}
}

// rest is every event not read yet; call it once the run has ended, when
// no more come.
func (l *fakeLife) rest() []string {
	var out []string
	for {
		select {
		case e := <-l.events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// run is one Agent behind a real relay, with the test as its client: it
// writes the client's input and reads what reaches the client, line by
// line, as real pipes carry them.
type run struct {
	agent   *Agent
	clientW *os.File    // the client's input; close it for the client's EOF
	lines   chan string // what reaches the client
	done    chan struct{}
	end     End // valid after done
}

// runOpts are what a test adds to the stack.
type runOpts struct {
	recorder Recorder
	signals  <-chan os.Signal
	// relayEnded, when set, is called once the relay's Run has returned.
	relayEnded func()
}

// startRun starts the agent of cfg and runs it until its end, which the
// test's cleanup waits for (bounded) after closing the client's input.
func startRun(t *testing.T, cfg Config, o runOpts) *run {
	t.Helper()
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{agent: a, clientW: inW, lines: make(chan string, 64), done: make(chan struct{})}
	eof := make(chan struct{})
	var eofOnce sync.Once
	pc := proxy.Config{ClientIn: inR, ClientOut: outW, Strict: true, OnClientEOF: func() { eofOnce.Do(func() { close(eof) }) }}
	ctx := context.WithoutCancel(t.Context()) // the run ends by its own rules, checked by the test
	a.WireRelay(ctx, &pc)
	pr := proxy.NewRelay(pc)
	var relay Relay = pr
	if o.relayEnded != nil {
		relay = relayFunc(func(ctx context.Context) error {
			defer o.relayEnded()
			return pr.Run(ctx)
		})
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() {
		defer close(r.done)
		r.end = a.Run(ctx, Stack{Relay: relay, Recorder: o.recorder, ClientEOF: eof, Signals: o.signals})
		// The relay has written its last; the reader sees the end.
		if err := outW.Close(); err != nil {
			t.Errorf("close the client's output: %v", err)
		}
	}()
	t.Cleanup(func() {
		if err := inW.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Errorf("close the client's input: %v", err)
		}
		await(t, r.done, "end of the run")
		await(t, readerDone, "end of the client's output")
		if err := outR.Close(); err != nil {
			t.Errorf("close the client's output: %v", err)
		}
	})
	return r
}

// awaitLine waits until a line holding want reaches the client.
func (r *run) awaitLine(t *testing.T, want string) string {
	t.Helper()
	for {
		l := await(t, r.lines, "line with "+want)
		if strings.Contains(l, want) {
			return l
		}
	}
}

// eof closes the client's input.
func (r *run) eof(t *testing.T) {
	t.Helper()
	if err := r.clientW.Close(); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the run's end.
func (r *run) wait(t *testing.T) End {
	t.Helper()
	await(t, r.done, "end of the run")
	return r.end
}

// relayFunc adapts a function to Relay.
type relayFunc func(ctx context.Context) error

func (f relayFunc) Run(ctx context.Context) error { return f(ctx) }

// treeWatch is a pipe that every process of an agent's tree holds as its
// stderr: its read end sees EOF once the whole tree has exited.
type treeWatch struct {
	r, w *os.File
	gone chan struct{}
}

func newTreeWatch(t *testing.T) *treeWatch {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tw := &treeWatch{r: r, w: w, gone: make(chan struct{})}
	go func() {
		defer close(tw.gone)
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Errorf("read the agent tree's stderr: %v", err)
		}
	}()
	t.Cleanup(func() {
		if err := w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Errorf("close the tree's stderr: %v", err)
		}
		await(t, tw.gone, "end of the tree's stderr")
		if err := r.Close(); err != nil {
			t.Errorf("close the tree's stderr: %v", err)
		}
	})
	return tw
}

// started lets go of the test's own copy of the write end, once the agent
// holds its own: from then on only the tree keeps it open.
func (tw *treeWatch) started(t *testing.T) {
	t.Helper()
	if err := tw.w.Close(); err != nil {
		t.Fatal(err)
	}
}

// awaitGone waits until every process of the tree has exited.
func (tw *treeWatch) awaitGone(t *testing.T) {
	t.Helper()
	await(t, tw.gone, "end of the agent's whole tree")
}

//go:build unix

package agenthost

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// TestGroupShutdown: a signal to the host stops every agent of its group,
// each run ends, and Wait returns, while every client keeps its input
// open.
func TestGroupShutdown(t *testing.T) {
	var g Group
	ctx := context.WithoutCancel(t.Context())
	type member struct {
		tree  *treeWatch
		ready chan struct{}
		ended <-chan struct{}
	}
	var members []member
	for range 2 {
		tree := newTreeWatch(t)
		a, err := Start(Config{Spec: proxy.AgentSpec{Argv: stubborn, Stderr: tree.w, Grace: grace}})
		if err != nil {
			t.Fatal(err)
		}
		tree.started(t)
		m := member{tree: tree, ready: make(chan struct{})}
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := inW.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				t.Errorf("close a client's input: %v", err)
			}
		})
		var once sync.Once
		pc := proxy.Config{ClientIn: inR, ClientOut: &readyWriter{ready: func() { once.Do(func() { close(m.ready) }) }}, Strict: true}
		a.WireRelay(ctx, &pc)
		m.ended = g.Go(ctx, a, Stack{Relay: proxy.NewRelay(pc)})
		members = append(members, m)
	}
	for _, m := range members {
		await(t, m.ready, "agent ready")
	}
	g.Shutdown(ctx, syscall.SIGTERM)
	for _, m := range members {
		await(t, m.ended, "end of an agent's run")
		m.tree.awaitGone(t)
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		g.Wait()
	}()
	await(t, waited, "the group's Wait")
}

// readyWriter is a client's output that calls ready at the first write: the
// stubborn agent writes one line, once its tree runs.
type readyWriter struct{ ready func() }

func (w *readyWriter) Write(b []byte) (int, error) {
	w.ready()
	return len(b), nil
}

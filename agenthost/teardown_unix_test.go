//go:build unix

package agenthost

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// stubborn ignores its stdin's end and SIGTERM, and so does its child (an
// ignored signal stays ignored across exec): only SIGKILL ends the tree.
// It says "ready" once the child runs.
var stubborn = sh(`trap "" TERM; sleep 1000 & printf '%s\n' '{"jsonrpc":"2.0","method":"ready"}'; wait`)

// grace keeps a shutdown's steps short; no test waits for it to pass.
const grace = proxy.DefaultGrace / 60

// orderLog notes the teardown's steps in the order they happen.
type orderLog struct {
	mu    sync.Mutex
	steps []string
}

func (o *orderLog) note(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps = append(o.steps, s)
}

func (o *orderLog) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.steps)
}

// recorderFunc adapts a function to Recorder.
type recorderFunc func(ctx context.Context) error

func (f recorderFunc) Close(ctx context.Context) error { return f(ctx) }

// TestClientEOFStopsTheTree: the client's EOF stops the agent's whole tree,
// though it ignores EOF and SIGTERM, and the run ends in order: the relay,
// then the recorder once the agent has exited, then the status, which says
// the sidecar stopped it (DESIGN.md "Processes").
func TestClientEOFStopsTheTree(t *testing.T) {
	tree := newTreeWatch(t)
	var order orderLog
	var a atomic.Pointer[Agent] // set once the run has started, before the EOF
	rec := recorderFunc(func(context.Context) error {
		select {
		case <-a.Load().current().Done():
			order.note("recorder")
		default:
			order.note("recorder before the agent's exit")
		}
		return nil
	})
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: stubborn, Stderr: tree.w, Grace: grace}}, runOpts{
		recorder: rec, relayEnded: func() { order.note("relay") },
	})
	a.Store(r.agent)
	tree.started(t)
	r.awaitLine(t, `"ready"`)
	r.eof(t)
	end := r.wait(t)
	if !end.ByUs {
		t.Errorf("end %+v, want one the sidecar stopped", end)
	}
	if got, want := order.all(), []string{"relay", "recorder"}; !slices.Equal(got, want) {
		t.Errorf("teardown %q, want %q", got, want)
	}
	tree.awaitGone(t)
}

// TestSignalStopsTheTree: a signal stops the agent's whole tree and ends
// the run while the client keeps its input open, as an editor that signals
// the sidecar does.
func TestSignalStopsTheTree(t *testing.T) {
	tree := newTreeWatch(t)
	sigs := make(chan os.Signal, 1)
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: stubborn, Stderr: tree.w, Grace: grace}}, runOpts{signals: sigs})
	tree.started(t)
	r.awaitLine(t, `"ready"`)
	sigs <- syscall.SIGTERM
	if end := r.wait(t); !end.ByUs {
		t.Errorf("end %+v, want one the sidecar stopped", end)
	}
	tree.awaitGone(t)
}

// TestExitWithoutRestart: without restarts, the agent's own exit ends the
// run, with its status, while the client is still there.
func TestExitWithoutRestart(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		want   int
	}{
		{"exit 3", "exit 3", 3},
		{"exit 0", "exit 0", 0},
		{"killed", "kill -KILL $$", 128 + 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: sh(tt.script)}}, runOpts{})
			if end, want := r.wait(t), (End{Code: tt.want}); end != want {
				t.Errorf("end %+v, want %+v", end, want)
			}
		})
	}
}

// TestStartFails: a command that cannot start is an error from Start, and
// restarts without a Life to tell are refused before anything starts.
func TestStartFails(t *testing.T) {
	if _, err := Start(Config{Spec: proxy.AgentSpec{Argv: []string{"/nonexistent/agent"}}}); err == nil {
		t.Error("Start of a missing command: no error")
	}
	if _, err := Start(Config{Spec: proxy.AgentSpec{Argv: sh("exit 0")}, Restart: true}); err == nil {
		t.Error("Start with restarts and no Life: no error")
	}
}

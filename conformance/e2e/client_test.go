//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// A frame is one JSON-RPC message read from the agent, kept raw and with the
// envelope decoded. Tests assert on frames as the agent wrote them, so this
// client is deliberately not the acp-go-sdk: it adds no defaults and drops
// no fields.
type frame struct {
	Raw    json.RawMessage `json:"-"`
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// An rpcError is a JSON-RPC error response, returned by agent.call.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s %s", e.Code, e.Message, e.Data)
}

// A transcriptLine is one line on the wire, in either direction.
type transcriptLine struct {
	Out  bool // true for client → agent
	Line string
}

// An agent is a real ACP agent process spoken to over its stdio by a minimal
// newline-delimited JSON-RPC client. It belongs to the test that started it:
// a t.Cleanup stops the process group and waits for the reader goroutine.
type agent struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // read end; the reader owns it until readDone
	stderr acpclient.Buffer

	exited   chan struct{} // closed when cmd.Wait returns
	waitErr  error         // set before exited is closed
	readDone chan struct{} // closed when readLoop returns

	wmu sync.Mutex // serializes writes to stdin

	mu         sync.Mutex // guards the fields below
	nextID     int
	pending    map[string]chan frame
	frames     []frame // every frame from the agent, in arrival order
	transcript []transcriptLine
	arrived    chan struct{} // closed, and replaced, when a frame arrives
}

// startAgent starts argv with env in its own process group, because
// claude-agent-acp spawns the claude CLI and does not exit on stdin EOF
// (agents.md, "Processes"): stopping it means signalling the whole group.
func startAgent(t testing.TB, argv, env []string, dir string) *agent {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Bounds Wait when a grandchild outside the group still holds stderr.
	cmd.WaitDelay = 5 * time.Second

	a := &agent{
		t:        t,
		cmd:      cmd,
		exited:   make(chan struct{}),
		readDone: make(chan struct{}),
		pending:  map[string]chan frame{},
		arrived:  make(chan struct{}),
	}
	cmd.Stderr = &a.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("agent stdin: %v", err)
	}
	// An os.Pipe rather than StdoutPipe: Wait closes StdoutPipe's reader as
	// soon as the process exits, which would race with readLoop.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("agent stdout: %v", err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		t.Fatalf("start agent %q: %v", argv, err)
	}
	pw.Close() // the child holds its own copy
	a.stdin, a.stdout = stdin, pr

	go func() {
		a.waitErr = cmd.Wait()
		close(a.exited)
	}()
	go a.readLoop()
	t.Cleanup(a.stop)
	return a
}

// readLoop reads frames until the agent's stdout closes, routes responses to
// their callers and refuses requests from the agent, which this client does
// not implement (fs, terminal, permission): an answer, even an error, keeps
// the agent from waiting forever.
func (a *agent) readLoop() {
	defer close(a.readDone)
	r := bufio.NewReader(a.stdout)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			a.handle(bytes.TrimSpace(line))
		}
		if err != nil {
			return // EOF: the process group is gone, or stop closed the pipe
		}
	}
}

func (a *agent) handle(line []byte) {
	f := frame{Raw: json.RawMessage(bytes.Clone(line))}
	if err := json.Unmarshal(line, &f); err != nil {
		f = frame{Raw: f.Raw} // not JSON: kept in the transcript for the failure report
	}
	a.mu.Lock()
	a.transcript = append(a.transcript, transcriptLine{Line: string(f.Raw)})
	a.frames = append(a.frames, f)
	close(a.arrived)
	a.arrived = make(chan struct{})
	var ch chan frame
	if f.Method == "" && f.ID != nil {
		ch = a.pending[string(f.ID)]
		delete(a.pending, string(f.ID))
	}
	a.mu.Unlock()

	switch {
	case ch != nil:
		ch <- f // buffered, and only this goroutine sends on it
	case f.Method != "" && f.ID != nil:
		a.t.Logf("agent request %s refused: this client implements no client methods", f.Method)
		_ = a.send(map[string]any{ // a write error means the agent is gone; stop reports that
			"jsonrpc": "2.0", "id": f.ID,
			"error": map[string]any{"code": -32601, "message": "method not found: " + f.Method},
		})
	}
}

// send writes one message as one line.
func (a *agent) send(msg any) error {
	line, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	a.mu.Lock()
	a.transcript = append(a.transcript, transcriptLine{Out: true, Line: string(line)})
	a.mu.Unlock()
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if _, err := a.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write to agent: %w", err)
	}
	return nil
}

// call sends a request and waits for its response, the agent's exit, or ctx.
// The response frame is returned too, so tests can record it verbatim.
func (a *agent) call(ctx context.Context, method string, params any) (frame, error) {
	wait, err := a.begin(method, params)
	if err != nil {
		return frame{}, err
	}
	return wait(ctx)
}

// begin sends a request, written before it returns, and returns the wait
// for its response, as call does: a test that must know the request is on
// its way before it goes on (say, a prompt sent while another turn runs)
// waits later.
func (a *agent) begin(method string, params any) (wait func(ctx context.Context) (frame, error), err error) {
	a.mu.Lock()
	a.nextID++
	id := strconv.Itoa(a.nextID)
	ch := make(chan frame, 1)
	a.pending[id] = ch
	a.mu.Unlock()
	forget := func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}
	if err := a.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params}); err != nil {
		forget()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return func(ctx context.Context) (frame, error) {
		defer forget()
		select {
		case f := <-ch:
			if f.Error != nil {
				return f, fmt.Errorf("%s: %w", method, f.Error)
			}
			return f, nil
		case <-a.readDone:
			return frame{}, fmt.Errorf("%s: agent closed stdout before answering", method)
		case <-ctx.Done():
			return frame{}, fmt.Errorf("%s: no answer: %w", method, context.Cause(ctx))
		}
	}, nil
}

// framesSince returns a copy of the frames received after the first n.
func (a *agent) framesSince(n int) []frame {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > len(a.frames) {
		n = len(a.frames)
	}
	return append([]frame(nil), a.frames[n:]...)
}

// waitFrame waits for the first frame after the first n that match accepts,
// and returns it. It fails when the agent closes its stdout first or ctx
// ends: the bound belongs to the caller.
func (a *agent) waitFrame(ctx context.Context, n int, match func(frame) bool) (frame, error) {
	for closed := false; ; {
		a.mu.Lock()
		for ; n < len(a.frames); n++ {
			if f := a.frames[n]; match(f) {
				a.mu.Unlock()
				return f, nil
			}
		}
		arrived := a.arrived
		a.mu.Unlock()
		if closed { // every frame there will ever be was looked at
			return frame{}, errors.New("the agent closed its stdout")
		}
		select {
		case <-arrived:
		case <-a.readDone:
			closed = true
		case <-ctx.Done():
			return frame{}, context.Cause(ctx)
		}
	}
}

// frameCount returns how many frames have been received so far.
func (a *agent) frameCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.frames)
}

// stop ends the agent as DESIGN.md's shutdown does: close stdin, give it a
// moment, then SIGTERM and finally SIGKILL the process group. It logs the
// transcript and stderr when the test failed or runs with -v.
func (a *agent) stop() {
	_ = a.stdin.Close() // an error means it is already closed by Wait
	pgid := a.cmd.Process.Pid
	steps := []struct {
		sig   syscall.Signal
		grace time.Duration
	}{{0, time.Second}, {syscall.SIGTERM, 5 * time.Second}, {syscall.SIGKILL, 10 * time.Second}}
	for _, s := range steps {
		if s.sig != 0 {
			_ = syscall.Kill(-pgid, s.sig) // ESRCH: the group is already gone
		}
		if waitOrTimeout(a.exited, s.grace) {
			break
		}
	}
	// Members of the group may outlive the leader; nothing of theirs is needed.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !waitOrTimeout(a.exited, 10*time.Second) {
		a.t.Errorf("agent pid %d did not exit after SIGKILL", pgid)
	}
	// A process that left the group could still hold stdout open; closing our
	// end unblocks the reader in that case.
	if !waitOrTimeout(a.readDone, 5*time.Second) {
		a.stdout.Close()
		<-a.readDone
	}
	a.stdout.Close()

	if a.t.Failed() || testing.Verbose() {
		a.mu.Lock()
		for _, l := range a.transcript {
			dir := "<-"
			if l.Out {
				dir = "->"
			}
			a.t.Logf("%s %s", dir, l.Line)
		}
		a.mu.Unlock()
		select {
		case <-a.exited: // waitErr is set
			var exitErr *exec.ExitError
			if a.waitErr != nil && !errors.As(a.waitErr, &exitErr) {
				a.t.Logf("agent wait: %v", a.waitErr)
			}
		default:
		}
		a.t.Logf("agent stderr:\n%s", a.stderr.String())
	}
}

func waitOrTimeout(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

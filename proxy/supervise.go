package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// AgentSpec says how to start an agent.
type AgentSpec struct {
	Argv []string
	Env  []string // nil inherits ours
	Dir  string   // "" is ours
	// Stderr receives the agent's stderr; nil discards it.
	Stderr io.Writer
	// Grace is how long the agent gets between each step of a shutdown.
	Grace time.Duration
	Log   *slog.Logger
	// Orphans, when set, makes a shutdown also stop every other descendant
	// of this process: the agent's orphans, re-parented to us after
	// AdoptOrphans. Set it only where this process runs nothing but the agent.
	Orphans bool
}

// DefaultGrace is how long an agent gets to exit on its own at shutdown.
const DefaultGrace = 3 * time.Second

// Process is a running agent. Its stdio are plain pipes the relay reads and
// writes; it stays in our process group (DESIGN.md, "Processes": editors such
// as agent-shell SIGKILL the group they started, and that must take the agent
// down with us). On Windows it is held in a job object instead, which takes
// its tree down when the sidecar goes (tree_windows.go).
type Process struct {
	Stdin  *os.File // the agent's stdin, for the relay to write
	Stdout *os.File // the agent's stdout, for the relay to read

	cmd   *exec.Cmd
	spec  AgentSpec
	log   *slog.Logger
	done  chan struct{}
	state *os.ProcessState
	wait  error
	tree  processTree // the OS's hold on the agent's descendants

	stopOnce sync.Once
	stopped  chan struct{}
	asked    bool // a shutdown was started by us
	mu       sync.Mutex
}

// StartAgent starts the agent. The returned process is waited for by a
// goroutine it owns; Done closes when the agent has exited.
func StartAgent(spec AgentSpec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("start agent: no command")
	}
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	log := spec.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start agent: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start agent: stdout pipe: %w", err)
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = spec.Stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("start agent %q: %w", spec.Argv[0], err)
	}
	// The child has its own copies; ours would keep the pipes open forever.
	inR.Close()
	outW.Close()
	p := &Process{
		Stdin: inW, Stdout: outR, cmd: cmd, spec: spec, log: log,
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
	// Before the wait: until it, the agent's pid cannot be reused.
	if err := p.tree.hold(cmd.Process.Pid); err != nil {
		log.Warn("agent's process tree not held; stopping it reaches the agent alone", "agentPid", cmd.Process.Pid, "err", err)
	}
	go p.waitExit()
	return p, nil
}

// waitExit reaps the agent. A grandchild that inherited the agent's stdout
// can hold it open after the agent is gone; once the agent has exited its
// output gets a short while to drain, then the read end is closed so the
// relay sees the end.
func (p *Process) waitExit() {
	err := p.cmd.Wait()
	p.state, p.wait = p.cmd.ProcessState, err
	close(p.done)
	select {
	case <-time.After(drainAfterExit):
		p.Stdout.Close()
	case <-p.stopped:
	}
}

const drainAfterExit = 500 * time.Millisecond

// Pid is the agent's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done closes when the agent has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the agent's exit status, 128+N for death by signal N, as a
// shell reports it. Valid after Done.
func (p *Process) ExitCode() int {
	<-p.done
	if p.state == nil {
		return 1
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.state.ExitCode()
}

// StoppedByUs reports whether the agent's exit followed a Shutdown.
func (p *Process) StoppedByUs() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}

// Shutdown stops the agent and everything it started, and returns when the
// agent has exited or ctx ends. With sig nil (the client closed our stdin) it
// closes the agent's stdin, waits the grace period, sends SIGTERM to the tree
// and, a grace period later, SIGKILL. With a signal (one we received) the tree
// gets that signal at once instead of the quiet first step. claude-agent-acp
// and codex-acp ignore EOF, and codex and gemini re-execute themselves as
// children, so the whole tree is signalled, found by parent pid. Windows has
// no SIGTERM: there the agent gets one grace period after its stdin closes,
// with or without sig, and then its job object is terminated (stopSteps).
func (p *Process) Shutdown(ctx context.Context, sig os.Signal) {
	p.mu.Lock()
	p.asked = true
	p.mu.Unlock()
	p.Stdin.Close()
	if sig != nil {
		p.signalTree(sig)
	}
	for _, s := range stopSteps(sig) {
		t := time.NewTimer(p.spec.Grace)
		select {
		case <-p.done:
			t.Stop()
			p.signalTree(syscall.SIGKILL) // orphans the agent left behind
			p.reapOrphans(ctx)
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		p.log.Info("agent still running; signalling its process tree", "signal", s.String(), "agentPid", p.Pid())
		p.signalTree(s)
	}
	select {
	case <-p.done:
		p.signalTree(syscall.SIGKILL)
		p.reapOrphans(ctx)
	case <-ctx.Done():
	}
}

// reapBound is how long a shutdown waits for killed orphans to be gone.
const reapBound = 2 * time.Second

// EndOrphans stops what the agent left running after it died on its own,
// and reaps it: the children of a crashed agent must not outlive it, nor
// linger as zombies while the sidecar carries on with a new agent.
func (p *Process) EndOrphans(ctx context.Context) {
	<-p.done
	p.signalTree(syscall.SIGKILL)
	p.reapOrphans(ctx)
}

// Kill ends the agent's tree at once.
func (p *Process) Kill() { p.signalTree(syscall.SIGKILL) }

// Close releases the pipes after the agent has exited, and the hold on its
// tree: on Windows that ends what the agent left running.
func (p *Process) Close() error {
	p.stopOnce.Do(func() { close(p.stopped) })
	<-p.done
	return errors.Join(p.Stdin.Close(), ignoreClosed(p.Stdout.Close()), p.tree.release())
}

func ignoreClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

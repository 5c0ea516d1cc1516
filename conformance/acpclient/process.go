package acpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// ErrKilled is returned by Close when the peer did not exit within
// Options.CloseTimeout after its stdin was closed and had to be killed.
var ErrKilled = errors.New("peer did not exit after stdin EOF; killed its process group")

// ErrEnded is returned by the wait helpers when the peer's stdout ended
// before the awaited condition held.
var ErrEnded = errors.New("peer output ended")

const defaultCloseTimeout = 10 * time.Second

// Options configure a Client or RawClient. The zero value is usable.
type Options struct {
	// Stderr receives the peer's stderr. Nil discards it.
	Stderr io.Writer
	// Env is added to the test process's environment for the peer.
	Env []string
	// Dir is the peer's working directory; empty means the current one.
	Dir string
	// CloseTimeout bounds how long Close waits for the peer to exit after
	// closing its stdin before it kills the peer's process group (and how
	// long it then waits for the peer's output to end). Zero means 10s.
	CloseTimeout time.Duration
	// Permission answers session/request_permission. It runs on an SDK
	// goroutine and must not block. Nil selects the first allow_once or
	// allow_always option, else the first option, else cancelled.
	Permission func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome
	// Files seeds the in-memory file system that fs/read_text_file reads
	// and fs/write_text_file writes, keyed by absolute path.
	Files map[string]string
}

func (o Options) closeTimeout() time.Duration {
	if o.CloseTimeout > 0 {
		return o.CloseTimeout
	}
	return defaultCloseTimeout
}

// process is a peer started as a real subprocess in its own process group
// (a job object on Windows), so Kill takes down whatever it started too, as
// an editor's group kill does (DESIGN.md "Processes"). Its waiter goroutine
// exits when the process does.
type process struct {
	cmd     *exec.Cmd
	group   peerGroup
	done    chan struct{}
	waitErr error // valid after done
}

// startProcess starts argv with real pipes. The pipes are os.Pipes of our
// own rather than StdoutPipe, because exec closes StdoutPipe in Wait, which
// may run while our reader still drains the last lines.
func startProcess(ctx context.Context, argv []string, opts Options) (*process, *os.File, *os.File, error) {
	if len(argv) == 0 {
		return nil, nil, nil, errors.New("start peer: empty argv")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start %s: stdin pipe: %w", argv[0], err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, fmt.Errorf("start %s: stdout pipe: %w", argv[0], err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, opts.Stderr
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Dir = opts.Dir
	cmd.SysProcAttr = sysProcAttr()
	p := &process{cmd: cmd, done: make(chan struct{})}
	cmd.Cancel = p.kill
	cmd.WaitDelay = opts.closeTimeout() // bounds the stderr copy after exit
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	if err := p.group.hold(cmd.Process.Pid); err != nil {
		// A peer that Kill could not take down whole is not one to test with.
		cmd.Process.Kill()
		cmd.Wait()
		inW.Close()
		outR.Close()
		return nil, nil, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go p.wait()
	return p, inW, outR, nil
}

func (p *process) wait() {
	p.waitErr = p.cmd.Wait()
	close(p.done)
}

func (p *process) kill() error { return p.group.kill(p.cmd.Process) }

// status is the exit code after done: -1 for a signal (killedExitCode for
// a kill on Windows), and an error only for a failure to wait that is not
// an exit status.
func (p *process) status() (int, error) {
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) {
		return p.cmd.ProcessState.ExitCode(), fmt.Errorf("wait for peer: %w", p.waitErr)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

func (p *process) waitCtx(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.status()
	case <-ctx.Done():
		return -1, fmt.Errorf("wait for peer exit: %w", context.Cause(ctx))
	}
}

// shutdown closes stdin and waits for the exit, killing the process group
// after timeout.
func (p *process) shutdown(stdin io.Closer, timeout time.Duration) (int, error) {
	stdin.Close()
	return p.exit(timeout)
}

// terminate closes stdin and tells the peer to terminate (terminateSignal),
// waits for its exit, killing the process group after timeout, and then
// kills what the peer left in its group.
func (p *process) terminate(stdin io.Closer, timeout time.Duration) (int, error) {
	stdin.Close()
	if err := p.terminateSignal(); err != nil {
		return p.exit(timeout) // it is gone or cannot be told: the wait says which
	}
	code, err := p.exit(timeout)
	if err == nil {
		if kerr := p.kill(); kerr != nil {
			return code, fmt.Errorf("kill what the peer left running: %w", kerr)
		}
	}
	return code, err
}

// exit waits for the peer's exit, killing its process group after timeout.
func (p *process) exit(timeout time.Duration) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.status()
	case <-timer.C:
	}
	if err := p.kill(); err != nil {
		return -1, err
	}
	<-p.done
	code, _ := p.status()
	return code, ErrKilled
}

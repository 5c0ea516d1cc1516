package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// The recovery workload (DESIGN.md "While the agent's side is being
// rebuilt, the client waits"): the agent is SIGKILLed between turns and a
// prompt is sent at once. The sidecar holds it, restarts the agent, replays
// initialize, rebuilds the session and sends the prompt there. Its time from
// the kill to the prompt's answer is set against the agent's own share of
// that path, measured in the same round: a fresh agent process started
// directly, initialize, session/new and the same prompt. The difference is
// what waiting costs.

// recoveryResult is one round of the recovery workload.
type recoveryResult struct {
	viaSidecar time.Duration // the kill to the answer of the prompt that waited
	agentAlone time.Duration // start, initialize, session/new and the prompt, direct
}

// recovery runs the sidecar's side of one round.
func (r *runner) recovery(ctx context.Context) (time.Duration, error) {
	p, err := r.session(ctx, 1, 229)
	if err != nil {
		return 0, err
	}
	if _, err := p.call(promptRequest, 3); err != nil {
		return 0, p.fail(err)
	}
	agent, err := onlyChild(p.cmd.Process.Pid)
	if err != nil {
		return 0, p.fail(err)
	}
	start := time.Now()
	if err := killPid(agent); err != nil {
		return 0, p.fail(fmt.Errorf("kill the agent %d: %w", agent, err))
	}
	// The prompt goes once the agent is reaped: a multi-threaded agent's
	// dying threads can still read a line written the moment after the
	// SIGKILL, and the sidecar rightly takes that one as received.
	if err := waitReaped(ctx, agent); err != nil {
		return 0, p.fail(err)
	}
	if _, err := p.call(promptRequest, 4); err != nil {
		return 0, p.fail(fmt.Errorf("the prompt sent right after the kill: %w", err))
	}
	elapsed := time.Since(start)
	return elapsed, p.finish()
}

// agentAlone runs the agent's own share of a recovery, with no relay.
func (r *runner) agentAlone(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	start := time.Now()
	cmd := exec.CommandContext(ctx, r.exe, "bench", "turns", "-n", "1", "-size", "229")
	cmd.WaitDelay = 5 * time.Second
	p := &relayProc{kind: byteCopyRelay, cmd: cmd, cancel: cancel, stderr: &acpclient.Buffer{Max: 4 << 10}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err == nil {
		var stdout io.ReadCloser
		if stdout, err = cmd.StdoutPipe(); err == nil {
			p.stdin, p.stdout = stdin, bufio.NewReaderSize(stdout, 1<<20)
			err = cmd.Start()
		}
	}
	if err != nil {
		cancel()
		return 0, fmt.Errorf("start the agent alone: %w", err)
	}
	for i, req := range []string{initRequest, newSessionRequest, promptRequest} {
		if _, err := p.call(req, i+1); err != nil {
			return 0, p.fail(err)
		}
	}
	elapsed := time.Since(start)
	return elapsed, p.finish()
}

// waitReaped waits until pid is gone from /proc.
func waitReaped(ctx context.Context, pid int) error {
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the killed agent %d was not reaped: %w", pid, ctx.Err())
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// onlyChild is the one child process of pid, from /proc. A child belongs
// to the thread that started it, so every thread's list is read.
func onlyChild(pid int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("the recovery workload needs /proc (pid %d): %v", pid, err)
	}
	var kids []string
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended meanwhile
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		return 0, errors.New("the sidecar has " + strconv.Itoa(len(kids)) + " child processes, want its one agent")
	}
	return strconv.Atoi(kids[0])
}

// recoveryRound runs both sides of one round, in the given order.
func (r *runner) recoveryRound(ctx context.Context, order []relayKind) (recoveryResult, error) {
	var res recoveryResult
	for _, k := range order {
		var err error
		if k == sidecarRelay {
			res.viaSidecar, err = r.recovery(ctx)
		} else {
			res.agentAlone, err = r.agentAlone(ctx)
		}
		if err != nil {
			return recoveryResult{}, fmt.Errorf("recovery (%s): %w", k, err)
		}
	}
	return res, nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// supervisor owns the agent process across restarts: it starts a new one
// when the agent dies while the editor is still there (within the restart
// policy), tells the recorder so it can keep the sessions, and stops the
// current one at shutdown.
type supervisor struct {
	log     *slog.Logger
	agent   *intercept.Agent // the agent's life, told of each exit and restart
	sup     *proxy.Supervisor
	restart bool

	stopCtx context.Context // ends at shutdown, so a restart in progress gives up
	stop    context.CancelFunc
	wg      sync.WaitGroup // the goroutines that initialize restarted agents

	mu       sync.Mutex
	cur      *proxy.Process
	stopping bool
	dead     bool // the restart budget ran out: the last exit was the agent's own
	lastCode int
}

func (s *supervisor) current() *proxy.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// onEnd is the relay's OnAgentEnd: the agent's output has ended, and the
// requests the client sends from now on wait for the next agent. At a
// shutdown the sidecar asked for, nothing waits: no agent follows.
func (s *supervisor) onEnd() {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if !stopping {
		s.agent.End()
	}
}

// onExit is the relay's OnAgentExit.
func (s *supervisor) onExit(ctx context.Context) (io.Writer, io.Reader, bool) {
	cur := s.current()
	<-cur.Done()
	code := cur.ExitCode()
	cur.EndOrphans(s.stopCtx)
	cur.Close()
	s.mu.Lock()
	s.lastCode = code
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return nil, nil, false
	}
	reason := fmt.Sprintf("exit status %d", code)
	s.log.Warn("agent exited while the editor is still there; restarting it", "status", code)
	s.agent.Gone(ctx, reason)
	p, err := s.sup.Restart(s.stopCtx)
	if err != nil {
		s.log.Error("agent not restarted", "err", err)
		s.agent.Dead(fmt.Sprintf("%s; %v", reason, err))
		s.mu.Lock()
		s.dead = true
		s.mu.Unlock()
		return nil, nil, false
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	s.log.Info("agent restarted", "agentPid", p.Pid())
	return p.Stdin, p.Stdout, true
}

// onStarted is the relay's OnAgentStarted: the restarted agent's stdin is
// in place, so the sidecar initializes it the way the client did. Started
// from onExit instead, the initialize could be written before the relay
// had swapped the new stdin in, fail with ErrAgentGone on the dead
// agent's, and the new agent would be stopped for nothing, again at each
// restart until the budget was used up.
func (s *supervisor) onStarted() {
	p := s.current()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.agent.Back(s.stopCtx); err != nil {
			s.log.Error("restarted agent did not initialize; stopping it", "err", err)
			p.Kill()
		}
	}()
}

// shutdown stops the current agent; no restart follows.
func (s *supervisor) shutdown(ctx context.Context, sig os.Signal) {
	s.mu.Lock()
	s.stopping = true
	cur := s.cur
	s.mu.Unlock()
	s.stop()
	cur.Shutdown(ctx, sig)
}

// wait lets the goroutines the supervisor started finish.
func (s *supervisor) wait() { s.wg.Wait() }

// finish waits for the last agent and returns its status, and whether the
// sidecar stopped it.
func (s *supervisor) finish() (int, bool) {
	cur := s.current()
	<-cur.Done()
	code := cur.ExitCode()
	cur.Close()
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return s.lastCode, false
	}
	return code, cur.StoppedByUs()
}

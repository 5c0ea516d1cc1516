package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RestartPolicy bounds how often an agent that keeps dying is started again.
type RestartPolicy struct {
	// Max restarts within Window; more is a crash loop, and the supervisor
	// gives up.
	Max    int
	Window time.Duration
	// Backoff is the wait before the second restart in a row (the first
	// is at once); it doubles with each further one, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultRestartPolicy is 5 restarts in 60 s: the first at once, then
// 100 ms apart, doubling.
var DefaultRestartPolicy = RestartPolicy{Max: 5, Window: time.Minute, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}

// ErrRestartBudget says the agent died more often than the policy allows.
var ErrRestartBudget = errors.New("the agent keeps exiting; restart budget used up")

// Supervisor starts an agent again when it dies, within a policy.
type Supervisor struct {
	Spec   AgentSpec
	Policy RestartPolicy
	now    func() time.Time
	starts []time.Time
	delay  time.Duration
}

// Restart waits out the backoff and starts the agent again, or says why not.
func (s *Supervisor) Restart(ctx context.Context) (*Process, error) {
	if s.now == nil {
		s.now = time.Now
	}
	now := s.now()
	recent := s.starts[:0]
	for _, t := range s.starts {
		if now.Sub(t) < s.Policy.Window {
			recent = append(recent, t)
		}
	}
	s.starts = recent
	if len(s.starts) >= s.Policy.Max {
		return nil, fmt.Errorf("%w (%d restarts in %s)", ErrRestartBudget, len(s.starts), s.Policy.Window)
	}
	switch {
	case len(s.starts) == 0:
		// One crash is not a loop: the agent comes back at once, and the
		// requests waiting for it (DESIGN.md "While the agent's side is
		// being rebuilt") wait only for its start.
		s.delay = 0
	case s.delay == 0:
		s.delay = s.Policy.Backoff
	default:
		s.delay = min(2*s.delay, s.Policy.MaxBackoff)
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	s.starts = append(s.starts, s.now())
	return StartAgent(s.Spec)
}

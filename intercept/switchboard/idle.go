package switchboard

import (
	"context"
	"time"
)

// Idle agents: stopped once no session has used them for a while.

// idleLoop stops agents that no session uses, once they have been unused
// for the idle time; they start again when something needs them.
func (sw *Switchboard) idleLoop(ctx context.Context) {
	if sw.cfg.Idle <= 0 {
		return
	}
	tick := time.NewTicker(min(max(sw.cfg.Idle/4, 10*time.Millisecond), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, sl := range sw.idle(time.Now()) {
			sw.stop(sl)
		}
	}
}

// idle lists the running agents with no session, no request in flight and
// no traffic for the idle time.
func (sw *Switchboard) idle(now time.Time) []*slot {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	// Under mu, as toAgent notes a request Sent under it: a request on its
	// way keeps its agent from the idle stop.
	used := sw.answers.owing()
	for _, a := range sw.bound {
		used[a] = true
	}
	for _, m := range sw.moves {
		used[m.to] = true // the agent a session leaves is still its bound one
	}
	var out []*slot
	for _, sl := range sw.slots {
		if sl.b != nil && !used[sl.name] && now.Sub(sl.used) >= sw.cfg.Idle {
			out = append(out, sl)
		}
	}
	return out
}

func (sw *Switchboard) stop(sl *slot) {
	sl.start.Lock()
	defer sl.start.Unlock()
	sw.mu.Lock()
	b := sl.b
	sl.b = nil // whatever needs the agent from now on waits for a fresh start
	sw.mu.Unlock()
	if b == nil {
		return
	}
	sw.log.Info("stopping an agent no session uses", "agent", sl.name, "idle", sw.cfg.Idle.String())
	b.Stop()
}

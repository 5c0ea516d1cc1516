package agenthost

import (
	"context"
	"os"
	"sync"
)

// A Group owns the runs of the agents one host keeps at once (the
// switchboard's agents, or a server's, which outlive any one connection):
// each agent's Run, on a goroutine of the group's, until it has ended. A
// signal to the host reaches every agent still running. The zero Group is
// ready to use.
type Group struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[*Agent]bool
}

// Go runs the agent with its stack (Agent.Run) on a goroutine the group
// owns. The returned channel closes once that run has returned: the agent
// is stopped, its recorder closed and its status read.
func (g *Group) Go(ctx context.Context, a *Agent, st Stack) <-chan struct{} {
	g.mu.Lock()
	if g.running == nil {
		g.running = map[*Agent]bool{}
	}
	g.running[a] = true
	g.mu.Unlock()
	ended := make(chan struct{})
	g.wg.Go(func() {
		defer close(ended)
		// The status is dropped: with several agents, one agent's end is
		// not the host's exit status, and whoever waits on ended learns
		// of the end (the switchboard answers the agent's sessions).
		_ = a.Run(ctx, st)
		g.mu.Lock()
		delete(g.running, a)
		g.mu.Unlock()
	})
	return ended
}

// Shutdown stops every agent still running at once, as Agent.Shutdown does
// each, and returns once all of them are down or ctx ends. Their runs end
// as their relays do.
func (g *Group) Shutdown(ctx context.Context, sig os.Signal) {
	g.mu.Lock()
	agents := make([]*Agent, 0, len(g.running))
	for a := range g.running {
		agents = append(agents, a)
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() { a.Shutdown(ctx, sig) })
	}
	wg.Wait()
}

// Wait returns once every run the group started has ended.
func (g *Group) Wait() { g.wg.Wait() }

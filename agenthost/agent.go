package agenthost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Life is what the Agent tells of the agent's deaths and restarts, so the
// client's side can follow (DESIGN.md "While the agent's side is being
// rebuilt, the client waits"). intercept.Agent is one. The Agent calls it
// only with Config.Restart set, and never after a shutdown it was asked
// for: a death then is the end, and no client waits for the next agent.
type Life interface {
	// End is called on the relay's goroutine the moment the agent's output
	// ends (proxy.Config.OnAgentEnd), while no client frame is being
	// decided: from then on a request waits for the next agent instead of
	// going to the dead one. It must not block.
	End()
	// Gone is called on the relay's goroutine once the dead agent has
	// exited and what it left running is stopped, before a restart is
	// tried. reason is its status ("exit status 3"). The relay's frames
	// for the agent wait while it runs; ctx is the relay's.
	Gone(ctx context.Context, reason string)
	// Back is called on a goroutine the Agent owns once a restarted agent
	// has taken the dead one's place in the relay, so the sidecar's own
	// calls reach it. An error kills the restarted agent's tree, and its
	// death takes the same way as any other (Gone, then a restart within
	// the policy). ctx ends when the agent is shut down.
	Back(ctx context.Context) error
	// Dead is called once, on the relay's goroutine, when no agent will
	// follow: the policy's budget is used up, or a start failed. reason
	// says the last death and why no restart followed.
	Dead(reason string)
}

// Config says which agent to run and whether its life goes on after it
// dies.
type Config struct {
	// Spec starts the agent, the first time and at each restart. Its Log
	// gets the Agent's diagnostics too; nil discards them.
	Spec proxy.AgentSpec
	// Restart, when set, starts the agent again when it dies while the
	// client is still there, within Policy, and tells Life of each death
	// and restart. Unset, the agent's exit ends the relay.
	Restart bool
	// Policy bounds the restarts; its zero value allows none.
	Policy proxy.RestartPolicy
	// Life is told of the agent's deaths and restarts. Restart needs one;
	// without Restart it is never called.
	Life Life
}

// An Agent is one agent kept alive across restarts: the process that runs
// now, the policy that starts the next one, and the way it is stopped for
// good. Its methods are safe to call from any goroutine.
type Agent struct {
	log     *slog.Logger
	life    Life
	sup     *proxy.Supervisor
	restart bool

	// stop is closed once the agent is to stop for good (Shutdown, or the
	// end of Run): a restart waiting out its backoff, the reaping of a dead
	// agent's orphans and the initialize of a restarted agent give up. It
	// is a channel, not a stored context: each of those waits takes its
	// ctx from its caller and ends at stop as well (untilStop).
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // the goroutines that initialize restarted agents

	mu       sync.Mutex
	cur      *proxy.Process
	stopping bool // a shutdown was asked for: no agent follows
	dead     bool // the restart budget ran out: the last exit was the agent's own
	lastCode int
}

// Start starts the agent. Its error, from proxy.StartAgent, already names
// the command and what failed.
func Start(cfg Config) (*Agent, error) {
	if cfg.Restart && cfg.Life == nil {
		return nil, errors.New("start agent: restarts need a Life to tell of them")
	}
	log := cfg.Spec.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := proxy.StartAgent(cfg.Spec)
	if err != nil {
		return nil, err
	}
	log.Info("agent started", "argv0", cfg.Spec.Argv[0], "agentPid", p.Pid())
	return &Agent{
		log: log, life: cfg.Life, restart: cfg.Restart,
		sup:  &proxy.Supervisor{Spec: cfg.Spec, Policy: cfg.Policy},
		stop: make(chan struct{}),
		cur:  p,
	}, nil
}

// WireRelay gives a relay's config the agent's pipes and, with restarts
// on, the hooks through which the relay reports the agent's end and takes
// the next agent's pipes. ctx's values go with the initialize of each
// restarted agent: the relay's OnAgentStarted brings no ctx of its own.
func (a *Agent) WireRelay(ctx context.Context, cfg *proxy.Config) {
	cur := a.current()
	cfg.AgentIn, cfg.AgentOut = cur.Stdin, cur.Stdout
	if !a.restart {
		return
	}
	cfg.OnAgentEnd = a.onEnd
	cfg.OnAgentExit = a.onExit
	cfg.OnAgentStarted = func() { a.onStarted(ctx) }
}

func (a *Agent) current() *proxy.Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// onEnd is the relay's OnAgentEnd: the agent's output has ended, and the
// requests the client sends from now on wait for the next agent. At a
// shutdown the sidecar asked for, nothing waits: no agent follows.
func (a *Agent) onEnd() {
	a.mu.Lock()
	stopping := a.stopping
	a.mu.Unlock()
	if !stopping {
		a.life.End()
	}
}

// onExit is the relay's OnAgentExit: it waits for the dead agent, stops
// what it left running, and starts the next one within the policy, unless
// the sidecar is shutting down.
func (a *Agent) onExit(ctx context.Context) (io.Writer, io.Reader, bool) {
	stopCtx, cancel := a.untilStop(ctx)
	defer cancel()
	cur := a.current()
	<-cur.Done()
	code := cur.ExitCode()
	// The children of a crashed agent must not outlive it, nor linger as
	// zombies while a new agent runs.
	cur.EndOrphans(stopCtx)
	a.release(cur)
	a.mu.Lock()
	a.lastCode = code
	stopping := a.stopping
	a.mu.Unlock()
	if stopping {
		return nil, nil, false
	}
	reason := fmt.Sprintf("exit status %d", code)
	a.log.Warn("agent exited while the editor is still there; restarting it", "status", code)
	a.life.Gone(ctx, reason)
	p, err := a.sup.Restart(stopCtx)
	if err != nil {
		a.log.Error("agent not restarted", "err", err)
		a.life.Dead(fmt.Sprintf("%s; %v", reason, err))
		a.mu.Lock()
		a.dead = true
		a.mu.Unlock()
		return nil, nil, false
	}
	a.mu.Lock()
	a.cur = p
	a.mu.Unlock()
	a.log.Info("agent restarted", "agentPid", p.Pid())
	return p.Stdin, p.Stdout, true
}

// onStarted is the relay's OnAgentStarted: the restarted agent's stdin is
// in place, so the Life initializes it the way the client did. Started
// from onExit instead, the initialize could be written before the relay
// had swapped the new stdin in, fail with ErrAgentGone on the dead
// agent's, and the new agent would be stopped for nothing, again at each
// restart until the budget was used up.
func (a *Agent) onStarted(ctx context.Context) {
	p := a.current()
	a.wg.Go(func() {
		ctx, cancel := a.untilStop(ctx)
		defer cancel()
		if err := a.life.Back(ctx); err != nil {
			a.log.Error("restarted agent did not initialize; stopping it", "err", err)
			p.Kill()
		}
	})
}

// untilStop is ctx's values with an end of its own: the agent's shutdown,
// not ctx's end. A restart or an initialize that a relay's call began
// belongs to the agent, not to that call. The returned cancel must be
// called; it returns once the goroutine that watches stop has exited.
func (a *Agent) untilStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-watched
	}
}

// endStop ends every wait that untilStop bounds; it may be called more than
// once.
func (a *Agent) endStop() { a.stopOnce.Do(func() { close(a.stop) }) }

// Shutdown stops the current agent and its whole tree (proxy.Process's
// Shutdown: with sig nil its stdin is closed first, with a signal the tree
// gets it at once), and returns once it has exited or ctx ends. No restart
// follows, and a restart in progress gives up.
func (a *Agent) Shutdown(ctx context.Context, sig os.Signal) {
	a.mu.Lock()
	a.stopping = true
	cur := a.cur
	a.mu.Unlock()
	a.endStop()
	cur.Shutdown(ctx, sig)
}

// wait lets the goroutines the Agent started finish.
func (a *Agent) wait() { a.wg.Wait() }

// End is how an agent's run ended.
type End struct {
	Code int  // the last agent's exit status, 128+N for death by signal N
	ByUs bool // the sidecar stopped it: its status is not the agent's verdict
}

// finish waits for the last agent and says how it ended. When the restart
// budget ran out, the status is that of the agent's own last exit, not of
// the shutdown that found it already gone.
func (a *Agent) finish() End {
	cur := a.current()
	<-cur.Done()
	code := cur.ExitCode()
	a.release(cur)
	a.endStop()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead {
		return End{Code: a.lastCode}
	}
	return End{Code: code, ByUs: cur.StoppedByUs()}
}

// release lets go of an exited agent's pipes and its hold on the tree. Its
// error is logged, not returned: the agent is gone and nothing reads or
// writes its pipes any more, so there is nothing to undo, and the usual
// error is a stdin the shutdown has already closed.
func (a *Agent) release(p *proxy.Process) {
	if err := p.Close(); err != nil {
		a.log.Debug("release the exited agent's pipes and process tree", "agentPid", p.Pid(), "err", err)
	}
}

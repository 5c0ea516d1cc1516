package switchboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// How frames go (proxy.ClientPort draws the same):
//
//	client ─► port ─► clientFrame ─► agent a's relay (Feed) ─► chain ─► agent a
//	                              └► agent b's relay (Feed) ─► chain ─► agent b
//	client ◄─ port ◄─ a's slot.Egress ◄─ chain ◄─ agent a
//	               ◄─ b's slot.Egress ◄─ chain ◄─ agent b
//
// A client frame is read and scanned once, by the port, and handed to its
// agent's relay as it is (client.go). What an agent's relay writes to the
// client goes straight to the port through that agent's Egress, which does
// the switchboard's part (agent.go): request ids of its own for the agents
// but the default one (asks.go), the selector in config option lists and
// /agent in command lists (selector.go), what the switchboard learns from
// responses, and no late frames of a session that moved away. A move
// (move.go) takes a session from one agent to another; what every agent
// supports is promised to the client (promises.go); an agent no session
// uses is stopped (idle.go); and every client request gets one answer
// (answers.go).

// SelectorID is the config option the sidecar adds to every configOptions
// list when several agents are configured: the agent the session runs on.
// Custom categories start with an underscore, as the protocol requires.
const SelectorID = "_sidecar_agent"

const selectorCategory = "_agent"

// Relay is what the switchboard needs of an agent's relay: a
// *proxy.Relay whose client side is the switchboard's port.
type Relay interface {
	// Feed hands the relay one client frame.
	Feed(ctx context.Context, f *proxy.Frame) error
	// CallAsClient sends a request of the switchboard's own through the
	// relay's chain, as the client's, and waits for its result.
	CallAsClient(ctx context.Context, method string, params, result any) error
}

var _ Relay = (*proxy.Relay)(nil)

// Backend is one running agent behind the switchboard.
type Backend struct {
	Rec   Recorder
	Relay Relay
	// Done is closed once the agent's relay has ended and its recorder
	// has finished.
	Done <-chan struct{}
	// Stop shuts the agent down, as the client's EOF does, and returns
	// once Done is closed.
	Stop func()
}

// AgentRef names one configured agent.
type AgentRef struct {
	Name    string
	Command []string
}

// Config wires a Switchboard.
type Config struct {
	// Agents in the order the selector lists them.
	Agents  []AgentRef
	Default string
	// Port is the client's side, which every agent's relay shares.
	Port *proxy.ClientPort
	// Start starts an agent with its relay and recorder. The relay's client
	// side is Port, and out is its Egress: what the relay writes to the
	// client goes through it. The switchboard initializes the agent
	// (except the default agent's first start, which the client
	// initializes).
	Start func(ctx context.Context, name string, out proxy.Egress) (*Backend, error)
	Store state.Store
	// Idle stops an agent no session uses after this long; 0 never does.
	Idle time.Duration
	// CallTimeout bounds the switchboard's own requests (an initialize);
	// 0 means intercept.DefaultCallTimeout.
	CallTimeout time.Duration
	Log         *slog.Logger
	// Strict makes an answer of the switchboard's own to a request an
	// agent owes the answer to a panic instead of a logged error, for
	// tests (proxy.Config.Strict).
	Strict bool
}

// Switchboard puts several agents behind one client.
type Switchboard struct {
	cfg Config
	log *slog.Logger
	ctx context.Context
	wg  sync.WaitGroup // the backends' watchers, the moves in progress, the store writes

	// route keeps the client's frames in order while a move finishes:
	// deciding where a frame goes and handing it over happen under it.
	route sync.Mutex

	// bound is the agent each client session runs on. It is never changed
	// in place: setBound replaces it, under mu, so an agent's frames read
	// it without the lock (boundNow).
	boundNow atomic.Pointer[map[string]string]

	mu         sync.Mutex
	slots      map[string]*slot
	bound      map[string]string       // client session id -> agent name; see boundNow
	moves      map[string]*pendingMove // sessions being moved
	initParams json.RawMessage
	closed     bool

	answers *answers // one answer to each client request
	asks    *asks    // the agents' requests to the client, under ids of the switchboard's
	sel     selector // the agent selector and /agent
}

// pendingMove is a session on its way to another agent.
type pendingMove struct {
	to     string
	queued [][]byte // the client's frames for the session, which wait for it
}

type pendingReq struct {
	agent, method, sid string
}

// New builds a switchboard; Run starts it.
func New(cfg Config) *Switchboard {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = intercept.DefaultCallTimeout
	}
	sw := &Switchboard{
		cfg: cfg, log: cfg.Log, ctx: context.Background(), slots: map[string]*slot{}, bound: map[string]string{},
		moves:   map[string]*pendingMove{},
		answers: &answers{led: ledger.New(nil), port: cfg.Port, strict: cfg.Strict, log: cfg.Log},
		asks:    &asks{byID: map[string]agentAsk{}},
		sel:     selector{agents: cfg.Agents},
	}
	sw.boundNow.Store(&sw.bound)
	for _, a := range cfg.Agents {
		sw.slots[a.Name] = &slot{sw: sw, name: a.Name, command: a.Command}
	}
	return sw
}

// Run starts the default agent and relays until the client's input ends;
// then every agent is stopped and Run returns once they have ended.
func (sw *Switchboard) Run(ctx context.Context) error {
	sw.ctx = ctx
	if _, err := sw.ensure(ctx, sw.cfg.Default); err != nil {
		return fmt.Errorf("start %s: %w", sw.cfg.Default, err)
	}
	idleDone := make(chan struct{})
	idleCtx, stopIdle := context.WithCancel(ctx)
	go func() {
		defer close(idleDone)
		sw.idleLoop(idleCtx)
	}()
	err := sw.cfg.Port.Run(ctx, sw.clientFrame)
	if err != nil {
		err = fmt.Errorf("read the client: %w", err)
	}
	stopIdle()
	<-idleDone
	sw.mu.Lock()
	sw.closed = true // no agent starts from here on
	sw.mu.Unlock()
	for _, a := range sw.cfg.Agents {
		sl := sw.slots[a.Name]
		sl.start.Lock() // a start under way (a move's) ends first
		sw.mu.Lock()
		b := sl.b
		sw.mu.Unlock()
		if b != nil {
			b.Stop() // the client's EOF, as each relay expects it
		}
		sl.start.Unlock()
	}
	sw.wg.Wait()
	return errors.Join(err, sw.cfg.Port.Flush())
}

// setBound binds a client session to an agent. Called with sw.mu held.
func (sw *Switchboard) setBound(sid, agent string) {
	next := make(map[string]string, len(sw.bound)+1)
	for k, v := range sw.bound {
		next[k] = v
	}
	next[sid] = agent
	sw.bound = next
	sw.boundNow.Store(&next)
	for _, sl := range sw.slots {
		n := 0
		for _, a := range next {
			if a != sl.name {
				n++
			}
		}
		sl.elsewhere.Store(int32(n))
	}
}

func (sw *Switchboard) bind(sid, agent string) {
	if sid == "" {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.setBound(sid, agent)
}

// ensure returns the agent's running backend, starting and initializing
// it first when it is not running.
func (sw *Switchboard) ensure(ctx context.Context, name string) (*Backend, error) {
	sw.mu.Lock()
	sl := sw.slots[name]
	if sl == nil {
		sw.mu.Unlock()
		return nil, fmt.Errorf("no agent named %q", name)
	}
	if b := sl.b; b != nil {
		sw.mu.Unlock()
		return b, nil
	}
	sw.mu.Unlock()
	sl.start.Lock()
	defer sl.start.Unlock()
	sw.mu.Lock()
	if b := sl.b; b != nil || sw.closed {
		sw.mu.Unlock()
		if b == nil {
			return nil, errors.New("the sidecar is stopping")
		}
		return b, nil
	}
	initParams := sw.initParams
	sw.mu.Unlock()
	b, err := sw.cfg.Start(ctx, name, sl)
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", name, err)
	}
	sw.mu.Lock()
	sl.b, sl.used = b, time.Now()
	var sessions []string
	for sid, a := range sw.bound {
		if a == name {
			sessions = append(sessions, sid)
		}
	}
	sw.mu.Unlock()
	sw.wg.Go(func() { sw.watch(sl, b) })
	sw.log.Info("agent started", "agent", name)
	if initParams != nil {
		// The client initialized the agents before; this one gets the
		// same initialize, through its chain, so its recorder keeps it
		// for its restarts.
		var res json.RawMessage
		callCtx, cancel := context.WithTimeout(ctx, sw.cfg.CallTimeout)
		err := b.Relay.CallAsClient(callCtx, wire.Initialize, initParams, &res)
		cancel()
		if err != nil {
			b.Stop()
			return nil, fmt.Errorf("initialize agent %s: %w", name, err)
		}
		sw.learned(ctx, sl, res)
	}
	sw.mu.Lock()
	sl.used = time.Now() // the idle clock starts once the agent is ready
	sw.mu.Unlock()
	slices.Sort(sessions)
	for _, sid := range sessions {
		if err := b.Rec.Revive(ctx, sid); err != nil {
			sw.log.Warn("session not revived on the restarted agent", "agent", name, "session", sid, "err", err)
		}
	}
	return b, nil
}

// watch notes when a backend has ended, so whatever needs the agent next
// starts it again.
func (sw *Switchboard) watch(sl *slot, b *Backend) {
	<-b.Done
	sw.mu.Lock()
	if sl.b == b {
		sl.b = nil
	}
	sw.mu.Unlock()
	sw.log.Info("agent's relay ended", "agent", sl.name)
}

// learned keeps an agent's initialize result, in memory and in the store,
// so a later run can promise the client what every agent supports without
// starting them all.
func (sw *Switchboard) learned(ctx context.Context, sl *slot, res json.RawMessage) {
	res = bytes.Clone(res) // it may point into a reader's buffer
	sw.mu.Lock()
	sl.init = res
	sw.mu.Unlock()
	// Off the path of the frame that brought it: nothing waits for the cache.
	info := &state.AgentInfo{Name: sl.name, Command: sl.command, Init: res, Learned: time.Now()}
	sw.wg.Go(func() {
		if err := sw.cfg.Store.PutAgent(ctx, info); err != nil {
			sw.log.Warn("agent capabilities not cached", "agent", sl.name, "err", err)
		}
	})
}

package intercept

import (
	"context"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Sidecar is what the sidecar needs of the relay to act on its own.
type Sidecar = rebuild.Sidecar

// Config wires a Core.
type Config struct {
	Store state.Store
	Log   *slog.Logger
	// Agent is the agent's command line, kept with each session.
	Agent []string
	// Name is the agent's configured name when several agents share the
	// client ("" with one): each session and turn records the agent that
	// ran it.
	Name string
	// Version is the sidecar's, advertised in initialize.
	Version string
	// Host names this host in the native sessions the record keeps
	// (state.Native.Host): a reopen on another host is a failover.
	Host string
	// Settings are applied to every new session before the client sees it.
	Settings []record.Setting
	// Queue bounds the events waiting for the record; a full queue slows
	// the relay rather than lose a frame (DESIGN.md "Speed").
	Queue int
	// Durable bounds how long a completing response waits for its write.
	Durable time.Duration
	// HandoffBudget bounds the kept-turn handoff in bytes (0: the default).
	HandoffBudget int
	// CallTimeout bounds each of the sidecar's own calls.
	CallTimeout time.Duration
	// HoldTimeout bounds how long a client request waits for a restarting
	// agent or a rebuild (0: DefaultHoldTimeout).
	HoldTimeout time.Duration
	// Takeover: a client's load or resume takes the session's lease in a
	// fleet's store even from a live holder, which is fenced (--takeover).
	Takeover bool
	// NoPickers turns off the bridge between the legacy pickers and
	// configOptions (--pickers=off).
	NoPickers bool
	// MaxProtocol is the highest ACP version the client and the agent may
	// agree on (--max-protocol; 0: SpokenVersion).
	MaxProtocol int
	Now         func() time.Time
}

// DefaultCallTimeout bounds each of the sidecar's own calls. Real agents
// take up to seconds for a session/new on a loaded machine (claude-agent-acp
// took 13 s at a load of 16 on two cores), and a restore that gives up too
// soon blocks the session for nothing.
const DefaultCallTimeout = 30 * time.Second

// Core is the sidecar's part for one agent, built once: the owners (the
// ledger, the agent's life, the record), the rebuilds and session
// operations over them. cmd builds the chain's stages from the owners, in
// order (buildChain).
type Core struct {
	cfg   Config
	log   *slog.Logger
	led   *ledger.Ledger
	life  *life.Life
	rec   *record.Recorder
	watch *rebuild.Watch     // waits on life, woken by the ledger and the life
	gate  *ChunkGate         // shared by the stages gated for chunks
	agent *Agent             // the agent's life as the supervisor tells it
	rb    *rebuild.Rebuilder // carries out the rebuilds (Run)
	ops   *Sessions          // what the sidecar does to sessions
	opens *reopens           // the loads, resumes and lists the record answers
	fleet *leases            // a fleet's leases (none for a store of one host)
	quit  chan struct{}      // closed when Close begins: nobody waits any longer
}

// New builds the core for one agent. Start runs its record; Bind gives it
// the relay.
func New(cfg Config) *Core {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = rebuild.DefaultHoldTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ready := life.NewSignal()
	c := &Core{cfg: cfg, log: cfg.Log, led: ledger.New(ready.Fire), life: life.New(ready)}
	c.quit = make(chan struct{})
	c.rec = record.New(record.Config{
		Store: cfg.Store, Log: cfg.Log, Agent: cfg.Agent, Name: cfg.Name, Settings: cfg.Settings,
		Queue: cfg.Queue, Durable: cfg.Durable, HandoffBudget: cfg.HandoffBudget, Host: cfg.Host, Now: cfg.Now,
	}, c.led, c.life)
	c.watch = &rebuild.Watch{Life: c.life, Ready: ready, Quit: c.quit, Timeout: cfg.HoldTimeout}
	c.gate = &ChunkGate{led: c.led}
	c.rb = rebuild.New(rebuild.Config{
		Store: cfg.Store, Agent: cfg.Agent, Name: cfg.Name, Settings: cfg.Settings, HandoffBudget: cfg.HandoffBudget, Host: cfg.Host,
		CallTimeout: cfg.CallTimeout, NoPickers: cfg.NoPickers, Now: cfg.Now, Log: cfg.Log,
		Commands: func(native, client string) [][]byte { return ownCommands(c.led, c.life, native, client) },
	}, c.rec, c.led, c.life, c.watch)
	c.fleet = &leases{leaser: state.LeaseOf(cfg.Store), takeover: cfg.Takeover, rec: c.rec, led: c.led, log: cfg.Log}
	recs := &records{store: cfg.Store, rec: c.rec, led: c.led, rb: c.rb}
	c.ops = &Sessions{rec: c.rec, rb: c.rb, led: c.led, log: cfg.Log, cfg: &c.cfg, leases: c.fleet, records: recs}
	c.opens = &reopens{rec: c.rec, rb: c.rb, led: c.led, life: c.life, store: cfg.Store, leases: c.fleet, records: recs, log: cfg.Log}
	c.agent = &Agent{life: c.life, led: c.led, turns: c.rec, log: cfg.Log, callTimeout: cfg.CallTimeout}
	// What follows a response the record held is a plan the rebuilds run
	// under it (rebuild.FollowUps); what follows the agent's close or
	// delete of a session, the session operations'.
	c.rec.Follow(c.rb.FollowUps(), c.ops)
	return c
}

// The owners, for cmd to build the chain's stages from (each stage's
// constructor takes only what it uses of them).

// Ledger is what is in flight, for the stages that gate, map and track it.
func (c *Core) Ledger() *ledger.Ledger { return c.led }

// Life is the agent's life: its phase, generation and capabilities.
func (c *Core) Life() *life.Life { return c.life }

// Natives is the record's index of native sessions, for the id mapping of
// an agent's session list.
func (c *Core) Natives() NativeIndex { return c.cfg.Store }

// Watch is how a held request waits on the agent's life.
func (c *Core) Watch() *rebuild.Watch { return c.watch }

// ChunkGate is shared by the stages that see chunks only while gated.
func (c *Core) ChunkGate() *ChunkGate { return c.gate }

// Recorder is the record.
func (c *Core) Recorder() *record.Recorder { return c.rec }

// Version is the sidecar's, advertised in initialize.
func (c *Core) Version() string { return c.cfg.Version }

// MaxProtocol is the highest ACP version offered to the agent.
func (c *Core) MaxProtocol() wire.Version {
	if c.cfg.MaxProtocol <= 0 {
		return SpokenVersion
	}
	return wire.Version(c.cfg.MaxProtocol)
}

// Pickers says whether the picker bridge is on (not --pickers=off).
func (c *Core) Pickers() bool { return !c.cfg.NoPickers }

// Bind gives the core the relay it acts through. Call it before frames flow.
func (c *Core) Bind(sc Sidecar) {
	c.agent.sc, c.opens.sc = sc, sc
	c.rb.Bind(sc)
}

// Agent is the agent's life, which the supervisor moves.
func (c *Core) Agent() *Agent { return c.agent }

// Sessions is what the sidecar does to sessions, for the commands and the
// switchboard.
func (c *Core) Sessions() *Sessions { return c.ops }

// LifelineOps is what the lifeline asks of the sessions' owners.
func (c *Core) LifelineOps() LifelineOps { return lifelineOps{c.ops, c.fleet} }

// EmulationOps is what the emulation asks of the sessions' owners.
func (c *Core) EmulationOps() EmulationOps { return emulationOps{c.opens, c.ops} }

// The stages' operations, each from the owner that does it.
type (
	lifelineOps struct {
		*Sessions // Recover, TakeBack, Again
		*leases   // Lost, Fleet, Confirm
	}
	emulationOps struct {
		*reopens  // Reopen, List
		*Sessions // CloseHere, DeleteHere, ForkHere
	}
)

// Start runs the record's goroutine until Close. The rebuilds' own work
// outlives the request that started it: it has ctx's values, not its end.
func (c *Core) Start(ctx context.Context) {
	c.rb.Start(ctx)
	c.rec.Start(ctx)
}

// Close stops the waits for the agent and the rebuilds, lets the record
// finish what is queued, and waits for it and for the sidecar's own calls
// it started.
func (c *Core) Close(ctx context.Context) error {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	return c.rec.Close(ctx)
}

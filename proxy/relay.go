package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is the way a frame travels.
type Direction uint8

const (
	// ClientToAgent frames come from the editor and go to the agent.
	ClientToAgent Direction = iota
	// AgentToClient frames come from the agent and go to the editor.
	AgentToClient
)

func (d Direction) String() string {
	if d == ClientToAgent {
		return "client->agent"
	}
	return "agent->client"
}

// Reverse is the way an answer to a frame travels.
func (d Direction) Reverse() Direction { return 1 - d }

// Frame is one valid JSON frame in flight.
type Frame struct {
	Dir Direction
	// Raw is the frame as read, without its '\n'. It belongs to the relay and
	// is valid only during the Hook call: copy what you keep, and never modify it.
	Raw []byte
	Env Envelope
}

// Action is what the relay does with a frame.
type Action uint8

const (
	// Pass forwards the frame's bytes unchanged. It is the zero value.
	Pass Action = iota
	// Rewrite forwards Verdict.Line in place of the frame.
	Rewrite
	// Answer forwards nothing and sends Verdict.Line back to the frame's sender.
	Answer
	// Drop forwards nothing.
	Drop
	// Hold keeps the frame's place in its stream and decides the frame
	// later: the relay runs Verdict.Later on a goroutine of its own, and
	// what Later forwards fills the place, so what the same peer sent after
	// the frame waits behind it. Later's answers go back to the sender.
	Hold
	// Defer is Hold without the place: nothing waits for Later, and what
	// it forwards goes after whatever came meanwhile. For a request the
	// sidecar answers itself after slow work (a slash command).
	Defer
)

// Verdict is a Hook's decision about one frame.
type Verdict struct {
	Do   Action
	Line []byte // for Rewrite and Answer: one frame without '\n'
	// Later decides a Hold or Defer. It runs once, off the relay's
	// goroutines, with the frame's bytes copied into it by the hook (the
	// frame itself is gone by then), and with a context that ends when the
	// relay stops. The relay waits for it before Run returns.
	Later func(ctx context.Context) Decision
}

// Decision is how a held or deferred frame ends. For a client request,
// exactly one of Forward (the request, or its rewrite, on its way to the
// agent) and Answer (a response to it) must carry its id once. The hook's
// owner holds it to that; the relay notes a decision that does not
// (answerOnce), and under Config.Strict panics.
type Decision struct {
	Forward [][]byte // to the frame's destination, in order
	Answer  [][]byte // back to the frame's sender, in order
	// Placed, if set, runs once Forward and Answer have their places in
	// their outputs: whatever is written after it, in either direction,
	// comes after them. An owner that lets other frames go on when its
	// operation ends (a request that waited for a slash command) lets them
	// go here, not when Later returns, so the operation's answer is never
	// overtaken by theirs.
	Placed func()
}

// A Hook decides what happens to each valid frame.
type Hook interface {
	// Frame is called once per valid frame, in arrival order, on the goroutine
	// of the frame's direction (for client frames handed in with Feed, the
	// caller's, one frame at a time), before anything of it is written. It
	// must not block: the relay waits for it, so slow work (decoding,
	// storage) takes a copy to a goroutine the hook owns. Frames sent by the
	// sidecar itself and responses to the sidecar's own calls never reach it
	// (CallAsClient's do: they travel as the client's). f is reused for the
	// next frame: keep neither it nor f.Raw after the call.
	Frame(ctx context.Context, f *Frame) Verdict
}

// An UnsentHook is a Hook that also learns of each client request the agent
// never received: its write to the agent failed, because the agent had died.
// Unsent is called on the client's goroutine right after the failed write,
// with the request as the client sent it (before any rewrite), so the hook
// can keep it for the agent's successor; f is valid only during the call. A
// Hook without it loses such a request, whose sender then waits for the
// error its hook gives every request the dead agent had.
type UnsentHook interface {
	Hook
	Unsent(ctx context.Context, f *Frame) Verdict
}

// An AgainHook is a Hook that also decides again a client request the
// agent answered with an error that says it never ran it, after the hook
// dropped that answer (Relay.Again). Again is called on the goroutine of
// the caller of Relay.Again with the request as the client sent it; f is
// valid only during the call. Its verdict is Hold or Defer; anything else
// leaves the request unanswered, which the caller must then answer.
type AgainHook interface {
	Hook
	Again(ctx context.Context, f *Frame) Verdict
}

// A StopHook is a Hook that also answers, when the relay stops, the client
// requests it let through and the agent never answered: the agent is gone
// for good, or the sidecar is shutting down, and the client must not wait
// for ever. Stopped returns one error response per such request, which
// the relay writes to the client before its last flush; why says why the
// relay stopped. It is called once, after every held frame was decided.
type StopHook interface {
	Hook
	Stopped(why string) [][]byte
}

// An Egress has the last word on each frame a relay writes to its client:
// the agent's frames after the Hook, the answers the Hook gives, held frames
// as they are released, and the sidecar's own. It is for an owner that puts
// several relays behind one client (ClientPort) and must make each one's
// frames fit the client's single view: give requests ids of their own,
// drop what the client must not see.
type Egress interface {
	// Egress is called once per frame, on the goroutine writing it (the
	// agent's, a held frame's, a caller of Send), right before the frame
	// takes its place in the relay's stream to the client; frames of one
	// goroutine come in their order. It returns the bytes to write: f.Raw
	// for the frame unchanged, other bytes (one frame without '\n') for a
	// rewrite, nil for nothing. It must not keep f or f.Raw after the call,
	// and it should not block: the agent's frames wait for it.
	Egress(ctx context.Context, f *Frame) []byte
}

// EgressFunc adapts a function to Egress.
type EgressFunc func(ctx context.Context, f *Frame) []byte

// Egress calls e.
func (e EgressFunc) Egress(ctx context.Context, f *Frame) []byte { return e(ctx, f) }

var _ Egress = EgressFunc(nil)

// HookFunc adapts a function to Hook.
type HookFunc func(ctx context.Context, f *Frame) Verdict

// Frame calls h.
func (h HookFunc) Frame(ctx context.Context, f *Frame) Verdict { return h(ctx, f) }

var _ Hook = HookFunc(nil)

// Config wires a Relay. Only the four streams are required, or Client and
// the agent's two.
type Config struct {
	ClientIn  io.Reader // the editor's frames (our stdin)
	ClientOut io.Writer // to the editor (our stdout): nothing but ACP is ever written here
	AgentIn   io.Writer // the agent's stdin
	AgentOut  io.Reader // the agent's stdout

	// Client, when set, is the client's side that this relay shares with
	// others, and ClientIn and ClientOut are not used: the owner reads the
	// client's frames (ClientPort.Run) and hands this relay its own with
	// Feed, and the relay writes to the client through the port, in an
	// order of its own.
	Client *ClientPort
	// Egress sees every frame the relay writes to the client; nil writes
	// them as they are.
	Egress Egress

	// MaxFrame limits one line; 0 means DefaultMaxFrame.
	MaxFrame int
	// LongFrames, when set, is told each change in the bytes the relay may
	// keep live for frames longer than a read buffer: it grows with the
	// longest such frame of each direction, and falls when an agent's or
	// the client's reader ends. A process with a soft memory limit raises
	// the limit by it. Both of the relay's goroutines call it, at any time.
	LongFrames func(delta int64)
	// Hook sees every valid frame; nil passes everything.
	Hook Hook
	// Trace, if set, records every frame, including malformed ones and the
	// sidecar's own. Its errors are logged once and tracing stops.
	Trace *Trace
	// Log receives the relay's diagnostics; nil discards them.
	Log *slog.Logger
	// OnClientEOF runs once when the editor closes our stdin (with Client:
	// when the owner calls CloseClient), after the agent's stdin has been
	// closed. The owner starts the agent's shutdown there. Nil does nothing.
	OnClientEOF func()
	// Strict makes a hook's broken promise of one answer per request (a
	// second answer, or none) a panic instead of a logged error, for
	// tests, as x/tools' MustReplyHandler does: a test must not pass on a
	// bug the relay would only have logged.
	Strict bool
	// OnAgentEnd runs on the relay's goroutine when the agent's output
	// ends while the client is still there, before OnAgentExit, at a
	// moment when no client frame is being decided and the requests the
	// dead agent never read have gone back to the hook (UnsentHook). A
	// frame decided after it returns is decided by a hook that knows the
	// agent is gone, so the owner tells the hook there, not in
	// OnAgentExit: a request decided between the two would be taken for
	// sent to the dead agent and fail, although it never reached it. It
	// must not block. Nil does nothing.
	OnAgentEnd func()
	// OnAgentExit runs when the agent's output ends while the client is
	// still there. It may start a new agent and return its stdin and
	// stdout; the relay then carries on with it, and frames for the agent
	// written meanwhile wait in order. ok false ends the relay. Nil ends it.
	OnAgentExit func(ctx context.Context) (in io.Writer, out io.Reader, ok bool)
	// OnAgentStarted runs on the relay's goroutine once the agent that
	// OnAgentExit started has taken the dead one's place: from then on
	// the sidecar's own calls (Call) reach it. Initialize the new agent
	// from here, on a goroutine of your own, not from OnAgentExit: a call
	// made before the swap meets the dead agent's failed stdin and fails
	// with ErrAgentGone. Nil does nothing.
	OnAgentStarted func()
}

// Relay moves frames both ways between a client and an agent. Bytes out equal
// bytes in for every valid frame that no Hook rewrote, in arrival order per
// direction; each direction runs on its own goroutine, so neither ever waits
// for the other.
//
// The relay itself reads, decides and routes each frame, and owns the
// client's side and the agent's succession. What it writes, the sidecar's
// own calls, the frames decided later and the requests an agent may never
// have read each have an owner of their own, which holds that state.
type Relay struct {
	cfg   Config
	log   *slog.Logger
	hook  Hook
	trace *Trace
	run   runCtx

	w      writer // the write side: both directions' outputs, and what the client gets
	calls  calls  // the sidecar's own calls (Call, CallAsClient) and their pending answers
	held   laters // the goroutines of held and deferred frames
	unsent unsent // the client requests the current agent may not have read

	endOnce sync.Once // ends the client's side: its EOF, or Run's end with Client
	fedDone bool      // under inFrame: Feed takes no more frames

	clientEOF  chan struct{} // closed when the client's input has ended
	agentEnded atomic.Bool   // Run is done with every agent

	// inFrame is held by the client's goroutine from a frame's hook call to
	// the end of its write, so the agent's end can wait for the frame in
	// hand: either it reached the dead agent, or its write failed and the
	// hook got it back (UnsentHook), never both or neither.
	inFrame sync.Mutex
}

// runCtx is Run's context, for frames that come in from outside Run's
// goroutines (Feed, CallAsClient) and for Egress on frames written from
// there (Send, a released Hold). ctx is set before started is closed, and
// read only after.
type runCtx struct {
	ctx     context.Context
	started chan struct{}
}

// start makes ctx Run's context, for everyone waiting for it.
func (c *runCtx) start(ctx context.Context) {
	c.ctx = ctx
	close(c.started)
}

// wait waits until Run has started, or ctx ends.
func (c *runCtx) wait(ctx context.Context) error {
	select {
	case <-c.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get is Run's context, or Background before Run.
func (c *runCtx) get() context.Context {
	select {
	case <-c.started:
		return c.ctx
	default:
		return context.Background()
	}
}

// NewRelay builds a relay. Call Run to start it.
func NewRelay(cfg Config) *Relay {
	r := &Relay{cfg: cfg, log: cfg.Log, hook: cfg.Hook, trace: cfg.Trace, clientEOF: make(chan struct{})}
	r.run.started = make(chan struct{})
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.hook == nil {
		r.hook = HookFunc(func(context.Context, *Frame) Verdict { return Verdict{} })
	}
	var toClient *output
	if cfg.Client != nil {
		toClient = cfg.Client.out.output()
	} else {
		toClient = newOutput(cfg.ClientOut)
	}
	r.w = writer{
		out:    [2]*output{ClientToAgent: newOutput(cfg.AgentIn), AgentToClient: toClient},
		egress: cfg.Egress,
		calls:  &r.calls,
		run:    &r.run,
		trace:  r.trace,
		log:    r.log,
	}
	// A CallAsClient goes in as the client's frames do; it is made only
	// once Run has started, so r.run.ctx is set by then.
	r.calls = calls{toAgent: r.w.out[ClientToAgent], trace: r.trace, feed: func(f *Frame) error { return r.Feed(r.run.ctx, f) }}
	r.calls.newAgent()
	r.held = laters{w: &r.w, log: r.log, once: answerOnce{log: r.log, strict: cfg.Strict}}
	r.unsent = unsent{w: &r.w, laters: &r.held, log: r.log, restarts: cfg.OnAgentExit != nil}
	if h, ok := r.hook.(UnsentHook); ok {
		r.unsent.hook = h
	}
	r.unsent.newAgent(cfg.AgentIn)
	return r
}

// Send writes one frame of the sidecar's own, as if it travelled in dir, and
// flushes it. It is safe from any goroutine.
func (r *Relay) Send(dir Direction, line []byte) error { return r.w.send(dir, line) }

// Hold reserves the current place in the stream of frames travelling in dir
// and returns the function that fills it. Frames that arrive meanwhile, the
// sidecar's own included, wait behind the place in order, so a held response
// cannot be overtaken by what the same peer sent after it. Call it from a
// Hook to hold the frame being decided (then return Drop, and pass the frame's
// bytes, or their replacement, to release), or from anywhere else. Every hold
// must be released, or that direction stalls.
func (r *Relay) Hold(dir Direction) (release func(lines ...[]byte)) { return r.w.hold(dir) }

// Run relays until the agent's output ends, then closes the client's input
// (when it can be closed) and returns once both directions have stopped. When
// the client's input ends first, the agent's input is closed and OnClientEOF
// runs, and the agent's remaining output is still relayed.
//
// With Client, nothing reads the client: the owner feeds the relay, and Run
// returns without waiting for it once the agent is gone for good (after
// CloseClient when OnAgentExit is set, as for the client's EOF); Feed then
// fails with ErrClosed.
func (r *Relay) Run(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	r.run.start(ctx)
	clientDone := make(chan error, 1)
	if r.cfg.Client == nil {
		go func() { clientDone <- r.clientToAgent(ctx) }()
	}

	agentErr := r.agentToClient(ctx)
	r.agentEnded.Store(true)
	if r.cfg.OnAgentExit != nil && !r.clientGone() {
		// The agent is gone for good but the client is still there: it
		// gets a clear error on every request (the hook's answers) until
		// it closes.
		select {
		case <-r.clientEOF:
		case <-ctx.Done():
		}
	}
	r.calls.close()
	cancel()
	// Held and deferred frames end with ctx; what they answer is still
	// written, before the last flush.
	r.held.stop()
	r.answerOwed(parent.Err() != nil)
	var clientErr error
	if r.cfg.Client != nil {
		r.endClient()
	} else {
		clientErr = r.stopClientReader(parent, clientDone)
	}
	if err := r.w.out[AgentToClient].flush(); err != nil && !errors.Is(err, ErrClosed) {
		agentErr = errors.Join(agentErr, fmt.Errorf("flush to client: %w", err))
	}
	return errors.Join(agentErr, clientErr)
}

// stopClientReader closes the client's input, which ends its reader's
// pending read (cmd makes stdin pollable; closing a pipe cancels its read),
// and waits for the reader: its goroutine has an owner, and what its long
// frames kept (Config.LongFrames) is given back before Run returns. Only
// the caller's cancel stops the wait, for a read that no close ends; that
// read then ends with the process.
func (r *Relay) stopClientReader(parent context.Context, done <-chan error) error {
	c, ok := r.cfg.ClientIn.(io.Closer)
	if !ok {
		// Only its own end of input can stop this reader: not waited for.
		select {
		case err := <-done:
			return err
		default:
			return nil
		}
	}
	if err := c.Close(); err != nil {
		r.log.Debug("close the client's input", "err", err) // a second close, or an input gone already: the reader is waited for all the same
	}
	select {
	case err := <-done:
		if errors.Is(err, fs.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
			return nil // the read our own close ended
		}
		return err
	case <-parent.Done():
		return nil
	}
}

// answerOwed writes the StopHook's errors for the requests the agent never
// answered.
func (r *Relay) answerOwed(shutdown bool) {
	h, ok := r.hook.(StopHook)
	if !ok {
		return
	}
	why := "the agent exited and is not restarted"
	if shutdown {
		why = "acp-sidecar is shutting down"
	}
	for _, l := range h.Stopped(why) {
		r.trace.record(AgentToClient, true, l, nil)
		if err := r.w.write(AgentToClient, l, false); err != nil {
			r.log.Debug("answer a request the agent never answered", "err", err) // the client is gone: nobody to tell
			return
		}
	}
}

// clientToAgent is the editor's half of the relay.
func (r *Relay) clientToAgent(ctx context.Context) error {
	defer r.endClient()
	return r.pump(ctx, ClientToAgent, NewLineReader(r.cfg.ClientIn, r.cfg.MaxFrame))
}

// endClient ends the client's side once: the agent's stdin is closed and,
// if it was the client's own end, OnClientEOF runs.
func (r *Relay) endClient() {
	r.endOnce.Do(func() {
		if r.cfg.Client != nil {
			r.inFrame.Lock()
			r.fedDone = true
			r.inFrame.Unlock()
		}
		close(r.clientEOF)
		if err := r.w.out[ClientToAgent].close(); err != nil {
			r.log.Debug("close agent stdin", "err", err)
		}
		// Only the client's own EOF: when Run closed the input because the
		// agent had gone, the agent's exit is not a shutdown we asked for.
		if r.cfg.OnClientEOF != nil && !r.agentEnded.Load() {
			r.cfg.OnClientEOF()
		}
	})
}

// Feed hands the relay one frame of its client, with Client set: the frame
// goes the way a frame read from ClientIn would, through the Hook and to the
// agent, before Feed returns. Frames are taken one at a time, in the order
// of the calls. f and f.Raw belong to the caller again once Feed returns.
// Feed waits for Run to start, and fails with ErrClosed once the client's
// side has ended (CloseClient, or Run's end).
func (r *Relay) Feed(ctx context.Context, f *Frame) error {
	if err := r.run.wait(ctx); err != nil {
		return fmt.Errorf("feed the relay: %w", err)
	}
	r.inFrame.Lock()
	defer r.inFrame.Unlock()
	if r.cfg.Client == nil || r.fedDone {
		return ErrClosed
	}
	if f.Env.Kind != KindOther && f.Env.ID != nil && isOwnID(f.Env.ID) {
		if r.ownID(ClientToAgent, f.Raw, &f.Env) {
			return nil
		}
	}
	fr := *f
	fr.Dir = ClientToAgent
	r.frame(r.run.ctx, &fr, nil)
	return nil
}

// CloseClient ends the client's side of a relay with Client set, as the
// client's EOF ends it: the agent's stdin is closed and OnClientEOF runs.
// The agent's remaining output is still relayed.
func (r *Relay) CloseClient() { r.endClient() }

// agentToClient is the agent's half of the relay. It carries on with each
// agent OnAgentExit starts, until there is none.
func (r *Relay) agentToClient(ctx context.Context) error {
	out := r.cfg.AgentOut
	for {
		if err := r.pump(ctx, AgentToClient, NewLineReader(out, r.cfg.MaxFrame)); err != nil {
			return err
		}
		if r.cfg.OnAgentExit == nil || r.clientGone() {
			return nil
		}
		// Nothing more goes to the dead agent, and calls it will never
		// answer fail now, not at their timeouts; the next agent gets a
		// connection of its own.
		r.w.out[ClientToAgent].fail(ErrAgentGone)
		unlock := r.lockFrameInHand()
		r.unsent.handBack(ctx)
		if r.cfg.OnAgentEnd != nil {
			r.cfg.OnAgentEnd()
		}
		unlock()
		r.calls.newAgent()
		// Frames for the agent wait while it restarts; the sidecar's own
		// calls (a replayed initialize) go straight to the new one.
		release := r.w.hold(ClientToAgent)
		in, next, ok := r.cfg.OnAgentExit(ctx)
		if !ok {
			release()
			return nil
		}
		// A client's frame in hand, if any, may have been decided while
		// the hook still took the old agent for up (a hook without
		// OnAgentEnd, or one past frameInHandBound). It must meet the
		// failed output and go back to the hook (UnsentHook), which keeps
		// it for the new agent until that one is initialized and the
		// session rebuilt; swapped in first, it would reach the new agent
		// ahead of the sidecar's initialize, and codex-acp answers a
		// request before initialize with -32600 "Invalid request". The
		// wait is short: the Hook does not block, and a write blocked on
		// the old agent's stdin has ended, as OnAgentExit closed it.
		r.inFrame.Lock()
		r.w.out[ClientToAgent].swap(in)
		r.unsent.newAgent(in)
		r.inFrame.Unlock()
		if r.cfg.OnAgentStarted != nil {
			r.cfg.OnAgentStarted()
		}
		release()
		out = next
	}
}

// frameInHandBound bounds the wait for the client's frame in hand at the
// agent's end. Its write fails at once once the output has failed; only a
// write already blocked on a full pipe that a survivor of the agent keeps
// open and unread could take longer, and the restart must not wait on it.
const frameInHandBound = 2 * time.Second

// lockFrameInHand waits until the client's goroutine is done with the
// frame it may be writing, and keeps the next one from being decided until
// unlock: OnAgentEnd sees every request either sent or handed back, and
// the hook knows of the end before it decides another. Past
// frameInHandBound it gives up and unlock does nothing; the goroutine it
// started then takes the lock and lets it go once that frame is done.
func (r *Relay) lockFrameInHand() (unlock func()) {
	locked := make(chan struct{})
	giveUp := make(chan struct{})
	go func() {
		r.inFrame.Lock()
		select {
		case locked <- struct{}{}: // the caller holds it now
		case <-giveUp:
			r.inFrame.Unlock()
		}
	}()
	t := time.NewTimer(frameInHandBound)
	defer t.Stop()
	select {
	case <-locked:
		return r.inFrame.Unlock
	case <-t.C:
		close(giveUp)
		r.log.Warn("a client frame's write to the dead agent is still blocked; restarting without it")
		return func() {}
	}
}

// ErrAgentGone fails the sidecar's own calls between an agent's end and the
// start of the next.
var ErrAgentGone = errors.New("the agent is gone")

// clientGone reports whether the client's input has ended.
func (r *Relay) clientGone() bool {
	select {
	case <-r.clientEOF:
		return true
	default:
		return false
	}
}

// pump reads frames travelling in dir and writes each where it belongs. It
// returns nil at end of input and an error only when reading fails otherwise;
// a failed output is logged, and the pump keeps reading so the peer is never
// blocked on a full pipe.
func (r *Relay) pump(ctx context.Context, dir Direction, lr *LineReader) error {
	// One Frame per pump, reused: a fresh one handed to the hook (an
	// interface call) would be a heap allocation per frame, and GC work the
	// byte copy never does (DESIGN.md, "Speed").
	f := new(Frame)
	var scan streamScanner
	lr.lend = r.w.out[dir].settle
	lr.kept = r.cfg.LongFrames
	defer lr.releaseLong()
	if dir == AgentToClient {
		// Agents stream; the editor's requests come one at a time.
		lr.readAhead()
	}
	for {
		line, bad, err := lr.nextFrame(&scan, &f.Env)
		if err != nil {
			var tooLarge *TooLargeError
			if errors.As(err, &tooLarge) {
				// The line is gone; a read error joined to it shows up
				// again on the next read.
				r.oversized(dir, tooLarge)
				continue
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", dir, err)
		}
		if bad != nil {
			r.trace.record(dir, false, line, bad)
			r.malformed(dir, line, bad)
			continue
		}
		r.trace.record(dir, false, line, nil)
		if f.Env.Kind == KindOther && IsBatch(line) {
			r.batch(dir)
			continue
		}
		if env := &f.Env; env.Kind != KindOther && env.ID != nil && isOwnID(env.ID) {
			if r.ownID(dir, line, env) {
				continue
			}
		}
		if dir == ClientToAgent {
			r.inFrame.Lock()
		}
		f.Dir, f.Raw = dir, line
		flush := r.frame(ctx, f, lr)
		if dir == ClientToAgent {
			r.inFrame.Unlock()
		}
		if flush && r.trace != nil {
			r.trace.Flush()
		}
	}
}

// frame decides one valid frame and writes what it decides, and reports
// whether it flushed. lr is the reader the frame came from; nil for a frame
// handed in (Feed), which is flushed at once: the next one may go to
// another relay.
func (r *Relay) frame(ctx context.Context, f *Frame, lr *LineReader) (flush bool) {
	dir, line := f.Dir, f.Raw
	// A client request is written on its own, so a failed write tells
	// which request the agent never received (UnsentHook). Only its
	// envelope is kept aside, for a rewrite: the agent's frames, the
	// commonest by far, are not copied once more.
	request := dir == ClientToAgent && f.Env.Kind == KindRequest
	var env Envelope
	if request {
		env = f.Env
	}
	out := r.w.out[dir]
	v := r.hook.Frame(ctx, f)
	flush = lr == nil || lr.drained()
	switch v.Do {
	case Pass:
		if request {
			r.unsent.write(ctx, out, line, f)
			break
		}
		if dir == AgentToClient && r.w.filtered() {
			// f is still the frame as read: the Hook must not change it.
			var keep bool
			if line, keep = r.w.toClient(ctx, f); !keep {
				if flush {
					r.w.flushOrLog(out, dir)
				}
				break
			}
		}
		if lr != nil && len(line) > 0 && len(line) == len(f.Raw) && &line[0] == &f.Raw[0] {
			if buf := lr.takeLong(); buf != nil {
				// Written while the next frame is read (output.writeOwned).
				spare, err := out.writeOwned(buf)
				lr.giveLong(spare)
				r.w.logWrite(dir, err)
				break
			}
			if buf, from, to, ok := lr.inBuffer(line); ok {
				// Written with the frames around it, from the reader's
				// buffer (output.pass), most often with no lock taken.
				if !flush && out.passLocal(buf, from, to) {
					break
				}
				r.w.logWrite(dir, out.pass(buf, from, to, flush))
				break
			}
		}
		r.w.writeOrLog(out, dir, line, flush)
	case Rewrite:
		r.trace.record(dir, true, v.Line, nil)
		if request {
			*f = Frame{Dir: dir, Raw: line, Env: env} // the original, as the client sent it
			r.unsent.write(ctx, out, v.Line, f)
			break
		}
		r.w.logWrite(dir, r.w.write(dir, v.Line, flush))
	case Answer:
		r.trace.record(dir.Reverse(), true, v.Line, nil)
		r.w.logWrite(dir.Reverse(), r.w.write(dir.Reverse(), v.Line, true))
		if flush {
			r.w.flushOrLog(out, dir)
		}
	case Drop:
		if flush {
			r.w.flushOrLog(out, dir)
		}
	case Hold, Defer:
		r.held.start(ctx, f, v)
		if flush {
			r.w.flushOrLog(out, dir)
		}
	}
	return flush
}

// Again hands a client request back to the hook to be decided again
// (AgainHook): the agent answered it with an error that says it never ran
// it on the session the request named, the hook dropped that answer, and
// rebuilds that session first. line is the request as the client sent it.
// Again may be called from a Hook, on the agent's goroutine; the request
// takes its place among the client's frames going to the agent from then
// on, and its decision is held to one answer as any other's.
func (r *Relay) Again(ctx context.Context, line []byte) error {
	env, err := Scan(line)
	if err != nil || env.Kind != KindRequest {
		return fmt.Errorf("decide a request again: not a request (%v)", err)
	}
	h, ok := r.hook.(AgainHook)
	if !ok {
		return errors.New("decide a request again: the hook decides none again")
	}
	f := &Frame{Dir: ClientToAgent, Raw: line, Env: env}
	v := h.Again(ctx, f)
	if v.Do != Hold && v.Do != Defer {
		return errors.New("decide a request again: the hook did not keep it")
	}
	r.held.start(ctx, f, v)
	return nil
}

// malformed handles a line that is not valid JSON in UTF-8. It never reaches
// the other side: real agents die on such lines, and a client's framing breaks
// on them (DESIGN.md, "Data flow" 5). The client gets a parse error; the
// agent's line is dropped and logged.
func (r *Relay) malformed(dir Direction, line []byte, err error) {
	env := Salvage(line)
	switch {
	case dir == ClientToAgent:
		// A request whose id can still be read gets its answer under that
		// id: an editor waits for it, and a null id answers nobody.
		id := env.ID
		if env.Kind != KindRequest {
			id = nil
		}
		r.log.Warn("client sent a malformed frame; answered with a parse error", "err", err, "idReadable", id != nil)
		r.w.reply(ClientToAgent, id, CodeParseError, "Parse error: "+err.Error())
	case env.Kind == KindRequest:
		r.log.Warn("agent wrote a malformed request; answered with a parse error", "err", err)
		r.w.reply(AgentToClient, env.ID, CodeParseError, "Parse error: "+err.Error())
	case env.Kind == KindResponse && !isOwnID(env.ID):
		// The client waits for this response: give it an error in its place.
		r.log.Warn("agent wrote a malformed response; the client gets an error for it", "err", err)
		r.w.reply(ClientToAgent, env.ID, CodeInternalError, "The agent's response was malformed and dropped: "+err.Error())
	default:
		r.log.Warn("agent wrote a malformed frame; dropped", "err", err)
	}
}

// batch answers a JSON array, which never reaches the other side: ACP has
// no batches (DESIGN.md "Data flow" 7). Its sender gets one -32600, id
// null, whatever the array holds, and nothing in it is processed.
func (r *Relay) batch(dir Direction) {
	r.log.Warn("a JSON-RPC batch was refused: ACP has none", "dir", dir.String())
	r.w.reply(dir, nil, CodeInvalidRequest, BatchMessage)
}

// envelope is what can be read of a frame over the limit, from its head
// and, for an id written last, its tail; and the message its answer says.
func (e *TooLargeError) envelope() (Envelope, string) {
	env := ScanPrefix(e.Head)
	if env.ID == nil {
		if id := TailID(e.Tail); id != nil {
			env.ID = id
			if env.Kind == KindOther {
				env.Kind = KindResponse
			} else if env.Kind == KindNotification {
				env.Kind = KindRequest
			}
		}
	}
	return env, fmt.Sprintf("frame of %d bytes exceeds the sidecar's limit of %d bytes (--max-frame)", e.Size, e.Limit)
}

// oversized answers a frame over the limit where someone waits for it: the
// sender of a request gets an error, and so does the client whose request the
// lost response would have answered.
func (r *Relay) oversized(dir Direction, e *TooLargeError) {
	env, msg := e.envelope()
	r.log.Warn("frame over the size limit; dropped", "dir", dir.String(), "size", e.Size, "limit", e.Limit, "kind", env.Kind.String())
	r.trace.record(dir, false, nil, e)
	switch {
	case env.Kind == KindRequest:
		r.w.reply(dir, env.ID, CodeInvalidRequest, "Invalid request: "+msg)
	case env.Kind == KindResponse && !isOwnID(env.ID):
		// The receiver waits for this response: give it an error in its place.
		r.w.reply(dir.Reverse(), env.ID, CodeInternalError, "The response was dropped: "+msg)
	}
}

// ownID routes a frame whose id is in the sidecar's own space and reports
// whether it was consumed.
func (r *Relay) ownID(dir Direction, line []byte, env *Envelope) bool {
	switch {
	case dir == AgentToClient && env.Kind == KindResponse:
		r.calls.deliverOwn(line)
		return true
	case dir == ClientToAgent && env.Kind == KindRequest:
		// The answer would be taken for one of ours and never reach the client.
		r.w.reply(dir, env.ID, CodeInvalidRequest, "Invalid request: ids starting with "+OwnIDPrefix+" are reserved by acp-sidecar")
		return true
	}
	return false
}

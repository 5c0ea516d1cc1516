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
// agent) and Answer (a response to it) must carry its id once: the relay
// checks it (answerOnce), so every request it took gets one answer.
type Decision struct {
	Forward [][]byte // to the frame's destination, in order
	Answer  [][]byte // back to the frame's sender, in order
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
type Relay struct {
	cfg    Config
	log    *slog.Logger
	hook   Hook
	egress Egress
	out    [2]*output               // indexed by Direction: where frames travelling that way are written
	own    atomic.Pointer[ownCalls] // the current agent's; replaced when a new agent starts
	trace  *Trace

	// ctx is Run's, for frames that Feed hands in; set before started is
	// closed.
	ctx     context.Context
	started chan struct{}
	// asks are the calls that travel as the client's (CallAsClient); nil
	// until the first. asking says one may be waiting for its response.
	asksMu     sync.Mutex
	asks       *ownCalls
	asksClosed bool
	asking     atomic.Bool
	endOnce    sync.Once // ends the client's side: its EOF, or Run's end with Client
	fedDone    bool      // under inFrame: Feed takes no more frames

	clientEOF  chan struct{} // closed when the client's input has ended
	agentEnded atomic.Bool   // Run is done with every agent

	// inFrame is held by the client's goroutine from a frame's hook call to
	// the end of its write, so the agent's end can wait for the frame in
	// hand: either it reached the dead agent, or its write failed and the
	// hook got it back (UnsentHook), never both or neither.
	inFrame sync.Mutex
	// laters are the goroutines of held and deferred frames; Run waits for
	// them, and after that (latersDone) no new one starts.
	laters     sync.WaitGroup
	latersMu   sync.Mutex
	latersDone bool
	// sent is the client requests the current agent may not have read;
	// agentIn is its stdin, which says how much is still unread.
	sent    sentLog
	agentIn atomic.Value // io.Writer
}

// NewRelay builds a relay. Call Run to start it.
func NewRelay(cfg Config) *Relay {
	r := &Relay{cfg: cfg, log: cfg.Log, hook: cfg.Hook, egress: cfg.Egress, trace: cfg.Trace, clientEOF: make(chan struct{}), started: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.hook == nil {
		r.hook = HookFunc(func(context.Context, *Frame) Verdict { return Verdict{} })
	}
	r.out[ClientToAgent] = newOutput(cfg.AgentIn)
	r.agentIn.Store(writerBox{cfg.AgentIn})
	if cfg.Client != nil {
		r.out[AgentToClient] = cfg.Client.out.output()
	} else {
		r.out[AgentToClient] = newOutput(cfg.ClientOut)
	}
	r.own.Store(newOwnCalls(OwnIDPrefix, r.sendOwn))
	return r
}

// Send writes one frame of the sidecar's own, as if it travelled in dir, and
// flushes it. It is safe from any goroutine.
func (r *Relay) Send(dir Direction, line []byte) error {
	r.trace.record(dir, true, line, nil)
	r.trace.Flush() // the sidecar's own frames are rare; a kill must not lose them from the trace
	if err := r.write(dir, line, true); err != nil {
		return fmt.Errorf("send %s: %w", dir, err)
	}
	return nil
}

// write writes a frame that travels in dir; one for the client goes
// through toClient first.
func (r *Relay) write(dir Direction, line []byte, flush bool) error {
	if dir == AgentToClient && r.filtered() {
		var keep bool
		if line, keep = r.toClientLine(line); !keep {
			if flush {
				return r.out[dir].flush()
			}
			return nil
		}
	}
	return r.out[dir].write(line, flush)
}

// filtered says whether frames for the client need toClient: with an
// Egress, or while a CallAsClient may wait for its response.
func (r *Relay) filtered() bool { return r.egress != nil || r.asking.Load() }

// toClient is what the client gets of a frame written to it: nothing when
// it answers a CallAsClient or Egress drops it, else the bytes Egress
// gives. Call it when filtered.
func (r *Relay) toClient(ctx context.Context, f *Frame) ([]byte, bool) {
	if f.Env.Kind == KindResponse && r.asking.Load() && isAskID(f.Env.ID) {
		r.deliverAsk(f.Raw)
		return nil, false
	}
	if r.egress == nil {
		return f.Raw, true
	}
	out := r.egress.Egress(ctx, f)
	return out, out != nil
}

// toClientLine is toClient for a frame not scanned yet: the sidecar's own,
// a rewrite, a held frame released.
func (r *Relay) toClientLine(line []byte) ([]byte, bool) {
	env, err := Scan(line)
	if err != nil {
		return line, true // the sidecar's own frames are valid; this one passes as it is
	}
	return r.toClient(r.runCtx(), &Frame{Dir: AgentToClient, Raw: line, Env: env})
}

// runCtx is Run's context, or Background before Run.
func (r *Relay) runCtx() context.Context {
	select {
	case <-r.started:
		return r.ctx
	default:
		return context.Background()
	}
}

// Hold reserves the current place in the stream of frames travelling in dir
// and returns the function that fills it. Frames that arrive meanwhile, the
// sidecar's own included, wait behind the place in order, so a held response
// cannot be overtaken by what the same peer sent after it. Call it from a
// Hook to hold the frame being decided (then return Drop, and pass the frame's
// bytes, or their replacement, to release), or from anywhere else. Every hold
// must be released, or that direction stalls.
func (r *Relay) Hold(dir Direction) (release func(lines ...[]byte)) {
	rel := r.out[dir].hold()
	return func(lines ...[]byte) {
		for _, l := range lines {
			r.trace.record(dir, true, l, nil) // a released frame is written by the sidecar
		}
		r.trace.Flush()
		if dir == AgentToClient && r.filtered() {
			kept := make([][]byte, 0, len(lines))
			for _, l := range lines {
				if out, keep := r.toClientLine(l); keep {
					kept = append(kept, out)
				}
			}
			lines = kept
		}
		rel(lines...)
	}
}

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
	r.ctx = ctx
	close(r.started)
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
	r.own.Load().close()
	r.closeAsks()
	cancel()
	// Held and deferred frames end with ctx; what they answer is still
	// written, before the last flush.
	r.latersMu.Lock()
	r.latersDone = true
	r.latersMu.Unlock()
	r.laters.Wait()
	r.answerOwed(parent.Err() != nil)
	var clientErr error
	if r.cfg.Client != nil {
		r.endClient()
	} else {
		clientErr = r.stopClientReader(parent, clientDone)
	}
	if err := r.out[AgentToClient].flush(); err != nil && !errors.Is(err, ErrClosed) {
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
		if err := r.write(AgentToClient, l, false); err != nil {
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
		if err := r.out[ClientToAgent].close(); err != nil {
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
	select {
	case <-r.started:
	case <-ctx.Done():
		return fmt.Errorf("feed the relay: %w", ctx.Err())
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
	r.frame(r.ctx, &fr, nil)
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
		r.out[ClientToAgent].fail(ErrAgentGone)
		unlock := r.lockFrameInHand()
		r.handBackUnread(ctx)
		if r.cfg.OnAgentEnd != nil {
			r.cfg.OnAgentEnd()
		}
		unlock()
		old := r.own.Swap(newOwnCalls(OwnIDPrefix, r.sendOwn))
		old.close()
		// Frames for the agent wait while it restarts; the sidecar's own
		// calls (a replayed initialize) go straight to the new one.
		release := r.Hold(ClientToAgent)
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
		r.out[ClientToAgent].swap(in)
		r.agentIn.Store(writerBox{in})
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
	lr.lend = r.out[dir].settle
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
	out := r.out[dir]
	v := r.hook.Frame(ctx, f)
	flush = lr == nil || lr.drained()
	switch v.Do {
	case Pass:
		if request {
			r.writeRequest(ctx, out, line, f)
			break
		}
		if dir == AgentToClient && r.filtered() {
			// f is still the frame as read: the Hook must not change it.
			var keep bool
			if line, keep = r.toClient(ctx, f); !keep {
				if flush {
					r.flushOrLog(out, dir)
				}
				break
			}
		}
		if lr != nil && len(line) > 0 && len(line) == len(f.Raw) && &line[0] == &f.Raw[0] {
			if buf := lr.takeLong(); buf != nil {
				// Written while the next frame is read (output.writeOwned).
				spare, err := out.writeOwned(buf)
				lr.giveLong(spare)
				r.logWrite(dir, err)
				break
			}
			if buf, from, to, ok := lr.inBuffer(line); ok {
				// Written with the frames around it, from the reader's
				// buffer (output.pass), most often with no lock taken.
				if !flush && out.passLocal(buf, from, to) {
					break
				}
				r.logWrite(dir, out.pass(buf, from, to, flush))
				break
			}
		}
		r.writeOrLog(out, dir, line, flush)
	case Rewrite:
		r.trace.record(dir, true, v.Line, nil)
		if request {
			*f = Frame{Dir: dir, Raw: line, Env: env} // the original, as the client sent it
			r.writeRequest(ctx, out, v.Line, f)
			break
		}
		r.logWrite(dir, r.write(dir, v.Line, flush))
	case Answer:
		r.trace.record(dir.Reverse(), true, v.Line, nil)
		r.logWrite(dir.Reverse(), r.write(dir.Reverse(), v.Line, true))
		if flush {
			r.flushOrLog(out, dir)
		}
	case Drop:
		if flush {
			r.flushOrLog(out, dir)
		}
	case Hold, Defer:
		r.later(ctx, f, v)
		if flush {
			r.flushOrLog(out, dir)
		}
	}
	return flush
}

// writeRequest writes and flushes a client request. When the write fails
// because the agent is gone, the hook gets the request back as the client
// sent it (orig), to send again to the agent's successor.
func (r *Relay) writeRequest(ctx context.Context, o *output, line []byte, orig *Frame) {
	end, err := o.writeFlushed(line)
	if err == nil {
		if end >= 0 && r.cfg.OnAgentExit != nil {
			r.sent.add(orig.Raw, len(line)+1, end)
		}
		return
	}
	if errors.Is(err, ErrClosed) {
		return
	}
	if h, ok := r.hook.(UnsentHook); ok && r.cfg.OnAgentExit != nil {
		if v := h.Unsent(ctx, orig); v.Do == Hold || v.Do == Defer {
			r.log.Info("a client request did not reach the agent, which is gone; it is kept for the next agent", "method", string(orig.Env.Method))
			r.later(ctx, orig, v)
			return
		}
	}
	r.logWrite(ClientToAgent, err)
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
	r.later(ctx, f, v)
	return nil
}

// writerBox lets an atomic.Value hold writers of different types.
type writerBox struct{ w io.Writer }

// handBackUnread gives the hook the client requests the dead agent left in
// its stdin pipe: they were written, but never read (unread.go).
func (r *Relay) handBackUnread(ctx context.Context) {
	h, ok := r.hook.(UnsentHook)
	unread := pipeUnread(r.agentIn.Load().(writerBox).w)
	lines := r.sent.unread(r.out[ClientToAgent].taken(), unread)
	if !ok {
		return
	}
	for _, raw := range lines {
		env, err := Scan(raw)
		if err != nil {
			continue // it was scanned once, on its way in
		}
		r.log.Info("a client request was left unread by the agent, which is gone; it is kept for the next agent", "method", string(env.Method))
		f := &Frame{Dir: ClientToAgent, Raw: raw, Env: env}
		if v := h.Unsent(ctx, f); v.Do == Hold || v.Do == Defer {
			r.later(ctx, f, v)
		}
	}
}

func (r *Relay) writeOrLog(o *output, dir Direction, line []byte, flush bool) {
	r.logWrite(dir, o.write(line, flush))
}

func (r *Relay) logWrite(dir Direction, err error) {
	if err != nil && !errors.Is(err, ErrClosed) {
		r.log.Warn("write failed; frames in this direction are dropped", "dir", dir.String(), "err", err)
	}
}

func (r *Relay) flushOrLog(o *output, dir Direction) {
	if err := o.flush(); err != nil && !errors.Is(err, ErrClosed) {
		r.log.Warn("flush failed", "dir", dir.String(), "err", err)
	}
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
		r.reply(ClientToAgent, id, CodeParseError, "Parse error: "+err.Error())
	case env.Kind == KindRequest:
		r.log.Warn("agent wrote a malformed request; answered with a parse error", "err", err)
		r.reply(AgentToClient, env.ID, CodeParseError, "Parse error: "+err.Error())
	case env.Kind == KindResponse && !isOwnID(env.ID):
		// The client waits for this response: give it an error in its place.
		r.log.Warn("agent wrote a malformed response; the client gets an error for it", "err", err)
		r.reply(ClientToAgent, env.ID, CodeInternalError, "The agent's response was malformed and dropped: "+err.Error())
	default:
		r.log.Warn("agent wrote a malformed frame; dropped", "err", err)
	}
}

// batch answers a JSON array, which never reaches the other side: ACP has
// no batches (DESIGN.md "Data flow" 7). Its sender gets one -32600, id
// null, whatever the array holds, and nothing in it is processed.
func (r *Relay) batch(dir Direction) {
	r.log.Warn("a JSON-RPC batch was refused: ACP has none", "dir", dir.String())
	r.reply(dir, nil, CodeInvalidRequest, BatchMessage)
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
		r.reply(dir, env.ID, CodeInvalidRequest, "Invalid request: "+msg)
	case env.Kind == KindResponse && !isOwnID(env.ID):
		// The receiver waits for this response: give it an error in its place.
		r.reply(dir.Reverse(), env.ID, CodeInternalError, "The response was dropped: "+msg)
	}
}

// ownID routes a frame whose id is in the sidecar's own space and reports
// whether it was consumed.
func (r *Relay) ownID(dir Direction, line []byte, env *Envelope) bool {
	switch {
	case dir == AgentToClient && env.Kind == KindResponse:
		r.own.Load().deliver(line)
		return true
	case dir == ClientToAgent && env.Kind == KindRequest:
		// The answer would be taken for one of ours and never reach the client.
		r.reply(dir, env.ID, CodeInvalidRequest, "Invalid request: ids starting with "+OwnIDPrefix+" are reserved by acp-sidecar")
		return true
	}
	return false
}

// reply sends an error response back to the sender of a frame that travelled
// in dir. A nil id becomes null.
func (r *Relay) reply(dir Direction, id []byte, code int, msg string) {
	line := ErrorResponse(id, code, msg)
	back := dir.Reverse()
	r.trace.record(back, true, line, nil)
	r.logWrite(back, r.write(back, line, true))
}

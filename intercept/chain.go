package intercept

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// An Interceptor decides what happens to one frame in flight. It must not
// block the relay: slow work (decoding, storage) gets a copy on a goroutine it
// owns.
type Interceptor interface {
	// Claims looks only at the peeked envelope; most frames are claimed by
	// no one, and those cost nothing more.
	Claims(dir proxy.Direction, env *proxy.Envelope) bool
	// Intercept returns the verdict for a claimed frame. The zero Verdict
	// passes f on unchanged. f.Raw is valid only during the call. An error
	// is logged and the frame passes unchanged, as a failed observer must
	// never stop the conversation.
	Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error)
}

// Streamed chunks (wire.IsChunk) are the commonest frames by far, thousands in
// one turn (DESIGN.md "Speed"), and the chain spares them what it can. A
// stage tells it how it stands to chunks by its ChunkPolicy; a stage
// without one is offered every chunk, as every other frame.

// ChunkPolicy is how a stage stands to streamed chunks. The zero policy
// offers the stage every chunk.
type ChunkPolicy struct {
	// Never promises that Claims is false for every chunk, whatever the
	// stage's state: the chain never offers it one.
	Never bool
	// Gate, when set, is shut while the stage claims no chunk. The chain
	// asks each gate once a chunk, by a direct call, and while it is shut
	// offers the chunk to none of the stages it gates.
	Gate *ChunkGate
	// Take, when set, does to a chunk what Claims and then Intercept
	// would, in one call; a chunk it takes always passes on unchanged.
	Take func(f *proxy.Frame)
}

// A ChunkStage is a stage with a ChunkPolicy.
type ChunkStage interface {
	ChunkPolicy() ChunkPolicy
}

// policyOf is ic's chunk policy, the zero one when it states none.
func policyOf(ic Interceptor) ChunkPolicy {
	if s, ok := ic.(ChunkStage); ok {
		return s.ChunkPolicy()
	}
	return ChunkPolicy{}
}

// Chain runs interceptors in order. The first that does anything but pass
// decides; a rewrite is scanned again and offered to the rest, so each sees
// the frame as it will leave.
//
// A chunk goes only to the interceptors that may claim it: asking all of
// them cost each chunk five interface calls, and recording a turn of 20,000
// chunks ran at 0.8 times the speed of the relay without a record (issue 3).
// While no recorder's gate is open, the record alone is offered a chunk.
type Chain struct {
	list []Interceptor
	// chunks is the lane of the interceptors that may claim a chunk; quiet
	// is chunks without the gated ones, for a chunk while every gate of
	// gates is shut.
	chunks, quiet lane
	gates         []*ChunkGate
	// only is quiet's one interceptor's Take when it has one, the common
	// case: the record alone may take a chunk.
	only func(f *proxy.Frame)
	log  *slog.Logger
	// answers holds every answer to a client request to one
	// (WithAnswers); nil: only the relay's check.
	answers *ledger.Ledger
	strict  bool
}

// lane is some of a chain's interceptors, in chain order.
type lane struct {
	list   []Interceptor
	at     []int                  // list[j] is the chain's list[at[j]]
	takers []func(f *proxy.Frame) // list[j]'s ChunkPolicy.Take, or nil
}

func (l *lane) add(ic Interceptor, at int, take func(f *proxy.Frame)) {
	l.list, l.at, l.takers = append(l.list, ic), append(l.at, at), append(l.takers, take)
}

// NewChain builds the chain in the order given; log receives interceptor
// errors (nil discards them).
func NewChain(log *slog.Logger, list ...Interceptor) *Chain {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Chain{list: list, log: log}
	for i, ic := range list {
		p := policyOf(ic)
		if p.Never {
			continue
		}
		c.chunks.add(ic, i, p.Take)
		if p.Gate == nil {
			c.quiet.add(ic, i, p.Take)
			continue
		}
		if !slices.Contains(c.gates, p.Gate) {
			c.gates = append(c.gates, p.Gate)
		}
	}
	if len(c.quiet.list) == 1 {
		c.only = c.quiet.takers[0]
	}
	for i, ic := range list {
		if h, ok := ic.(holder); ok {
			h.goOnWith(c.after(i))
		}
	}
	return c
}

// A holder holds some frames (proxy.Hold) and lets them go on later. The
// chain hands it the rest of the chain when it is built, so a frame that
// waited meets the same stages after the holder as one that did not.
type holder interface {
	goOnWith(rest restOfChain)
}

// restOfChain decides a frame a stage held, as the stages after it would
// have: what goes on to the frame's destination, and what goes back.
type restOfChain func(ctx context.Context, dir proxy.Direction, raw []byte) proxy.Decision

// after is the rest of the chain after its i'th stage.
func (c *Chain) after(i int) restOfChain {
	return func(ctx context.Context, dir proxy.Direction, raw []byte) proxy.Decision {
		env, err := proxy.Scan(raw)
		if err != nil {
			// It was scanned on its way in, and a holder keeps it as it came.
			c.log.Error("a held frame no longer scans; dropped", "err", err)
			return proxy.Decision{}
		}
		v := c.run(ctx, &proxy.Frame{Dir: dir, Raw: raw, Env: env}, nil, i+1)
		switch v.Do {
		case proxy.Pass:
			return proxy.Decision{Forward: [][]byte{raw}}
		case proxy.Rewrite:
			return proxy.Decision{Forward: [][]byte{v.Line}}
		case proxy.Answer:
			return proxy.Decision{Answer: [][]byte{v.Line}}
		case proxy.Hold, proxy.Defer:
			// Decided here, on the held frame's goroutine: its place in
			// the stream is the first holder's.
			return v.Later(ctx)
		}
		return proxy.Decision{}
	}
}

var _ proxy.UnsentHook = (*Chain)(nil)

// unsentTaker is an interceptor that keeps a client request the agent
// never received (proxy.UnsentHook).
type unsentTaker interface {
	Unsent(ctx context.Context, f *proxy.Frame) proxy.Verdict
}

// Unsent implements proxy.UnsentHook: the first interceptor that keeps
// such a request decides it.
func (c *Chain) Unsent(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	for _, ic := range c.list {
		if u, ok := ic.(unsentTaker); ok {
			if v := u.Unsent(ctx, f); v.Do != proxy.Pass {
				if c.answers != nil && f.Env.Kind == proxy.KindRequest && ledger.Key(f.Env.ID) != "null" {
					v = c.answering(f, v)
				}
				return v
			}
		}
	}
	return proxy.Verdict{Do: proxy.Drop}
}

var _ proxy.AgainHook = (*Chain)(nil)

// againTaker is an interceptor that decides again a client request whose
// error answer it dropped (proxy.AgainHook).
type againTaker interface {
	Again(ctx context.Context, f *proxy.Frame) proxy.Verdict
}

// Again implements proxy.AgainHook: the first interceptor that takes the
// request decides it, held to one answer as the chain's every decision.
func (c *Chain) Again(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	for _, ic := range c.list {
		if a, ok := ic.(againTaker); ok {
			if v := a.Again(ctx, f); v.Do != proxy.Pass {
				if c.answers != nil && ledger.Key(f.Env.ID) != "null" {
					c.answers.Take(ledger.Key(f.Env.ID), string(f.Env.Method), wire.SessionIDOf(f))
					v = c.answering(f, v)
				}
				return v
			}
		}
	}
	return proxy.Verdict{}
}

var _ proxy.StopHook = (*Chain)(nil)

// stopAnswerer is an interceptor that answers, when the relay stops, the
// requests the agent still owes (proxy.StopHook).
type stopAnswerer interface {
	Stopped(why string) [][]byte
}

// Stopped implements proxy.StopHook with every interceptor's answers.
func (c *Chain) Stopped(why string) [][]byte {
	var lines [][]byte
	for _, ic := range c.list {
		if s, ok := ic.(stopAnswerer); ok {
			lines = append(lines, s.Stopped(why)...)
		}
	}
	return lines
}

// String names the chain's stages in order, as the sidecar's debug log
// shows them: "lifeline → commands → …".
func (c *Chain) String() string {
	names := make([]string, len(c.list))
	for i, ic := range c.list {
		name := fmt.Sprintf("%T", ic)
		names[i] = strings.ToLower(name[strings.LastIndexByte(name, '.')+1:])
	}
	return strings.Join(names, " → ")
}

// Frame implements proxy.Hook.
func (c *Chain) Frame(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	if c.answers != nil && f.Env.Kind != proxy.KindNotification {
		return c.gated(ctx, f)
	}
	// An empty chain (--record=false) spends nothing on telling chunks apart.
	if len(c.list) == 0 || !wire.IsChunk(f.Dir, &f.Env) {
		return c.run(ctx, f, nil, 0)
	}
	for _, g := range c.gates {
		if g.open() {
			return c.run(ctx, f, &c.chunks, 0)
		}
	}
	if c.only != nil {
		c.only(f)
		return proxy.Verdict{}
	}
	return c.run(ctx, f, &c.quiet, 0)
}

// run offers f to the interceptors of ln, or of the whole chain from its
// stage from on when ln is nil.
func (c *Chain) run(ctx context.Context, f *proxy.Frame, ln *lane, from int) proxy.Verdict {
	var out proxy.Verdict
	list := c.list
	if ln != nil {
		list = ln.list
	}
	for i := from; i < len(list); i++ {
		if ln != nil && ln.takers[i] != nil {
			ln.takers[i](f)
			continue
		}
		ic := list[i]
		if !ic.Claims(f.Dir, &f.Env) {
			continue
		}
		v, err := ic.Intercept(ctx, f)
		if err != nil {
			c.log.Warn("interceptor failed; frame passed on", "dir", f.Dir.String(), "method", string(f.Env.Method), "err", err)
			continue
		}
		switch v.Do {
		case proxy.Pass:
			continue
		case proxy.Rewrite:
			env, err := proxy.Scan(v.Line)
			if err != nil {
				c.log.Error("interceptor rewrote a frame into invalid JSON; original passed on", "method", string(f.Env.Method), "err", err)
				continue
			}
			f = &proxy.Frame{Dir: f.Dir, Raw: v.Line, Env: env}
			out = v
			if ln != nil && !wire.IsChunk(f.Dir, &f.Env) {
				// No longer a chunk: every interceptor after this one
				// sees it.
				list, i, ln = c.list, ln.at[i], nil
			}
		default:
			return v
		}
	}
	return out
}

// One answer per client request (doc.go, "Verdicts"): the chain holds
// every answer to a client request to it, through the ledger's Respond,
// whoever gives it. The agent's answers, a stage's at once (Answer), a
// stage's later (a Hold's or a Defer's decision, and what a rebuild or the
// waiting room decides in it) meet it here; the agent's death and the
// relay's stop answer what the ledger says the agent owes, taken out by
// the same Respond (Flight.Owed). The chain notes each client request in
// the ledger as it comes (Ledger.Take), so a stage's answer is checked like
// the agent's, and a client that uses an id again is not taken for a
// second answer.

// WithAnswers holds the chain's answers to the one-answer rule, against
// led; strict makes a broken rule a panic, as every test runs it
// (proxy.Config.Strict). Without it (--record=false builds no ledger) the
// relay's own check of each Later's decision is all there is.
func (c *Chain) WithAnswers(led *ledger.Ledger, strict bool) *Chain {
	c.answers, c.strict = led, strict
	return c
}

// gated decides a request or a response under the one-answer rule.
func (c *Chain) gated(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	id := ledger.Key(f.Env.ID)
	if id == "null" {
		// An answer under a null id cannot be told from the error for a
		// request nobody could read, and some agents take a request with
		// a null id for a notification: nothing to hold it to.
		return c.run(ctx, f, nil, 0)
	}
	switch {
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse:
		q, first := c.answers.Respond(id)
		if !first {
			// A response to an id nobody sent is valid JSON, and passes
			// for the client to judge (first); a second one never.
			c.log.Warn("the agent answered a request a second time; the second answer is dropped", "id", string(f.Env.ID))
			return proxy.Verdict{Do: proxy.Drop}
		}
		if q.Method != "" {
			ctx = ledger.WithAnswered(ctx, q)
		}
		return c.run(ctx, f, nil, 0)
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindRequest:
		c.answers.Take(id, string(f.Env.Method), wire.SessionIDOf(f))
		return c.answering(f, c.run(ctx, f, nil, 0))
	}
	return c.run(ctx, f, nil, 0)
}

// answering holds verdict v on client request f to the rule: an answer now
// is the request's first, and a decision later is checked when it comes.
func (c *Chain) answering(f *proxy.Frame, v proxy.Verdict) proxy.Verdict {
	rawID, method := bytes.Clone(f.Env.ID), string(f.Env.Method)
	switch v.Do {
	case proxy.Answer:
		if _, first := c.answers.Respond(ledger.Key(rawID)); !first {
			c.bug("a stage answered a request that had its answer already; the answer is dropped", method, rawID)
			return proxy.Verdict{Do: proxy.Drop}
		}
	case proxy.Hold, proxy.Defer:
		later := v.Later
		v.Later = func(ctx context.Context) proxy.Decision {
			var d proxy.Decision
			if later != nil {
				d = later(ctx)
			}
			return c.decided(rawID, method, d)
		}
	}
	return v
}

// decided holds a later decision on the client request under rawID to the
// rule: forwarded to the agent (which answers), or answered once; an answer
// beyond the first is dropped, and a request neither forwarded nor
// answered gets an error, so its sender never waits for ever.
func (c *Chain) decided(rawID []byte, method string, d proxy.Decision) proxy.Decision {
	forwarded, answered := false, false
	for _, l := range d.Forward {
		if env, err := proxy.Scan(l); err == nil && env.Kind == proxy.KindRequest && bytes.Equal(env.ID, rawID) {
			forwarded = true
		}
	}
	id := ledger.Key(rawID)
	kept := d.Answer[:0:0]
	for _, l := range d.Answer {
		if env, err := proxy.Scan(l); err == nil && env.Kind == proxy.KindResponse && bytes.Equal(env.ID, rawID) {
			if forwarded || answered {
				c.bug("a stage answered a request twice; the extra answer is dropped", method, rawID)
				continue
			}
			if _, first := c.answers.Respond(id); !first {
				c.bug("a stage answered a request that had its answer already; the answer is dropped", method, rawID)
				continue
			}
			answered = true
		}
		kept = append(kept, l)
	}
	if !forwarded && !answered {
		if _, first := c.answers.Respond(id); first {
			c.bug("a stage took a request and never answered it; it gets an error", method, rawID)
			kept = append(kept, proxy.ErrorResponse(rawID, proxy.CodeInternalError, "Internal error: acp-sidecar lost this request; send it again"))
		}
	}
	d.Answer = kept
	return d
}

// bug reports a broken rule of one answer per request: logged, or under
// strict a panic that names the request.
func (c *Chain) bug(msg, method string, id []byte) {
	c.log.Error(msg, "method", method, "id", string(id))
	if c.strict {
		panic(fmt.Sprintf("acp-sidecar strict answers: %s (%s, id %s)", msg, method, id))
	}
}

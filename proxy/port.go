package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// A ClientPort is the client's side of several relays (one per agent) that
// share one client. It reads the client's frames once, scans each once and
// hands it to the owner's route, which passes it on to the relay it belongs
// to (Relay.Feed) or answers it; and it is the one output every relay
// writes the client's frames to, a whole frame at a time. Each relay keeps
// its own order and its own held places there (Relay.Hold): a frame one
// relay holds keeps no other relay's frames waiting.
//
//	client ─► Run ─► route ─► relay a's Feed ─► agent a
//	                       └► relay b's Feed ─► agent b
//	client ◄─ port output ◄─┬─ relay a ◄─ agent a
//	                        └─ relay b ◄─ agent b
type ClientPort struct {
	cfg   PortConfig
	log   *slog.Logger
	trace *Trace
	out   *sink
	own   *output // the owner's frames and the port's answers
}

// PortConfig wires a ClientPort. In and Out are required.
type PortConfig struct {
	In  io.Reader // the editor's frames (our stdin)
	Out io.Writer // to the editor (our stdout): nothing but ACP is ever written here
	// MaxFrame limits one line; 0 means DefaultMaxFrame.
	MaxFrame int
	// LongFrames, as the relay's (Config.LongFrames), is told each change
	// in the bytes the port may keep live for the client's long frames.
	LongFrames func(delta int64)
	// Trace, if set, records every frame the client sends, malformed ones
	// included, and the port's own answers. The relays record the rest.
	Trace *Trace
	// Log receives the port's diagnostics; nil discards them.
	Log *slog.Logger
}

// NewClientPort builds a port; Run reads the client.
func NewClientPort(cfg PortConfig) *ClientPort {
	p := &ClientPort{cfg: cfg, log: cfg.Log, trace: cfg.Trace, out: newSink(cfg.Out)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.own = p.out.output()
	return p
}

// A Route decides where one valid client frame goes. It is called once per
// frame, in arrival order, on Run's goroutine; f (Dir ClientToAgent) and
// f.Raw are valid only during the call, which the next frame waits for.
type Route func(ctx context.Context, f *Frame)

// Run reads the client's frames until its input ends, and returns nil then
// (also when the input was closed under it). Each valid frame goes to
// route. A malformed one never does: it gets a parse error, as a relay
// answers it (DESIGN.md, "Data flow" 5). A request over the size limit gets
// an error, and a response over it is routed as an error response in its
// place, for the peer that waits for it.
func (p *ClientPort) Run(ctx context.Context, route Route) error {
	lr := NewLineReader(p.cfg.In, p.cfg.MaxFrame)
	lr.kept = p.cfg.LongFrames
	defer lr.releaseLong()
	f := new(Frame) // reused, as the relay's pump does
	var scan streamScanner
	for {
		line, bad, err := lr.nextFrame(&scan, &f.Env)
		if err != nil {
			var tooLarge *TooLargeError
			if errors.As(err, &tooLarge) {
				p.oversized(ctx, tooLarge, route)
				continue
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", ClientToAgent, err)
		}
		if bad != nil {
			p.trace.record(ClientToAgent, false, line, bad)
			p.malformed(line, bad)
			continue
		}
		p.trace.record(ClientToAgent, false, line, nil)
		if f.Env.Kind == KindOther && IsBatch(line) {
			// No agent behind the port gets it (Relay.batch).
			p.log.Warn("a JSON-RPC batch was refused: ACP has none", "dir", ClientToAgent.String())
			p.reply(nil, CodeInvalidRequest, BatchMessage)
			continue
		}
		f.Dir, f.Raw = ClientToAgent, line
		route(ctx, f)
		if lr.Buffered() == 0 && p.trace != nil {
			p.trace.Flush()
		}
	}
}

// Send writes a frame of the owner's to the client, flushed, in order with
// the port's other frames of its own. It is safe from any goroutine.
func (p *ClientPort) Send(line []byte) error {
	p.trace.record(AgentToClient, true, line, nil)
	p.trace.Flush()
	if err := p.own.write(line, true); err != nil {
		return fmt.Errorf("send %s: %w", AgentToClient, err)
	}
	return nil
}

// Flush writes what the relays and the owner left buffered. The relays
// flush what they write; the owner calls it once they have all stopped.
func (p *ClientPort) Flush() error {
	if err := p.own.flush(); err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("flush to client: %w", err)
	}
	return nil
}

// malformed answers a line that is not valid JSON in UTF-8 with a parse
// error, under the request's id when it can still be read.
func (p *ClientPort) malformed(line []byte, err error) {
	env := Salvage(line)
	id := env.ID
	if env.Kind != KindRequest {
		id = nil
	}
	p.log.Warn("client sent a malformed frame; answered with a parse error", "err", err, "idReadable", id != nil)
	p.reply(id, CodeParseError, "Parse error: "+err.Error())
}

// oversized answers a frame over the limit where someone waits for it: the
// client for its request, the agent that asked for a response (through
// route, which knows which agent that is).
func (p *ClientPort) oversized(ctx context.Context, e *TooLargeError, route Route) {
	env, msg := e.envelope()
	p.log.Warn("frame over the size limit; dropped", "dir", ClientToAgent.String(), "size", e.Size, "limit", e.Limit, "kind", env.Kind.String())
	p.trace.record(ClientToAgent, false, nil, e)
	switch {
	case env.Kind == KindRequest:
		p.reply(env.ID, CodeInvalidRequest, "Invalid request: "+msg)
	case env.Kind == KindResponse && !isOwnID(env.ID):
		line := ErrorResponse(env.ID, CodeInternalError, "The response was dropped: "+msg)
		renv, err := Scan(line)
		if err != nil {
			return // an id that breaks the frame is no id anyone waits for
		}
		route(ctx, &Frame{Dir: ClientToAgent, Raw: line, Env: renv})
	}
}

func (p *ClientPort) reply(id []byte, code int, msg string) {
	if err := p.Send(ErrorResponse(id, code, msg)); err != nil && !errors.Is(err, ErrClosed) {
		p.log.Warn("write failed; frames in this direction are dropped", "dir", AgentToClient.String(), "err", err)
	}
}

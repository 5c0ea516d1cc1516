package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// writer is the relay's write side: the two ordered outputs, one per
// direction, and what the client gets of each frame written to it. Every
// frame the relay writes goes through it, the agent's and the client's as
// much as the sidecar's own, so a frame for the client meets Egress and
// loses its answer to a CallAsClient in one place, whoever writes it.
type writer struct {
	out    [2]*output // indexed by Direction: where frames travelling that way are written
	egress Egress
	// calls are the sidecar's own; the writer takes the answers to
	// CallAsClient out of the stream to the client and hands them over.
	calls *calls
	// run gives Egress Run's context for frames written from outside
	// Run's goroutines (Send, a released hold).
	run   *runCtx
	trace *Trace
	log   *slog.Logger
}

// send writes one frame of the sidecar's own, as if it travelled in dir, and
// flushes it (Relay.Send).
func (w *writer) send(dir Direction, line []byte) error {
	w.trace.record(dir, true, line, nil)
	w.trace.Flush() // the sidecar's own frames are rare; a kill must not lose them from the trace
	if err := w.write(dir, line, true); err != nil {
		return fmt.Errorf("send %s: %w", dir, err)
	}
	return nil
}

// write writes a frame that travels in dir; one for the client goes
// through toClient first.
func (w *writer) write(dir Direction, line []byte, flush bool) error {
	if dir == AgentToClient && w.filtered() {
		var keep bool
		if line, keep = w.toClientLine(line); !keep {
			if flush {
				return w.out[dir].flush()
			}
			return nil
		}
	}
	return w.out[dir].write(line, flush)
}

// filtered says whether frames for the client need toClient: with an
// Egress, or while a CallAsClient may wait for its response. It is asked
// once per agent frame, so it takes no lock.
func (w *writer) filtered() bool { return w.egress != nil || w.calls.asking() }

// toClient is what the client gets of a frame written to it: nothing when
// it answers a CallAsClient or Egress drops it, else the bytes Egress
// gives. Call it when filtered.
func (w *writer) toClient(ctx context.Context, f *Frame) ([]byte, bool) {
	if f.Env.Kind == KindResponse && w.calls.asking() && isAskID(f.Env.ID) {
		w.calls.deliverAsk(f.Raw)
		return nil, false
	}
	if w.egress == nil {
		return f.Raw, true
	}
	out := w.egress.Egress(ctx, f)
	return out, out != nil
}

// toClientLine is toClient for a frame not scanned yet: the sidecar's own,
// a rewrite, a held frame released.
func (w *writer) toClientLine(line []byte) ([]byte, bool) {
	env, err := Scan(line)
	if err != nil {
		return line, true // the sidecar's own frames are valid; this one passes as it is
	}
	return w.toClient(w.run.get(), &Frame{Dir: AgentToClient, Raw: line, Env: env})
}

// hold reserves the current place in the stream of frames travelling in
// dir and returns the function that fills it (Relay.Hold). The frames that
// fill it are the sidecar's to write: they are traced as its own, and those
// for the client go through toClient.
func (w *writer) hold(dir Direction) (release func(lines ...[]byte)) {
	rel := w.out[dir].hold()
	return func(lines ...[]byte) {
		for _, l := range lines {
			w.trace.record(dir, true, l, nil) // a released frame is written by the sidecar
		}
		w.trace.Flush()
		if dir == AgentToClient && w.filtered() {
			kept := make([][]byte, 0, len(lines))
			for _, l := range lines {
				if out, keep := w.toClientLine(l); keep {
					kept = append(kept, out)
				}
			}
			lines = kept
		}
		rel(lines...)
	}
}

// reply sends an error response back to the sender of a frame that travelled
// in dir. A nil id becomes null.
func (w *writer) reply(dir Direction, id []byte, code int, msg string) {
	line := ErrorResponse(id, code, msg)
	back := dir.Reverse()
	w.trace.record(back, true, line, nil)
	w.logWrite(back, w.write(back, line, true))
}

func (w *writer) writeOrLog(o *output, dir Direction, line []byte, flush bool) {
	w.logWrite(dir, o.write(line, flush))
}

// logWrite logs a failed write. ErrClosed is not news: the output failed
// before, or the relay closed it.
func (w *writer) logWrite(dir Direction, err error) {
	if err != nil && !errors.Is(err, ErrClosed) {
		w.log.Warn("write failed; frames in this direction are dropped", "dir", dir.String(), "err", err)
	}
}

func (w *writer) flushOrLog(o *output, dir Direction) {
	if err := o.flush(); err != nil && !errors.Is(err, ErrClosed) {
		w.log.Warn("flush failed", "dir", dir.String(), "err", err)
	}
}

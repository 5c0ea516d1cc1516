package intercept

import (
	"context"
	"log/slog"

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

// Chain runs interceptors in order. The first that does anything but pass
// decides; a rewrite is scanned again and offered to the rest, so each sees
// the frame as it will leave.
type Chain struct {
	list []Interceptor
	log  *slog.Logger
}

// NewChain builds the chain in the order given; log receives interceptor
// errors (nil discards them).
func NewChain(log *slog.Logger, list ...Interceptor) *Chain {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Chain{list: list, log: log}
}

var _ proxy.Hook = (*Chain)(nil)

// Frame implements proxy.Hook.
func (c *Chain) Frame(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	var out proxy.Verdict
	for _, ic := range c.list {
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
		default:
			return v
		}
	}
	return out
}

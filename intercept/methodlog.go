package intercept

import (
	"context"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// MethodLog logs the method of every request and notification at debug
// level. It never logs params: they hold the user's conversation.
type MethodLog struct{ Log *slog.Logger }

// Claims takes every frame with a method.
func (m MethodLog) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	return env.Method != nil && m.Log.Enabled(context.Background(), slog.LevelDebug)
}

// Intercept logs and passes.
func (m MethodLog) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	m.Log.LogAttrs(ctx, slog.LevelDebug, "frame",
		slog.String("dir", f.Dir.String()),
		slog.String("kind", f.Env.Kind.String()),
		slog.String("method", string(f.Env.Method)),
		slog.String("update", string(f.Env.Update)))
	return proxy.Verdict{}, nil
}

package intercept

import (
	"context"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// methodLog logs the method of every request and notification at debug
// level. It never logs params: they hold the user's conversation.
type methodLog struct{ log *slog.Logger }

// NewMethodLog logs each frame's method to log, at debug level.
func NewMethodLog(log *slog.Logger) Interceptor { return methodLog{log: log} }

// Claims takes every frame with a method.
func (m methodLog) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	return env.Method != nil && m.log.Enabled(context.Background(), slog.LevelDebug)
}

// Intercept logs and passes.
func (m methodLog) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	m.log.LogAttrs(ctx, slog.LevelDebug, "frame",
		slog.String("dir", f.Dir.String()),
		slog.String("kind", f.Env.Kind.String()),
		slog.String("method", string(f.Env.Method)),
		slog.String("update", string(f.Env.Update)))
	return proxy.Verdict{}, nil
}

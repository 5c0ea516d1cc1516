package main

import (
	"context"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/intercept"
)

// buildChain lists every stage a frame meets between the relay's reader and
// its writer, in order. It is the one place the chain is assembled, for one
// agent and for each agent behind the switchboard alike: a stage added here
// is added everywhere. With record false the chain is empty and the relay
// is a plain pipe (but for debug logging).
func buildChain(ctx context.Context, log *slog.Logger, rec *intercept.Recorder, record bool) *intercept.Chain {
	var stages []intercept.Interceptor
	if record {
		stages = rec.Interceptors()
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		// Only at debug: at other levels it would cost every frame a call.
		stages = append(stages, intercept.MethodLog{Log: log})
	}
	return intercept.NewChain(log, stages...)
}

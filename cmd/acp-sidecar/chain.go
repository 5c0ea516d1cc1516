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
func buildChain(ctx context.Context, log *slog.Logger, core *intercept.Core, record bool) *intercept.Chain {
	var stages []intercept.Interceptor
	if record {
		st := core.Stages()
		stages = []intercept.Interceptor{
			// Gates client requests on the agent's life: a request that
			// must wait (the agent restarts, its session is rebuilt) is
			// held here, and goes on through the stages after this one.
			// It drops an agent's second answer to a request.
			st.Lifeline,
			// The sidecar's own surfaces: slash commands, `_sidecar/*`,
			// the capabilities it adds to initialize, the prompt gate.
			// What they answer is never recorded nor sent on.
			st.Commands,
			// The record: config layers and turns.
			st.Record,
			// Keeps the client's session ids stable over rebuilds: it sees
			// client ids on their way in, and gives agent frames theirs.
			st.IDs,
			// Notes what really reaches the agent, to answer it if the
			// agent dies.
			st.Tracker,
		}
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		// Only at debug: at other levels it would cost every frame a call.
		stages = append(stages, intercept.MethodLog{Log: log})
	}
	chain := intercept.NewChain(log, stages...)
	log.Debug("the chain", "stages", chain.String())
	return chain
}

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
func buildChain(ctx context.Context, log *slog.Logger, core *intercept.Core, record, strict bool) *intercept.Chain {
	var stages []intercept.Interceptor
	if record {
		led, gate := core.Ledger(), core.ChunkGate()
		lifeline := intercept.NewLifeline(core.Life(), led, core.Watch(), gate, core.LifelineOps(), log)
		stages = []intercept.Interceptor{
			// Gates client requests on the agent's life: a request that
			// must wait (the agent restarts, its session is rebuilt) is
			// held here, and goes on through the stages after this one.
			lifeline,
			// Does what the agent cannot (load, resume, list, close,
			// delete, fork) from the record; what must wait for that
			// waits in the lifeline.
			intercept.NewEmulation(lifeline, core.EmulationOps(), led, core.Life()),
			// The sidecar's own surfaces: slash commands, `_sidecar/*`,
			// the capabilities it adds to initialize, the prompt gate.
			// What they answer is never recorded nor sent on.
			intercept.NewCommands(core.Sessions(), led, core.Life(), core.Version(), core.MaxProtocol(), log),
			// The record: config layers and turns.
			intercept.NewRecordStage(core.Recorder()),
			// Keeps the client's session ids stable over rebuilds: it sees
			// client ids on their way in, and gives agent frames theirs,
			// the sessions the agent lists included.
			intercept.NewIDs(led, gate, core.Natives()),
			// Follows an agent's mode change in config options with the
			// legacy report, for a client that reads only legacy modes.
			intercept.NewPickers(core.Life(), core.Pickers()),
			// Notes what really reaches the agent, to answer it if the
			// agent dies.
			intercept.NewTracker(led),
		}
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		// Only at debug: at other levels it would cost every frame a call.
		stages = append(stages, intercept.NewMethodLog(log))
	}
	chain := intercept.NewChain(log, stages...)
	if record {
		// Every answer to a client request, the agent's or a stage's, is
		// held to one against the ledger.
		chain.WithAnswers(core.Ledger(), strict)
	}
	log.Debug("the chain", "stages", chain.String())
	return chain
}

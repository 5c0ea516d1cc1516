package switchboard

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"

	"github.com/acp-sidecar/acp-sidecar/intercept"
)

// Recorder is what the switchboard needs of an agent's recorder: its two
// halves of a move, a session brought back after the agent restarted, and
// a session's config options for a move that goes nowhere.
type Recorder interface {
	// Lend readies a session to leave the agent; done says how the move
	// ended.
	Lend(ctx context.Context, sid string) (done func(moved bool), err error)
	// Adopt takes over a session another agent ran, from the record.
	Adopt(ctx context.Context, sid string) (rebuild.SwitchReport, error)
	// Revive brings back a session the agent ran before it was started
	// again.
	Revive(ctx context.Context, sid string) error
	// ConfigOptions is the session's configOptions list as the agent last
	// reported it.
	ConfigOptions(ctx context.Context, sid string) (json.RawMessage, error)
}

var _ Recorder = (*intercept.Sessions)(nil)

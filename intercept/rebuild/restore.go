package rebuild

import (
	"encoding/json"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Outcome is what a restore achieved, in the agent's own words.
type Outcome struct {
	// target is what the restore aimed at.
	target *state.Config
	// catalog is the config as the agent last reported it during the restore.
	Catalog *state.Config
	applied []replay.Step
	failed  []replay.FieldError
	// OptionsRaw is the full configOptions list of the last
	// set_config_option response, to pass on to the client unchanged.
	OptionsRaw json.RawMessage
	// modeSet is true when the mode changed.
	modeSet bool
	// lost says the agent died under the restore: it stopped there, and
	// what it did applies to a native session that is gone.
	lost bool
}

// agentLost says whether a call failed because the agent died under it.
func agentLost(err error) bool { return errors.Is(err, proxy.ErrAgentGone) }

// notifications tells the client what a restore changed, as the agent
// would have: the full option list the agent last returned, and with
// legacy (not in v2) the mode for clients that follow only the legacy
// modes (protocol.md §8, 14). Nothing is reported that the agent did not
// accept.
func (o Outcome) notifications(clientID string, legacy bool) [][]byte {
	var lines [][]byte
	if o.OptionsRaw != nil {
		lines = append(lines, wire.SessionUpdate(clientID, map[string]any{"sessionUpdate": "config_option_update", "configOptions": o.OptionsRaw}))
	}
	if legacy && o.modeSet && o.Catalog.Mode != nil && o.Catalog.Mode.Current != "" {
		lines = append(lines, wire.SessionUpdate(clientID, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": o.Catalog.Mode.Current}))
	}
	return lines
}

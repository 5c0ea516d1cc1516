package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// A client that reads only the legacy pickers is shown `modes` built from
// the agent's mode option where the agent has no legacy modes
// (wire.Bridge, in the rebuilds that let session results go). When the
// agent then changes the mode itself, it reports the change as a
// config_option_update, which such a client does not read: its mode picker
// would stay on the old mode. The pickers stage follows that report with
// the legacy one, current_mode_update.

// pickers is the stage that does it. It claims only config_option_update
// notifications, and only while the client reads legacy pickers and the
// agent has reported no legacy modes.
type pickers struct {
	life *life.Life
	on   bool // the bridge is on (not --pickers=off)
	rest restOfChain
}

// NewPickers follows an agent's mode change in config options with the
// legacy report for a client that reads only legacy pickers, unless the
// bridge is off (--pickers=off).
func NewPickers(lf *life.Life, on bool) Interceptor {
	return &pickers{life: lf, on: on}
}

func (p *pickers) goOnWith(rest restOfChain) { p.rest = rest }

// Claims: a config_option_update on its way to a client of the legacy
// dialect, from an agent without legacy modes.
func (p *pickers) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	if !p.on || dir != proxy.AgentToClient || env.Kind != proxy.KindNotification || string(env.Update) != "config_option_update" {
		return false
	}
	if !p.life.WithoutLegacyModes() {
		return false // the agent reports mode changes in legacy words itself, or may
	}
	if wire.Version(p.life.Caps().Protocol) >= wire.V2 {
		return false // v2 has no legacy words
	}
	init, _ := p.life.Params()
	return !wire.ReadsOptions(init)
}

// Intercept lets the update go on as it would, and the legacy report of its
// mode after it.
func (p *pickers) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				ConfigOptions []json.RawMessage `json:"configOptions"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(f.Raw, &n) != nil || n.Params.SessionID == "" {
		return proxy.Verdict{}, nil // nothing to follow it with: it goes as it is
	}
	var extra []byte
	for _, o := range n.Params.Update.ConfigOptions {
		if extra = wire.LegacyChange(n.Params.SessionID, o); extra != nil {
			break
		}
	}
	if extra == nil {
		return proxy.Verdict{}, nil
	}
	raw := append([]byte(nil), f.Raw...)
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		d := p.rest(ctx, proxy.AgentToClient, raw)
		d.Forward = append(d.Forward, extra)
		return d
	}}, nil
}

// ChunkPolicy: the stage never claims a chunk.
func (p *pickers) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

package rebuild

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Agents moved the model from the legacy session/set_model to a
// model-category config option; clients and agents of both ages meet. When
// the agent answers one with -32601 (method not found), the sidecar asks in
// the other way, and the client gets the answer it asked for.

// Translate retries a model change the agent did not understand the other
// way, on a goroutine (the answer comes through the agent's pump), and
// reports whether it took the response over.
func (f *FollowUps) Translate(_ context.Context, ev record.Event) bool {
	b := f.b
	if b.version() >= wire.V2 {
		return false // v2 has one way only: config options
	}
	req := ev.Req
	s := b.rec.Session(req.SID)
	if s == nil {
		return false
	}
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModelID  string          `json:"modelId"`
		ModeID   string          `json:"modeId"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return false // params the agent refused and we cannot read: its error stands
	}
	env, err := proxy.Scan(ev.Raw)
	if err != nil {
		return false
	}
	id := append([]byte(nil), env.ID...)
	live := record.CloneConfig(s.Rec.Live)
	native := s.Rec.NativeID
	var method string
	var params map[string]any
	switch req.Method {
	case wire.SetModel:
		o := live.ByCategory("model")
		v := wire.String(p.ModelID)
		if o == nil || !o.Offers(v) {
			return false
		}
		method, params = wire.SetConfigOption, map[string]any{"sessionId": native, "configId": o.ID, "value": p.ModelID}
	case wire.SetMode:
		// A mode the agent offers only as an option (the bridge showed it
		// to a client that reads legacy modes).
		o := live.ByCategory("mode")
		v := wire.String(p.ModeID)
		if o == nil || !o.Offers(v) {
			return false
		}
		method, params = wire.SetConfigOption, map[string]any{"sessionId": native, "configId": o.ID, "value": p.ModeID}
	case wire.SetConfigOption:
		var val string
		if json.Unmarshal(p.Value, &val) != nil {
			return false
		}
		o := live.Option(p.ConfigID)
		switch {
		case o != nil && o.Category == "model":
			method, params = wire.SetModel, map[string]any{"sessionId": native, "modelId": val}
		case o == nil && p.ConfigID == wire.BridgedModel && live.Model != nil && slices.Contains(live.Model.Available, val):
			method, params = wire.SetModel, map[string]any{"sessionId": native, "modelId": val}
		case o == nil && p.ConfigID == wire.BridgedMode && live.Mode != nil && slices.Contains(live.Mode.Available, val):
			method, params = wire.SetMode, map[string]any{"sessionId": native, "modeId": val}
		default:
			return false
		}
	default:
		return false
	}
	b.rec.Go(func(ctx context.Context) {
		res, err := b.eng.callRaw(ctx, method, params)
		if err != nil {
			ev.Release(ev.Raw) // the agent's own error stands
			return
		}
		var answer []byte
		var notes [][]byte
		err = b.rec.Do(ctx, func(ctx context.Context) {
			// Record it as the client's own accepted change, in the words
			// the agent accepted.
			b.rec.ConfigAccepted(ctx, &record.Request{Method: method, SID: req.SID, Params: wire.Encode(params)}, res)
			if method == wire.SetConfigOption {
				answer = wire.Response(id, []byte("{}"))
				var pl wire.ConfigPayload
				if json.Unmarshal(res, &pl) == nil && pl.ConfigOptions != nil {
					notes = append(notes, wire.SessionUpdate(req.SID, map[string]any{"sessionUpdate": "config_option_update", "configOptions": pl.ConfigOptions}))
				}
			} else {
				answer = wire.Response(id, optionsResult(b.rec.Session(req.SID).Rec.Live))
			}
			if req.Method == wire.SetMode {
				// The client reads legacy modes: tell it in their words.
				notes = append(notes, wire.SessionUpdate(req.SID, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": p.ModeID}))
			}
			b.rec.Flush(ctx)
		})
		if err != nil {
			ev.Release(ev.Raw) // the recorder is stopping: the agent's own error stands
			return
		}
		ev.Release(append([][]byte{answer}, notes...)...)
	})
	return true
}

// optionsResult is a set_config_option result built from the options the
// agent last reported, for a change the agent accepted another way.
func optionsResult(c *state.Config) []byte {
	if len(c.Options) == 0 {
		// An agent with legacy pickers only: the options the bridge
		// showed the client, at their current values.
		return wire.BridgedOptions(legacyRaw(c.Mode, "currentModeId"), legacyRaw(c.Model, "currentModelId"))
	}
	var raws []json.RawMessage
	for _, o := range c.Options {
		raw := o.Raw
		if fixed, err := wire.SetPath(raw, o.Current, "currentValue"); err == nil {
			raw = fixed
		}
		raws = append(raws, raw)
	}
	b := wire.Encode(map[string]any{"configOptions": raws})
	return b
}

// legacyRaw is a legacy picker as the agent reported it, with its current
// value the one the record holds; nil for none.
func legacyRaw(l *state.Legacy, key string) json.RawMessage {
	if l == nil || len(l.Raw) == 0 {
		return nil
	}
	if raw, err := wire.SetPath(l.Raw, wire.String(l.Current), key); err == nil {
		return raw
	}
	return l.Raw
}

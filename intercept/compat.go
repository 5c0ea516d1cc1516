package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Agents moved the model from the legacy session/set_model to a
// model-category config option; clients and agents of both ages meet. When
// the agent answers one with -32601 (method not found), the sidecar asks in
// the other way, and the client gets the answer it asked for.

func errorCodeOf(raw json.RawMessage) int {
	var e struct {
		Code int `json:"code"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return 0 // an error without a numeric code has no code we know
	}
	return e.Code
}

// translate retries a model change the agent did not understand the other
// way, on a goroutine (the answer comes through the agent's pump), and
// reports whether it took the response over.
func translate(b *rebuilder, ctx context.Context, ev event) bool {
	req := ev.req
	s := b.rec.sessions[req.sid]
	if s == nil {
		return false
	}
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModelID  string          `json:"modelId"`
	}
	if err := json.Unmarshal(req.params, &p); err != nil {
		return false // params the agent refused and we cannot read: its error stands
	}
	env, err := proxy.Scan(ev.raw)
	if err != nil {
		return false
	}
	id := append([]byte(nil), env.ID...)
	live := cloneConfig(s.rec.Live)
	native := s.rec.NativeID
	var method string
	var params map[string]any
	switch req.method {
	case wire.SetModel:
		o := live.ByCategory("model")
		v := wire.String(p.ModelID)
		if o == nil || !o.Offers(v) {
			return false
		}
		method, params = wire.SetConfigOption, map[string]any{"sessionId": native, "configId": o.ID, "value": p.ModelID}
	case wire.SetConfigOption:
		o := live.Option(p.ConfigID)
		var model string
		if o == nil || o.Category != "model" || json.Unmarshal(p.Value, &model) != nil {
			return false
		}
		method, params = wire.SetModel, map[string]any{"sessionId": native, "modelId": model}
	default:
		return false
	}
	b.spawn(func(ctx context.Context) {
		res, err := b.eng.callRaw(ctx, method, params)
		if err != nil {
			ev.release(ev.raw) // the agent's own error stands
			return
		}
		var answer []byte
		var notes [][]byte
		err = b.rec.do(ctx, func(ctx context.Context) {
			// Record it as the client's own accepted change, in the words
			// the agent accepted.
			b.rec.configAccepted(ctx, &request{method: method, sid: req.sid, params: wire.Encode(params)}, res)
			if method == wire.SetConfigOption {
				answer = wire.Response(id, []byte("{}"))
				var pl wire.ConfigPayload
				if json.Unmarshal(res, &pl) == nil && pl.ConfigOptions != nil {
					notes = append(notes, wire.SessionUpdate(req.sid, map[string]any{"sessionUpdate": "config_option_update", "configOptions": pl.ConfigOptions}))
				}
			} else {
				answer = wire.Response(id, optionsResult(b.rec.sessions[req.sid].rec.Live))
			}
			b.rec.flush(ctx)
		})
		if err != nil {
			ev.release(ev.raw) // the recorder is stopping: the agent's own error stands
			return
		}
		ev.release(append([][]byte{answer}, notes...)...)
	})
	return true
}

// optionsResult is a set_config_option result built from the options the
// agent last reported, for a change the agent accepted another way.
func optionsResult(c *state.Config) []byte {
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

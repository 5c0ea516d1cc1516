package rebuild

import (
	"context"
	"encoding/json"

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
func Translate(b *Rebuilder, ctx context.Context, ev record.Event) bool {
	req := ev.Req
	s := b.rec.Session(req.SID)
	if s == nil {
		return false
	}
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModelID  string          `json:"modelId"`
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

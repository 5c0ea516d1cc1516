package intercept

import (
	"context"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// tracker is the last interceptor: it notes the client requests that really
// go to the agent, so they can be answered if it dies, and the agent's
// requests, whose late answers must not reach its successor.
type tracker struct{ led *ledger.Ledger }

func newTracker(led *ledger.Ledger) tracker { return tracker{led: led} }

// Claims takes client requests and agent requests that made it through,
// and the agent's answers to the client's.
func (t tracker) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return env.Kind == proxy.KindRequest || dir == proxy.AgentToClient && env.Kind == proxy.KindResponse
}

// Intercept notes the request, or that the agent answered one. A response
// the record waited for was taken out of the ledger there already.
func (t tracker) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	id := ledger.Key(f.Env.ID)
	switch {
	case f.Env.Kind == proxy.KindResponse:
		t.led.Update(func(fl *ledger.Flight) { fl.Answered(id) })
	case f.Dir == proxy.ClientToAgent:
		method := string(f.Env.Method)
		t.led.Update(func(fl *ledger.Flight) { fl.Note(id, method, "").State = ledger.Sent })
	default:
		t.led.Update(func(fl *ledger.Flight) { fl.AgentAsked(id) })
	}
	return proxy.Verdict{}, nil
}

// ChunkPolicy: the tracker never claims a chunk.
func (t tracker) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

package intercept

import (
	"context"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// tracker is the last interceptor: it notes the client requests that really
// go to the agent, so they can be answered if it dies, and the agent's
// requests, whose late answers must not reach its successor.
type tracker struct{ led *ledger.Ledger }

// NewTracker notes in the ledger each request that reaches the agent.
func NewTracker(led *ledger.Ledger) Interceptor { return tracker{led: led} }

// Claims takes client requests and agent requests that made it through.
// The agent's answers to the client's are the chain's (Chain.WithAnswers).
func (t tracker) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return env.Kind == proxy.KindRequest
}

// Intercept notes the request.
func (t tracker) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	id := ledger.Key(f.Env.ID)
	if id == "null" {
		// An answer under a null id cannot be told from the error for a
		// request nobody could read, and some agents take a request with
		// a null id for a notification (the fake agent does): the
		// sidecar owes it no answer of its own.
		return proxy.Verdict{}, nil
	}
	switch {
	case f.Dir == proxy.ClientToAgent:
		method := string(f.Env.Method)
		t.led.Update(func(fl *ledger.Flight) { fl.Requests.Note(id, method, "").State = ledger.Sent })
	default:
		t.led.Update(func(fl *ledger.Flight) { fl.Requests.AgentAsked(id) })
	}
	return proxy.Verdict{}, nil
}

// Stopped answers the requests the agent was sent and never answered,
// when the relay stops, and ends the v2 turns it was running, whose
// prompts were answered when accepted: the client must not wait for
// either for ever.
func (t tracker) Stopped(why string) [][]byte {
	var owed []ledger.GoneRequest
	var turns []string
	t.led.Update(func(fl *ledger.Flight) { owed, turns = fl.Requests.Owed(), fl.Sessions.EndTurns() })
	lines := make([][]byte, 0, len(owed)+len(turns))
	for _, q := range owed {
		msg := fmt.Sprintf("acp-sidecar: %s; this %s got no answer from the agent.", why, q.Method)
		lines = append(lines, proxy.ErrorResponse([]byte(q.ID), proxy.CodeAgentGone, msg))
	}
	for _, sid := range turns {
		msg := fmt.Sprintf("acp-sidecar: %s; this turn got no end from the agent.", why)
		lines = append(lines, wire.StateFailed(sid, proxy.CodeAgentGone, msg))
	}
	return lines
}

// ChunkPolicy: the tracker never claims a chunk.
func (t tracker) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

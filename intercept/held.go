package intercept

import (
	"context"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// errCancelled ends the wait of a prompt the client cancelled.
var errCancelled = errors.New("cancelled while waiting")

// waited is a held client request, copied off the relay's buffer.
type waited struct {
	method, sid string
	id, raw     []byte
}

// A decider takes a held request on once its session is ready, and says
// what goes to the agent and what back to the client.
type decider func(ctx context.Context, q waited) proxy.Decision

// answerWith is the decision to answer a frame with lines.
func answerWith(lines ...[]byte) proxy.Decision { return proxy.Decision{Answer: lines} }

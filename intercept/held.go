package intercept

import (
	"context"
	"errors"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// errCancelled ends the wait of a prompt the client cancelled.
var errCancelled = errors.New("cancelled while waiting")

// Held is a client request held until its session is ready, copied off the
// relay's buffer.
type Held struct {
	Method, Session string
	ID, Raw         []byte
}

// A Decider takes a held request on once its session is ready, and says
// what goes to the agent and what back to the client.
type Decider func(ctx context.Context, q Held) proxy.Decision

// answerWith is the decision to answer a frame with lines.
func answerWith(lines ...[]byte) proxy.Decision { return proxy.Decision{Answer: lines} }

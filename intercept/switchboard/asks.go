package switchboard

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// askPrefix starts the ids the switchboard gives requests of agents other
// than the default one, so the client never sees two pending requests with
// the same id.
const askPrefix = `"acp-sidecar-agent:`

// asks are the agents' requests to the client (a permission, a file read)
// under ids of the switchboard's own, until the client answers them.
type asks struct {
	seq  atomic.Uint64
	mu   sync.Mutex
	byID map[string]agentAsk // our id for an agent's request -> whose and its own id
}

type agentAsk struct {
	agent string
	id    []byte
}

// give gives agent's request line, under its own id, an id of the
// switchboard's, and keeps the pair until the client answers.
func (a *asks) give(agent string, line, id []byte) ([]byte, error) {
	ask := askPrefix + strconv.FormatUint(a.seq.Add(1), 10) + `"`
	out, err := wire.SetPath(line, []byte(ask), "id")
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.byID[ask] = agentAsk{agent: agent, id: bytes.Clone(id)}
	a.mu.Unlock()
	return out, nil
}

// take takes back the agent and its own id of the request the client
// answered under id; false when nobody waits for that answer.
func (a *asks) take(id []byte) (agentAsk, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ask, ok := a.byID[string(id)]
	delete(a.byID, string(id))
	return ask, ok
}

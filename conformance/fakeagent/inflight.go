package fakeagent

import (
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// pendingReq is a request the client sent and the agent has not answered.
type pendingReq struct {
	method, sessionID string
}

// inflight is the client's requests the agent has been handed and has not
// answered yet, by idKey. The stdin reader adds each request as it hands
// it on (track); the line writer's hook finds it as its answer goes out
// (agent.frameLine) and forgets it once the answer is written (answered).
// At stdin's end it tells the reader when the last one is answered, so
// piping a file of requests in gets all its answers (atEOF).
type inflight struct {
	mu      sync.Mutex
	pending map[string]*pendingReq
	prompts int           // session/prompt answers written, for -die-after
	eof     bool          // stdin ended; drained closes when pending empties
	drained chan struct{} // closed once stdin has ended and every request is answered
}

func newInflight() *inflight {
	return &inflight{pending: map[string]*pendingReq{}, drained: make(chan struct{})}
}

// track notes the request with idKey key, of method on session sid ("" if
// it names none), as handed on and not answered.
func (f *inflight) track(key, method, sid string) {
	f.mu.Lock()
	f.pending[key] = &pendingReq{method: method, sessionID: sid}
	f.mu.Unlock()
}

// get is the request with idKey key not answered yet, or nil.
func (f *inflight) get(key string) *pendingReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending[key]
}

// answered forgets req, whose answer has been written, unless a later
// request reuses its id, and lets a drain at stdin's end finish. For a
// prompt it returns how many prompt answers have been written, this one
// included; for any other request 0.
func (f *inflight) answered(key string, req *pendingReq) (prompts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending[key] == req { // not a later request reusing the id
		delete(f.pending, key)
	}
	if f.eof && len(f.pending) == 0 {
		select {
		case <-f.drained:
		default:
			close(f.drained)
		}
	}
	if req.method != acp.AgentMethodSessionPrompt {
		return 0
	}
	f.prompts++
	return f.prompts
}

// promptRuns says whether a prompt of sid has been handed on and not
// answered (queue.go).
func (f *inflight) promptRuns(sid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pending {
		if p.method == acp.AgentMethodSessionPrompt && p.sessionID == sid {
			return true
		}
	}
	return false
}

// atEOF marks stdin's end and returns a channel closed once every request
// received has been answered (at once if none is pending).
func (f *inflight) atEOF() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eof = true
	if len(f.pending) == 0 {
		close(f.drained)
	}
	return f.drained
}

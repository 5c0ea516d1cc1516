package fakeagent

import (
	"encoding/json"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// Prompt queueing (-queue-prompts), as claude-agent-acp 0.101.0 does it
// and advertises with _meta.claudeCode.promptQueueing: a session/prompt
// that comes while a turn of its session runs is not refused and does not
// run beside it. It waits, and runs once the turns before it have ended,
// so its answer, and in v2 its user_message and acceptance, come after
// theirs. session/cancel ends the running turn and every prompt waiting
// behind it: a waiting one is answered cancelled (v1) or -32800 (v2)
// without ever reaching the model. So does stdin's end.
//
// The queue sits at the stdin edge, before the v2 adapter and the SDK, so
// a waiting prompt is, for both, a prompt that has not arrived yet.

// promptQueue holds the prompts waiting per session, and how many are
// being handed on now. Lock order: mu, then the inflight's (promptRuns);
// it never holds mu while it hands a prompt on or writes.
type promptQueue struct {
	on     bool // -queue-prompts
	flight *inflight
	w      *lineWriter
	v2     *v2adapter

	mu      sync.Mutex
	waiting map[string][]queuedPrompt
	// handing counts, per session, the prompts ended took out and has
	// not yet handed on: not yet pending, not waiting either, they still
	// come before a prompt that arrives meanwhile.
	handing map[string]int
	// handOn is the stdin reader's, which hands a prompt on to the v2
	// adapter and the SDK; nil until the reader is made (feed).
	handOn func(line []byte, env envelope, sid string)
}

func newPromptQueue(on bool, flight *inflight, w *lineWriter, v2 *v2adapter) *promptQueue {
	return &promptQueue{on: on, flight: flight, w: w, v2: v2,
		waiting: map[string][]queuedPrompt{}, handing: map[string]int{}}
}

// queuedPrompt is a waiting prompt: its line as it came, and its envelope.
type queuedPrompt struct {
	line []byte
	env  envelope
}

// feed sets where a prompt goes once its turn comes: the stdin reader's
// handOn, which it calls before it reads the first line.
func (q *promptQueue) feed(handOn func(line []byte, env envelope, sid string)) {
	q.mu.Lock()
	q.handOn = handOn
	q.mu.Unlock()
}

// waits queues the prompt line when a turn of its session runs, and says
// whether it did. stdin reader only.
func (q *promptQueue) waits(line []byte, env envelope, sid string) bool {
	if !q.on || env.Method != acp.AgentMethodSessionPrompt || !env.hasID() || sid == "" {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting[sid]) == 0 && q.handing[sid] == 0 && !q.flight.promptRuns(sid) {
		return false
	}
	q.waiting[sid] = append(q.waiting[sid], queuedPrompt{line: append([]byte(nil), line...), env: env})
	return true
}

// ended hands on the oldest prompt waiting behind sid's turn, which has
// just been answered, and the next one too if that one is answered at once
// (the v2 adapter refuses some), until a prompt of sid runs.
func (q *promptQueue) ended(sid string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.handOn != nil && len(q.waiting[sid]) > 0 && q.handing[sid] == 0 && !q.flight.promptRuns(sid) {
		next := q.waiting[sid][0]
		if q.waiting[sid] = q.waiting[sid][1:]; len(q.waiting[sid]) == 0 {
			delete(q.waiting, sid)
		}
		q.handing[sid]++
		handOn := q.handOn
		q.mu.Unlock()
		handOn(next.line, next.env, sid)
		q.mu.Lock()
		if q.handing[sid]--; q.handing[sid] == 0 {
			delete(q.handing, sid)
		}
	}
}

// cancel answers every prompt waiting behind sid's turn as a cancel ends
// it ("" for every session, at stdin's end).
func (q *promptQueue) cancel(sid string) {
	q.mu.Lock()
	var gone []queuedPrompt
	for s, w := range q.waiting {
		if sid == "" || s == sid {
			gone = append(gone, w...)
			delete(q.waiting, s)
		}
	}
	q.mu.Unlock()
	for _, p := range gone {
		if q.v2.active() {
			q.w.answerRaw(p.env.ID, nil, acp.NewRequestCancelled(nil))
			continue
		}
		q.w.answerRaw(p.env.ID, json.RawMessage(`{"stopReason":"cancelled"}`), nil)
	}
}

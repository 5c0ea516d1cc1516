package fakeagent

import (
	"encoding/json"

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
// being handed on now, under agent.mu.
type promptQueue struct {
	waiting map[string][]queuedPrompt
	// handing counts, per session, the prompts promptEnded took out and
	// has not yet handed on: not yet pending, not waiting either, they
	// still come before a prompt that arrives meanwhile.
	handing map[string]int
}

func newPromptQueue() promptQueue {
	return promptQueue{waiting: map[string][]queuedPrompt{}, handing: map[string]int{}}
}

// queuedPrompt is a waiting prompt: its line as it came, and its envelope.
type queuedPrompt struct {
	line []byte
	env  envelope
}

// waits queues the prompt line when a turn of its session runs, and says
// whether it did. stdin reader only.
func (a *agent) waits(line []byte, env envelope, sid string) bool {
	if !a.cfg.QueuePrompts || env.Method != acp.AgentMethodSessionPrompt || !env.hasID() || sid == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	q := &a.queued
	if len(q.waiting[sid]) == 0 && q.handing[sid] == 0 && !a.promptRunsLocked(sid) {
		return false
	}
	q.waiting[sid] = append(q.waiting[sid], queuedPrompt{line: append([]byte(nil), line...), env: env})
	return true
}

// promptRunsLocked says whether a prompt of sid has been handed on and not
// answered. a.mu must be held.
func (a *agent) promptRunsLocked(sid string) bool {
	for _, p := range a.pending {
		if p.method == acp.AgentMethodSessionPrompt && p.sessionID == sid {
			return true
		}
	}
	return false
}

// promptEnded hands on the oldest prompt waiting behind sid's turn, which
// has just been answered, and the next one too if that one is answered at
// once (the v2 adapter refuses some), until a prompt of sid runs.
func (a *agent) promptEnded(sid string) {
	q := &a.queued
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.sdkIn != nil && len(q.waiting[sid]) > 0 && q.handing[sid] == 0 && !a.promptRunsLocked(sid) {
		next := q.waiting[sid][0]
		if q.waiting[sid] = q.waiting[sid][1:]; len(q.waiting[sid]) == 0 {
			delete(q.waiting, sid)
		}
		q.handing[sid]++
		a.mu.Unlock()
		a.handOn(next.line, next.env, sid, a.sdkIn)
		a.mu.Lock()
		if q.handing[sid]--; q.handing[sid] == 0 {
			delete(q.handing, sid)
		}
	}
}

// cancelQueued answers every prompt waiting behind sid's turn as a cancel
// ends it ("" for every session, at stdin's end).
func (a *agent) cancelQueued(sid string) {
	a.mu.Lock()
	var gone []queuedPrompt
	for s, q := range a.queued.waiting {
		if sid == "" || s == sid {
			gone = append(gone, q...)
			delete(a.queued.waiting, s)
		}
	}
	a.mu.Unlock()
	for _, p := range gone {
		if a.v2.active() {
			a.answerRaw(p.env.ID, nil, acp.NewRequestCancelled(nil))
			continue
		}
		a.answerRaw(p.env.ID, json.RawMessage(`{"stopReason":"cancelled"}`), nil)
	}
}

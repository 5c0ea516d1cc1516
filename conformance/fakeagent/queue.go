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

// promptQueue holds the prompts waiting per session, under agent.mu.
type promptQueue map[string][]queuedPrompt

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
	if len(a.queued[sid]) == 0 && !a.promptRunsLocked(sid) {
		return false
	}
	a.queued[sid] = append(a.queued[sid], queuedPrompt{line: append([]byte(nil), line...), env: env})
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
// has just been answered.
func (a *agent) promptEnded(sid string) {
	a.mu.Lock()
	q := a.queued[sid]
	if len(q) == 0 || a.sdkIn == nil {
		a.mu.Unlock()
		return
	}
	next := q[0]
	if len(q) == 1 {
		delete(a.queued, sid)
	} else {
		a.queued[sid] = q[1:]
	}
	a.mu.Unlock()
	a.handOn(next.line, next.env, sid, a.sdkIn)
}

// cancelQueued answers every prompt waiting behind sid's turn as a cancel
// ends it ("" for every session, at stdin's end).
func (a *agent) cancelQueued(sid string) {
	a.mu.Lock()
	var gone []queuedPrompt
	for s, q := range a.queued {
		if sid == "" || s == sid {
			gone = append(gone, q...)
			delete(a.queued, s)
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

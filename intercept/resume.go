package intercept

import (
	"bytes"
	"context"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// An agent may accept a resume of a session it cannot serve: codex-acp
// 2.6.0, its thread gone with CODEX_HOME/sessions, answers session/resume
// with success and the next prompt with -32603 "thread not found". The
// first prompt after a resume proves it (ledger Flight.Resumed): when the
// agent fails that prompt so, the resume is taken for a failed one, the
// session is rebuilt by the next rung of the ladder, which resumes that
// native session no more, and the prompt goes to the rebuilt session, once,
// with its handoff. The client sees one answer, the rebuilt session's.

// proving marks prompt f, the first since its session's native session
// was resumed, as the one that proves the resume: it keeps the prompt as
// the client sent it, to send it again.
func (ll *Lifeline) proving(id, sid string, raw []byte) {
	raw = bytes.Clone(raw)
	ll.led.Update(func(fl *ledger.Flight) {
		if fl.Sessions.Proving(sid) {
			fl.Requests.Note(id, wire.Prompt, sid).Probe = raw
		}
	})
}

// resumeUnserved says whether an error response to the first prompt after
// a resume says the agent has no such session after all: -32002, or an
// internal error that says so ("thread not found", codex-acp 2.6.0).
func resumeUnserved(raw []byte) bool {
	e := wire.Member(raw, "error")
	switch wire.ErrorCodeOf(e) {
	case proxy.CodeResourceNotFound:
		return true
	case proxy.CodeInternalError:
		return bytes.Contains(bytes.ToLower(e), []byte("not found"))
	}
	return false
}

// unserved drops the agent's error to q, the first prompt after a resume
// the agent could not serve, and sends q again, to the session rebuilt
// without that resume: the client gets the rebuilt session's answer, and
// the agent's error never.
func (ll *Lifeline) unserved(ctx context.Context, q ledger.Request, f *proxy.Frame) proxy.Verdict {
	sid := q.Session
	native := ll.led.NativeOf(sid)
	ll.log.Warn("the agent accepted the session's resume and cannot serve it; rebuilding the session and sending the prompt again", "session", sid, "native", native, "error", string(wire.Member(f.Raw, "error")))
	ll.led.Update(func(fl *ledger.Flight) { fl.Sessions.ResumeLied(sid, native) })
	// Sent again as a request the agent never took, its turn is taken
	// back (Unsent) and recorded when it goes.
	if err := ll.ops.Again(ctx, q.Probe); err != nil {
		ll.log.Error("the prompt could not be sent again; the agent's error goes to the client", "session", sid, "err", err)
		return proxy.Verdict{}
	}
	return proxy.Verdict{Do: proxy.Drop}
}

// Again takes a client request again whose error answer unserved
// dropped: the agent never ran it on the session it named. Its turn is
// taken back, and it waits, as a request that comes while its session is
// rebuilt waits, for the agent that is up now.
func (ll *Lifeline) Again(_ context.Context, f *proxy.Frame) proxy.Verdict {
	sid := wire.SessionIDOf(f)
	if f.Env.MethodIs(wire.Prompt) && sid != "" {
		ll.led.Update(func(fl *ledger.Flight) { fl.Unsent(ledger.Key(f.Env.ID), sid, true) })
		ll.ops.TakeBack(sid)
	}
	return ll.holdAfter(f, sid, nil, ll.life.Gen())
}

package switchboard

import (
	"fmt"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// answers hold each client request to one answer, the switchboard's own and
// its agents' alike, by a ledger's Respond, as each agent's chain holds the
// answers behind it (intercept.Chain.WithAnswers). A request the
// switchboard hands to an agent is noted as the agent's to answer (Sent);
// one it keeps (a move, a request no agent could take) is its own (Taken).
type answers struct {
	led    *ledger.Ledger
	port   *proxy.ClientPort // where the switchboard's own answers go
	strict bool              // a broken rule is a panic (Config.Strict)
	log    *slog.Logger
}

// take notes a client request as it comes, before anyone may answer it.
func (a *answers) take(id []byte, method, sid string) {
	a.led.Take(ledger.Key(id), method, sid)
}

// respond is the one way the switchboard answers a client request it took
// itself: the answer and what goes with it (a move's update and reply
// text), as one run. A request the switchboard handed to an agent is that
// agent's to answer, through its relay, which holds it to one answer; the
// switchboard answering it too would be a second answer, so it is dropped
// and reported as the bug it is.
func (a *answers) respond(id []byte, lines ...[]byte) {
	key := ledger.Key(id)
	if q, ok := a.led.Request(key); ok && q.State == ledger.Sent {
		a.bug("the switchboard answered a request an agent owes the answer to; its answer is dropped", id)
		return
	}
	if _, first := a.led.Respond(key); !first {
		a.bug("the switchboard answered a request that had its answer already; its answer is dropped", id)
		return
	}
	for _, l := range lines {
		a.send(l)
	}
}

// agents holds an agent's answer to the client request under id to the
// rule: false, and the answer is dropped, when the switchboard answered
// the request already.
func (a *answers) agents(id []byte) bool {
	if _, first := a.led.Respond(ledger.Key(id)); !first {
		a.bug("an agent answered a request the switchboard had answered; the agent's answer is dropped", id)
		return false
	}
	return true
}

// at notes whether the client request under id is an agent's to answer
// (ledger.Sent, with the agent it went to) or the switchboard's
// (ledger.Taken).
func (a *answers) at(id []byte, req *pendingReq, st ledger.State) {
	a.led.Update(func(f *ledger.Flight) {
		q := f.Requests.Note(ledger.Key(id), req.method, req.sid)
		q.State, q.Agent = st, ""
		if st == ledger.Sent {
			q.Agent = req.agent
		}
	})
}

// sent is the client request under id that an agent owes the answer to,
// and false when no agent does.
func (a *answers) sent(id []byte) (pendingReq, bool) {
	q, ok := a.led.Request(ledger.Key(id))
	if !ok || q.State != ledger.Sent || q.Agent == "" {
		return pendingReq{}, false
	}
	return pendingReq{agent: q.Agent, method: q.Method, sid: q.Session}, true
}

// owing are the agents that owe an answer to a client request.
func (a *answers) owing() map[string]bool {
	var out map[string]bool
	a.led.Update(func(f *ledger.Flight) { out = f.Requests.Agents() })
	return out
}

// bug reports a broken rule of one answer per request: logged, or under
// Strict a panic.
func (a *answers) bug(msg string, id []byte) {
	if a.strict {
		panic(fmt.Sprintf("acp-sidecar: %s (id %s)", msg, id))
	}
	a.log.Error(msg, "id", string(id))
}

// send writes one frame of the switchboard's own to the client.
func (a *answers) send(line []byte) {
	if err := a.port.Send(line); err != nil {
		a.log.Warn("write to the client failed", "err", err)
	}
}

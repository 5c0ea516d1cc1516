package ledger

import "sort"

// Requests are the client's requests in flight and what became of their
// answers, and the agent's requests the client owes an answer. It holds
// the one answer rule (Respond): every answer to a client request, whoever
// gives it, passes here once.
type Requests struct {
	requests map[string]*Request // client request id token -> request
	// answered are the ids of the last requests answered, oldest first in
	// answeredRing: an agent's answer to one of them is a second answer.
	answered     map[string]bool
	answeredRing []string
	// agentAsks are the agent's requests the client owes an answer;
	// staleAsks those of an agent that died, whose late answers nobody wants.
	agentAsks, staleAsks map[string]bool
	// prompts counts the recorded prompts in flight: chunks are read only
	// while some prompt runs.
	prompts int
}

// promptMethod is the one method whose requests are counted while in
// flight: chunks are read only while some prompt runs.
const promptMethod = "session/prompt"

// keepAnswered bounds how many answered ids the ledger remembers. A second
// answer comes right after the first in every agent seen to send one, so
// the last thousand ids are plenty.
const keepAnswered = 1024

// Note takes a client request into the ledger, or returns the one already
// there under id. Each stage that needs it sets what it owes on the result.
func (b *Requests) Note(id, method, sid string) *Request {
	q := b.requests[id]
	if q == nil {
		q = &Request{Method: method, Session: sid}
		b.requests[id] = q
		delete(b.answered, id) // the client uses the id again
	}
	if q.Session == "" {
		q.Session = sid
	}
	return q
}

// Record marks a request as one whose response the record waits for, and
// returns it, for the record to keep its frame (Request.Frame).
func (b *Requests) Record(id, method, sid string) *Request {
	q := b.Note(id, method, sid)
	if !q.Recorded && method == promptMethod {
		b.prompts++
	}
	q.Recorded = true
	return q
}

// Respond is the one gate of every answer to a client request, whoever
// gives it: the agent, a stage, a rebuild, the agent's death, the relay's
// stop. The first answer to id takes the request out of the ledger and
// returns it, with first true; an answer to an id answered already, and
// not taken again since (Note), finds first false, and its sender must
// drop it: a second answer is a bug of whoever sent it. An id the ledger
// never noted is a first answer, and returns the zero Request.
func (b *Requests) Respond(id string) (q Request, first bool) {
	r := b.requests[id]
	if r == nil {
		if b.answered[id] {
			return Request{}, false
		}
		b.remember(id)
		return Request{}, true
	}
	b.take(id, r)
	b.remember(id)
	return *r, true
}

// Agents are the agents behind a switchboard that owe an answer to a
// client request (Request.Agent).
func (b *Requests) Agents() map[string]bool {
	out := map[string]bool{}
	for _, q := range b.requests {
		if q.State == Sent && q.Agent != "" {
			out[q.Agent] = true
		}
	}
	return out
}

// Owed takes out the client requests the agent was sent and has not
// answered, by id, for the caller to answer: the relay is stopping.
func (b *Requests) Owed() []GoneRequest {
	var owed []GoneRequest
	for id, q := range b.requests {
		if q.State == Sent {
			owed = append(owed, GoneRequest{ID: id, Method: q.Method})
			b.Respond(id) // the caller answers it
		}
	}
	sort.Slice(owed, func(i, j int) bool { return owed[i].ID < owed[j].ID })
	return owed
}

// AgentAsked notes a request of the agent's to the client. An agent that
// came back reuses its predecessor's ids; this one's answer is wanted.
func (b *Requests) AgentAsked(id string) {
	b.agentAsks[id] = true
	delete(b.staleAsks, id)
}

// ClientAnswered notes the client's answer to an agent's request, and says
// whether nobody wants it any more: the agent that asked has died.
func (b *Requests) ClientAnswered(id string) (stale bool) {
	if b.staleAsks[id] {
		delete(b.staleAsks, id)
		return true
	}
	delete(b.agentAsks, id)
	return false
}

// agentGone takes out everything the dead agent had: the requests it was
// sent are returned for the caller to answer, those it never got are
// dropped with it, and its own requests become stale.
func (b *Requests) agentGone() []GoneRequest {
	sent := b.Owed()
	b.requests = map[string]*Request{}
	b.prompts = 0
	for id := range b.agentAsks {
		b.staleAsks[id] = true
	}
	b.agentAsks = map[string]bool{}
	return sent
}

// unsent takes back a request whose write to the agent failed. It is not
// answered: it waits, and its answer is still its first.
func (b *Requests) unsent(id string) {
	if r := b.requests[id]; r != nil {
		b.take(id, r)
	}
}

// take takes request r under id out of the ledger, keeping the counters
// true.
func (b *Requests) take(id string, r *Request) {
	delete(b.requests, id)
	if r.Recorded && r.Method == promptMethod {
		b.prompts--
	}
}

// remember notes id as answered, forgetting the oldest past keepAnswered.
func (b *Requests) remember(id string) {
	if b.answered[id] {
		return
	}
	if len(b.answeredRing) >= keepAnswered {
		delete(b.answered, b.answeredRing[0])
		b.answeredRing = b.answeredRing[1:]
	}
	b.answered[id] = true
	b.answeredRing = append(b.answeredRing, id)
}

// promptOf is a prompt of client session sid that the record waits for
// and whose turn has not begun, nil for none.
func (b *Requests) promptOf(sid string) *Request {
	for _, q := range b.requests {
		if q.Method == promptMethod && q.Recorded && q.Session == sid && !q.Began {
			return q
		}
	}
	return nil
}

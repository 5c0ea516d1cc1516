package intercept

import (
	"bytes"
	"context"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// One answer per client request (doc.go, "Verdicts"): the chain holds
// every answer to a client request to it, through the ledger's Respond,
// whoever gives it. The agent's answers, a stage's at once (Answer), a
// stage's later (a Hold's or a Defer's decision, and what a rebuild or the
// waiting room decides in it) meet it here; the agent's death and the
// relay's stop answer what the ledger says the agent owes, taken out by
// the same Respond (Flight.Owed). The chain notes each client request in
// the ledger as it comes (Ledger.Take), so a stage's answer is checked like
// the agent's, and a client that uses an id again is not taken for a
// second answer.

// WithAnswers holds the chain's answers to the one-answer rule, against
// led; strict makes a broken rule a panic, as every test runs it
// (proxy.Config.Strict). Without it (--record=false builds no ledger) the
// relay's own check of each Later's decision is all there is.
func (c *Chain) WithAnswers(led *ledger.Ledger, strict bool) *Chain {
	c.answers, c.strict = led, strict
	return c
}

// gated decides a request or a response under the one-answer rule.
func (c *Chain) gated(ctx context.Context, f *proxy.Frame) proxy.Verdict {
	id := ledger.Key(f.Env.ID)
	if id == "null" {
		// An answer under a null id cannot be told from the error for a
		// request nobody could read, and some agents take a request with
		// a null id for a notification: nothing to hold it to.
		return c.run(ctx, f, nil, 0)
	}
	switch {
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse:
		q, first := c.answers.Respond(id)
		if !first {
			// A response to an id nobody sent is valid JSON, and passes
			// for the client to judge (first); a second one never.
			c.log.Warn("the agent answered a request a second time; the second answer is dropped", "id", string(f.Env.ID))
			return proxy.Verdict{Do: proxy.Drop}
		}
		if q.Method != "" {
			ctx = ledger.WithAnswered(ctx, q)
		}
		return c.run(ctx, f, nil, 0)
	case f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindRequest:
		c.answers.Take(id, string(f.Env.Method), wire.SessionIDOf(f))
		return c.answering(f, c.run(ctx, f, nil, 0))
	}
	return c.run(ctx, f, nil, 0)
}

// answering holds verdict v on client request f to the rule: an answer now
// is the request's first, and a decision later is checked when it comes.
func (c *Chain) answering(f *proxy.Frame, v proxy.Verdict) proxy.Verdict {
	rawID, method := bytes.Clone(f.Env.ID), string(f.Env.Method)
	switch v.Do {
	case proxy.Answer:
		if _, first := c.answers.Respond(ledger.Key(rawID)); !first {
			c.bug("a stage answered a request that had its answer already; the answer is dropped", method, rawID)
			return proxy.Verdict{Do: proxy.Drop}
		}
	case proxy.Hold, proxy.Defer:
		later := v.Later
		v.Later = func(ctx context.Context) proxy.Decision {
			var d proxy.Decision
			if later != nil {
				d = later(ctx)
			}
			return c.decided(rawID, method, d)
		}
	}
	return v
}

// decided holds a later decision on the client request under rawID to the
// rule: forwarded to the agent (which answers), or answered once; an answer
// beyond the first is dropped, and a request neither forwarded nor
// answered gets an error, so its sender never waits for ever.
func (c *Chain) decided(rawID []byte, method string, d proxy.Decision) proxy.Decision {
	forwarded, answered := false, false
	for _, l := range d.Forward {
		if env, err := proxy.Scan(l); err == nil && env.Kind == proxy.KindRequest && bytes.Equal(env.ID, rawID) {
			forwarded = true
		}
	}
	id := ledger.Key(rawID)
	kept := d.Answer[:0:0]
	for _, l := range d.Answer {
		if env, err := proxy.Scan(l); err == nil && env.Kind == proxy.KindResponse && bytes.Equal(env.ID, rawID) {
			if forwarded || answered {
				c.bug("a stage answered a request twice; the extra answer is dropped", method, rawID)
				continue
			}
			if _, first := c.answers.Respond(id); !first {
				c.bug("a stage answered a request that had its answer already; the answer is dropped", method, rawID)
				continue
			}
			answered = true
		}
		kept = append(kept, l)
	}
	if !forwarded && !answered {
		if _, first := c.answers.Respond(id); first {
			c.bug("a stage took a request and never answered it; it gets an error", method, rawID)
			kept = append(kept, proxy.ErrorResponse(rawID, proxy.CodeInternalError, "Internal error: acp-sidecar lost this request; send it again"))
		}
	}
	d.Answer = kept
	return d
}

// bug reports a broken rule of one answer per request: logged, or under
// strict a panic that names the request.
func (c *Chain) bug(msg, method string, id []byte) {
	c.log.Error(msg, "method", method, "id", string(id))
	if c.strict {
		panic(fmt.Sprintf("acp-sidecar strict answers: %s (%s, id %s)", msg, method, id))
	}
}

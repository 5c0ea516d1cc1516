package intercept

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// verdictStage is a stage whose verdict on each client request is the test's.
type verdictStage func(f *proxy.Frame) proxy.Verdict

func (d verdictStage) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest
}

func (d verdictStage) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	return d(f), nil
}

func (d verdictStage) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

// deferred is a Defer whose decision is d.
func deferred(d proxy.Decision) proxy.Verdict {
	return proxy.Verdict{Do: proxy.Defer, Later: func(context.Context) proxy.Decision { return d }}
}

func response(id string) []byte { return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`) }

// TestOneAnswerThroughTheLedger: every answer to a client request meets
// the ledger's Respond in the chain, whoever gives it. A Later's second
// answer, an answer after the agent's, and the agent's answer after a
// stage's are dropped; a Later that neither forwards nor answers gets an
// error; a client that uses an id again gets its answer.
func TestOneAnswerThroughTheLedger(t *testing.T) {
	ctx := context.Background()
	req := func(id string) *proxy.Frame {
		return scanFrame(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	}
	agentAnswer := func(c *Chain, id string) proxy.Verdict {
		return c.Frame(ctx, scanFrame(t, proxy.AgentToClient, string(response(id))))
	}
	answersTo := func(d proxy.Decision, id string) int {
		n := 0
		for _, l := range d.Answer {
			if strings.Contains(string(l), `"id":`+id+`,`) {
				n++
			}
		}
		return n
	}
	verdicts := map[string]proxy.Verdict{}
	stage := verdictStage(func(f *proxy.Frame) proxy.Verdict { return verdicts[string(f.Env.ID)] })
	led := ledger.New(nil)
	c := NewChain(nil, stage).WithAnswers(led, false)

	verdicts["1"] = deferred(proxy.Decision{Answer: [][]byte{response("1"), response("1")}})
	if d := c.Frame(ctx, req("1")).Later(ctx); answersTo(d, "1") != 1 {
		t.Errorf("a Later that answers twice: %d answers reach the client, want 1", answersTo(d, "1"))
	}

	verdicts["2"] = deferred(proxy.Decision{})
	d := c.Frame(ctx, req("2")).Later(ctx)
	if answersTo(d, "2") != 1 || !strings.Contains(string(d.Answer[0]), `"error"`) {
		t.Errorf("a Later that neither forwards nor answers: %q, want one error", d.Answer)
	}

	// The agent answers first (the request went on); the stage's later
	// answer is a second one.
	verdicts["3"] = deferred(proxy.Decision{Answer: [][]byte{response("3")}})
	v := c.Frame(ctx, req("3"))
	if agentAnswer(c, "3").Do == proxy.Drop {
		t.Fatal("the agent's first answer was dropped")
	}
	if d := v.Later(ctx); answersTo(d, "3") != 0 {
		t.Errorf("a stage's answer after the agent's reached the client")
	}

	// The stage answers at once; the agent's answer is then a second.
	verdicts["4"] = proxy.Verdict{Do: proxy.Answer, Line: response("4")}
	if v := c.Frame(ctx, req("4")); v.Do != proxy.Answer {
		t.Errorf("a stage's first answer: verdict %v, want it answered", v.Do)
	}
	if agentAnswer(c, "4").Do != proxy.Drop {
		t.Error("the agent's answer after a stage's was not dropped")
	}

	// The client uses id 4 again: its answer is a first one.
	verdicts["4"] = proxy.Verdict{}
	c.Frame(ctx, req("4"))
	if agentAnswer(c, "4").Do == proxy.Drop {
		t.Error("the answer to an id the client sent again was dropped")
	}

	// The agent's death answers what it had, through the same gate: its
	// late answer is a second one.
	verdicts["5"] = proxy.Verdict{}
	c.Frame(ctx, req("5"))
	led.Update(func(f *ledger.Flight) { f.Requests.Note("5", "session/prompt", "s1").State = ledger.Sent })
	var gone ledger.Gone
	led.Update(func(f *ledger.Flight) { gone = f.AgentGone(1) })
	if len(gone.Sent) != 1 || gone.Sent[0].ID != "5" {
		t.Fatalf("the death's requests: %+v, want 5", gone.Sent)
	}
	if agentAnswer(c, "5").Do != proxy.Drop {
		t.Error("an answer after the death's error was not dropped")
	}
}

// TestOneAnswerStrict: under strict a stage's broken rule is a panic that
// names the request, as every test of the sidecar runs it.
func TestOneAnswerStrict(t *testing.T) {
	ctx := context.Background()
	stage := verdictStage(func(*proxy.Frame) proxy.Verdict {
		return deferred(proxy.Decision{Answer: [][]byte{response("9"), response("9")}})
	})
	c := NewChain(nil, stage).WithAnswers(ledger.New(nil), true)
	v := c.Frame(ctx, scanFrame(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{}}`))
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "id 9") {
			t.Errorf("panic %v, want one naming id 9", p)
		}
	}()
	v.Later(ctx)
}

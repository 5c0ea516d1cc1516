package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestHoldVerdictKeepsThePlace: a request held by its verdict waits in its
// place; what the client sends after it waits behind it; Later's forward
// fills the place, in order.
func TestHoldVerdictKeepsThePlace(t *testing.T) {
	gate := make(chan struct{})
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		if !f.Env.MethodIs("held") {
			return Verdict{}
		}
		raw := append([]byte(nil), f.Raw...)
		return Verdict{Do: Hold, Later: func(context.Context) Decision {
			<-gate
			return Decision{Forward: [][]byte{raw}}
		}}
	})
	h := newHarness(t, Config{Hook: hook})
	send(t, h.clientW, `{"jsonrpc":"2.0","id":1,"method":"held"}`)
	send(t, h.clientW, `{"jsonrpc":"2.0","method":"after"}`)
	close(gate)
	for _, want := range []string{`{"jsonrpc":"2.0","id":1,"method":"held"}`, `{"jsonrpc":"2.0","method":"after"}`} {
		if got := recv(t, h.toAgent); got != want {
			t.Errorf("agent got %q, want %q", got, want)
		}
	}
}

// TestAHookBrokenAnswerIsNoted: the rule of one answer per request is the
// hook owner's to hold (intercept's Chain.WithAnswers); the relay, which
// sees only a Later's decision, notes one that breaks it and writes the
// decision as the hook made it, changing nothing.
func TestAHookBrokenAnswerIsNoted(t *testing.T) {
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		switch {
		case f.Env.MethodIs("twice"):
			return Verdict{Do: Defer, Later: func(context.Context) Decision {
				return Decision{Answer: [][]byte{
					[]byte(`{"jsonrpc":"2.0","id":1,"result":"first"}`),
					[]byte(`{"jsonrpc":"2.0","id":1,"result":"second"}`),
				}}
			}}
		case f.Env.MethodIs("never"):
			return Verdict{Do: Hold, Later: func(context.Context) Decision { return Decision{} }}
		}
		return Verdict{}
	})
	logs := &syncBuffer{}
	h := newLenientHarness(t, Config{Hook: hook, Log: slog.New(slog.NewTextHandler(logs, nil))})
	send(t, h.clientW, `{"jsonrpc":"2.0","id":1,"method":"twice"}`)
	for _, want := range []string{`{"jsonrpc":"2.0","id":1,"result":"first"}`, `{"jsonrpc":"2.0","id":1,"result":"second"}`} {
		if got := recv(t, h.toClient); got != want {
			t.Errorf("client got %q, want %q: the relay changes no decision", got, want)
		}
	}
	// The forgotten request is written as nothing; the plain request after
	// it reaches the agent, after the held one's place is released.
	send(t, h.clientW, `{"jsonrpc":"2.0","id":2,"method":"never"}`)
	send(t, h.clientW, `{"jsonrpc":"2.0","id":3,"method":"plain"}`)
	if got, want := recv(t, h.toAgent), `{"jsonrpc":"2.0","id":3,"method":"plain"}`; got != want {
		t.Errorf("agent got %q, want %q", got, want)
	}
	for _, want := range []string{"a hook answered a request twice", "id=1", "a hook took a request and never answered it", "id=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the relay's log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestStrictPanicsOnAHookBug: under Config.Strict a broken promise of one
// answer is a panic that names the request, so no test passes on it.
func TestStrictPanicsOnAHookBug(t *testing.T) {
	rule := answerOnce{log: slog.New(slog.DiscardHandler), strict: true} // no relay runs: only its rule
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(fmt.Sprint(p), "session/prompt, id 7") {
			t.Errorf("strict relay: recovered %v, want a panic naming the request", p)
		}
	}()
	rule.check(ClientToAgent, []byte("7"), "session/prompt", Decision{})
}

// TestPlacedRunsOnceTheAnswerHasItsPlace: Decision.Placed runs after the
// decision's answer has its place in the client's output, even while an
// earlier held frame keeps that output waiting, so an agent frame the
// owner lets come after it (a prompt that waited for a slash command, and
// the agent's answer to it) is never written before the answer. Placed
// itself has the agent send a frame and waits until that frame has its
// place: run before the answer's place was kept, that frame would go
// first.
func TestPlacedRunsOnceTheAnswerHasItsPlace(t *testing.T) {
	gate, held, afterKept := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var agentW io.Writer
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		raw := append([]byte(nil), f.Raw...)
		switch {
		case f.Env.MethodIs("slow"): // an agent frame held until gate
			return Verdict{Do: Hold, Later: func(context.Context) Decision {
				close(held) // its place is kept before Later runs
				<-gate
				return Decision{Forward: [][]byte{raw}}
			}}
		case f.Env.MethodIs("after"): // an agent frame that signals once its place is kept
			return Verdict{Do: Hold, Later: func(context.Context) Decision {
				close(afterKept)
				return Decision{Forward: [][]byte{raw}}
			}}
		case f.Env.MethodIs("command"): // a client request the sidecar answers
			return Verdict{Do: Defer, Later: func(context.Context) Decision {
				return Decision{Answer: [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"result":"done"}`)}, Placed: func() {
					sendAsync(agentW, `{"jsonrpc":"2.0","method":"after"}`)
					<-afterKept
				}}
			}}
		}
		return Verdict{}
	})
	h := newHarness(t, Config{Hook: hook})
	agentW = h.agentW
	send(t, h.agentW, `{"jsonrpc":"2.0","method":"slow"}`)
	<-held // the client's output now waits for it
	send(t, h.clientW, `{"jsonrpc":"2.0","id":1,"method":"command"}`)
	<-afterKept
	close(gate)
	for _, want := range []string{`{"jsonrpc":"2.0","method":"slow"}`, `{"jsonrpc":"2.0","id":1,"result":"done"}`, `{"jsonrpc":"2.0","method":"after"}`} {
		if got := recv(t, h.toClient); got != want {
			t.Errorf("client got %q, want %q", got, want)
		}
	}
}

package proxy

import (
	"context"
	"fmt"
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

// TestEveryTakenRequestGetsOneAnswer: a hook that answers a request twice,
// or never, is held to one answer by the relay (jsonrpc2's MustReply, as a
// rule of the relay): the extra answer is dropped, and the forgotten
// request gets an error, so no client waits for ever.
func TestEveryTakenRequestGetsOneAnswer(t *testing.T) {
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		switch {
		case f.Env.MethodIs("twice"):
			return Verdict{Do: Defer, Later: func(context.Context) Decision {
				return Decision{Answer: [][]byte{
					[]byte(`{"jsonrpc":"2.0","method":"note"}`),
					[]byte(`{"jsonrpc":"2.0","id":1,"result":"first"}`),
					[]byte(`{"jsonrpc":"2.0","id":1,"result":"second"}`),
				}}
			}}
		case f.Env.MethodIs("never"):
			return Verdict{Do: Hold, Later: func(context.Context) Decision { return Decision{} }}
		case f.Env.MethodIs("both"):
			raw := append([]byte(nil), f.Raw...)
			return Verdict{Do: Hold, Later: func(context.Context) Decision {
				return Decision{Forward: [][]byte{raw}, Answer: [][]byte{[]byte(`{"jsonrpc":"2.0","id":3,"result":"extra"}`)}}
			}}
		}
		return Verdict{}
	})
	h := newLenientHarness(t, Config{Hook: hook})
	send(t, h.clientW, `{"jsonrpc":"2.0","id":1,"method":"twice"}`)
	for _, want := range []string{`{"jsonrpc":"2.0","method":"note"}`, `{"jsonrpc":"2.0","id":1,"result":"first"}`} {
		if got := recv(t, h.toClient); got != want {
			t.Errorf("client got %q, want %q", got, want)
		}
	}
	send(t, h.clientW, `{"jsonrpc":"2.0","id":2,"method":"never"}`)
	if got, want := recv(t, h.toClient), `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error: acp-sidecar lost this request; send it again"}}`; got != want {
		t.Errorf("client got %q for the forgotten request, want %q", got, want)
	}
	send(t, h.clientW, `{"jsonrpc":"2.0","id":3,"method":"both"}`)
	if got, want := recv(t, h.toAgent), `{"jsonrpc":"2.0","id":3,"method":"both"}`; got != want {
		t.Errorf("agent got %q, want the forwarded request", got)
	}
	send(t, h.clientW, `{"jsonrpc":"2.0","id":4,"method":"plain"}`)
	if got, want := recv(t, h.toAgent), `{"jsonrpc":"2.0","id":4,"method":"plain"}`; got != want {
		t.Errorf("agent got %q, want %q", got, want)
	}
	// The forwarded request's extra answer never reached the client: the
	// next thing it gets is the agent's answer.
	send(t, h.agentW, `{"jsonrpc":"2.0","id":4,"result":"agent"}`)
	if got, want := recv(t, h.toClient), `{"jsonrpc":"2.0","id":4,"result":"agent"}`; got != want {
		t.Errorf("client got %q, want %q (and no second answer to request 3)", got, want)
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

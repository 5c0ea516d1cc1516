package intercept_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// pinger answers the client's _example/ping itself: the agent never sees it.
type pinger struct{}

// Claims looks at the peeked envelope only.
func (pinger) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest && string(env.Method) == "_example/ping"
}

func (pinger) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	return proxy.Verdict{Do: proxy.Answer, Line: wire.Response(f.Env.ID, []byte(`"pong"`))}, nil
}

// renamer sends a method the agent knows by its old name under the new one.
// It returns new bytes; f.Raw is never changed.
type renamer struct{}

func (renamer) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	return string(env.Method) == "_example/old"
}

func (renamer) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	line := bytes.Replace(f.Raw, []byte(`"_example/old"`), []byte(`"_example/new"`), 1)
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
}

// observer notes every method it is offered and lets the frame pass.
type observer struct{}

func (observer) Claims(_ proxy.Direction, env *proxy.Envelope) bool { return env.Method != nil }

func (observer) Intercept(_ context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	fmt.Printf("  observer saw %s\n", f.Env.Method)
	return proxy.Verdict{}, nil // the zero Verdict passes the frame on
}

// A chain offers each frame to its stages in the order NewChain lists them.
// The first stage that does anything but pass decides; a rewrite is scanned
// again and offered to the stages after it, so they see the frame as it will
// leave. cmd/acp-sidecar's buildChain lists the sidecar's own stages the same
// way (lifeline, emulation, commands, record, ids, pickers, tracker), with
// WithAnswers holding every answer to a client request to one.
func ExampleNewChain() {
	chain := intercept.NewChain(nil, pinger{}, renamer{}, observer{}).WithAnswers(ledger.New(nil), true)
	fmt.Println(chain)

	actions := map[proxy.Action]string{proxy.Pass: "pass", proxy.Rewrite: "rewrite", proxy.Answer: "answer"}
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"_example/ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"_example/old","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`,
	} {
		env, err := proxy.Scan([]byte(raw))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(raw)
		v := chain.Frame(context.Background(), &proxy.Frame{Dir: proxy.ClientToAgent, Raw: []byte(raw), Env: env})
		fmt.Printf("  %s %s\n", actions[v.Do], v.Line)
	}
	// Output:
	// pinger → renamer → observer
	// {"jsonrpc":"2.0","id":1,"method":"_example/ping"}
	//   answer {"jsonrpc":"2.0","id":1,"result":"pong"}
	// {"jsonrpc":"2.0","id":2,"method":"_example/old","params":{}}
	//   observer saw _example/new
	//   rewrite {"jsonrpc":"2.0","id":2,"method":"_example/new","params":{}}
	// {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}
	//   observer saw session/cancel
	//   pass
}

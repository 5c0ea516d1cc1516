package switchboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"

	"go.uber.org/goleak"

	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The harness runs a switchboard with agents a (the default) and b, each
// behind a real relay on the switchboard's port, with no chain. The test
// plays the client and both agents over in-memory pipes; the recorders are
// fakes whose moves succeed, or wait while a test holds them.

// waitBound turns a hang into a failure; nothing asserts how long anything
// takes.
const waitBound = 10 * time.Second

type fakeAgent struct {
	w   *io.PipeWriter // the agent's output
	got chan string    // what the agent receives
}

// lines reads r into a channel, as a pipe's buffer would hold it, so no
// writer waits for the test to read; it ends with r.
func lines(r io.Reader) chan string {
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			ch <- strings.TrimSuffix(l, "\n")
		}
	}()
	return ch
}

type fakeRecorder struct {
	adopt chan struct{} // when set, Adopt waits for it to close
}

func (f *fakeRecorder) Lend(context.Context, string) (func(bool), error) { return func(bool) {}, nil }

func (f *fakeRecorder) Adopt(ctx context.Context, sid string) (rebuild.SwitchReport, error) {
	if f.adopt != nil {
		select {
		case <-f.adopt:
		case <-ctx.Done():
			return rebuild.SwitchReport{}, ctx.Err()
		}
	}
	return rebuild.SwitchReport{SessionID: sid, Options: json.RawMessage(`[]`)}, nil
}

func (f *fakeRecorder) Revive(context.Context, string) error { return nil }

func (f *fakeRecorder) ConfigOptions(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`[]`), nil
}

type swHarness struct {
	t        *testing.T
	sw       *Switchboard
	clientW  *io.PipeWriter
	toClient chan string
	recs     map[string]*fakeRecorder
	done     chan error

	mu     sync.Mutex
	agents map[string]*fakeAgent
	start  map[string]chan struct{} // closed when the agent has started
	wg     sync.WaitGroup
}

func newSwHarness(t *testing.T) *swHarness {
	t.Helper()
	cIn, cW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	h := &swHarness{
		t: t, clientW: cW, toClient: lines(toClientR), done: make(chan error, 1),
		recs:   map[string]*fakeRecorder{"a": {}, "b": {}},
		agents: map[string]*fakeAgent{}, start: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})},
	}
	port := proxy.NewClientPort(proxy.PortConfig{In: cIn, Out: toClientW})
	h.sw = New(Config{
		Agents:  []AgentRef{{Name: "a", Command: []string{"agent-a"}}, {Name: "b", Command: []string{"agent-b"}}},
		Default: "a", Port: port, Store: state.NewMemory(), Start: h.startAgent, Strict: true,
	})
	go func() { h.done <- h.sw.Run(context.Background()) }()
	t.Cleanup(func() {
		cW.Close()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitBound):
			t.Errorf("Run did not return")
		}
		h.wg.Wait()
		toClientR.Close()
	})
	return h
}

// startAgent is the switchboard's Start: a relay on the port, whose agent
// the test plays.
func (h *swHarness) startAgent(ctx context.Context, name string, out proxy.Egress) (*Backend, error) {
	aOutR, aOutW := io.Pipe()
	toAgentR, toAgentW := io.Pipe()
	eof := make(chan struct{})
	relay := proxy.NewRelay(proxy.Config{
		Client: h.sw.cfg.Port, Egress: out, AgentIn: toAgentW, AgentOut: aOutR,
		OnClientEOF: func() { close(eof) }, Strict: true,
	})
	ended := make(chan struct{})
	h.wg.Go(func() {
		defer close(ended)
		if err := relay.Run(ctx); err != nil {
			h.t.Errorf("relay %s: %v", name, err)
		}
	})
	// The agent exits at its client's EOF.
	h.wg.Go(func() {
		<-eof
		aOutW.Close()
	})
	h.mu.Lock()
	h.agents[name] = &fakeAgent{w: aOutW, got: lines(toAgentR)}
	close(h.start[name])
	h.mu.Unlock()
	return &Backend{Rec: h.recs[name], Relay: relay, Done: ended, Stop: func() { relay.CloseClient(); <-ended }}, nil
}

func (h *swHarness) agent(name string) *fakeAgent {
	h.t.Helper()
	select {
	case <-h.start[name]:
	case <-time.After(waitBound):
		h.t.Fatalf("agent %s was not started", name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents[name]
}

func (h *swHarness) client(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.clientW, line+"\n"); err != nil {
		h.t.Fatalf("client write: %v", err)
	}
}

// agentSays writes frames from the agent, in order; it returns at once.
func (h *swHarness) agentSays(name string, lines ...string) {
	a := h.agent(name)
	go io.WriteString(a.w, strings.Join(lines, "\n")+"\n")
}

func next(t *testing.T, ch chan string, who string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatalf("%s's input ended", who)
		}
		return l
	case <-time.After(waitBound):
		t.Fatalf("%s got nothing", who)
		return ""
	}
}

func (h *swHarness) clientGets() string { return next(h.t, h.toClient, "the client") }

func (h *swHarness) agentGets(name string) string { return next(h.t, h.agent(name).got, "agent "+name) }

// handshake initializes both agents and opens session s1 on a.
func (h *swHarness) handshake() {
	h.t.Helper()
	h.client(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if got := h.agentGets("a"); !strings.Contains(got, `"method":"initialize"`) {
		h.t.Fatalf("a got %s, want the client's initialize", got)
	}
	h.agentSays("a", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true}}}}`)
	// The switchboard starts b to learn what it supports, and initializes
	// it with the client's parameters, through b's relay.
	got := h.agentGets("b")
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(got), &req); err != nil || req.Method != "initialize" || string(req.Params) != `{"protocolVersion":1}` {
		h.t.Fatalf("b got %s, want the client's initialize (%v)", got, err)
	}
	h.agentSays("b", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}`, req.ID))
	init := h.clientGets()
	if !strings.Contains(init, `"id":1`) || !strings.Contains(init, `"image":false`) || !strings.Contains(init, `"agents":["a","b"]`) {
		h.t.Fatalf("the client's initialize answer %s: want images refused (b takes none) and both agents named", init)
	}
	h.client(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	h.agentGets("a")
	h.agentSays("a", `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1","configOptions":[]}}`)
	if got := h.clientGets(); !strings.Contains(got, `"id":"_sidecar_agent"`) || !strings.Contains(got, `"currentValue":"a"`) {
		h.t.Fatalf("session/new answered %s, want the selector on a", got)
	}
}

func TestSwitchboardRoutesAndAddsTheSelector(t *testing.T) {
	h := newSwHarness(t)
	h.handshake()
	h.client(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	if got := h.agentGets("a"); !strings.Contains(got, `"id":3`) {
		t.Fatalf("a got %s, want the prompt", got)
	}
	h.agentSays("a", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"mode"}]}}}`)
	if got := h.clientGets(); !strings.Contains(got, `[{"id":"mode"},{`) || !strings.Contains(got, `"id":"_sidecar_agent"`) {
		t.Errorf("config_option_update reached the client as %s, want the selector after a's options", got)
	}
	h.agentSays("a", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`)
	if got := h.clientGets(); !strings.Contains(got, `"name":"agent"`) {
		t.Errorf("available_commands_update reached the client as %s, want /agent in it", got)
	}
	// b's requests get ids of the switchboard's; the client's answer goes
	// back to b under b's own id.
	h.agentSays("b", `{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{}}`)
	ask := h.clientGets()
	var m struct{ ID json.RawMessage }
	if err := json.Unmarshal([]byte(ask), &m); err != nil || !strings.HasPrefix(string(m.ID), askPrefix) {
		t.Fatalf("b's request reached the client as %s, want an id of the switchboard's", ask)
	}
	h.client(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"outcome":"ok"}}`)
	if got := h.agentGets("b"); got != `{"jsonrpc":"2.0","id":3,"result":{"outcome":"ok"}}` {
		t.Errorf("b got %s, want the client's answer under its own id", got)
	}
}

// TestSwitchboardMovesInOrder: the client's frames for a session that is
// moving wait for the move and then go, in order, to the agent it moved to;
// the agent it left is not heard from again for that session.
func TestSwitchboardMovesInOrder(t *testing.T) {
	h := newSwHarness(t)
	h.handshake()
	adopt := make(chan struct{})
	h.recs["b"].adopt = adopt
	h.client(`{"jsonrpc":"2.0","id":10,"method":"_sidecar/agent","params":{"sessionId":"s1","agent":"b"}}`)
	for i := range 3 {
		h.client(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1","n":%d}}`, i))
	}
	// A frame for no session goes on meanwhile, to the default agent.
	h.client(`{"jsonrpc":"2.0","id":11,"method":"session/list","params":{}}`)
	if got := h.agentGets("a"); !strings.Contains(got, `"id":11`) {
		t.Fatalf("a got %s while s1 was moving, want the list request", got)
	}
	close(adopt)
	if got := h.clientGets(); !strings.Contains(got, `"id":10`) || !strings.Contains(got, `"currentValue":"b"`) {
		t.Fatalf("the move answered %s, want the selector on b", got)
	}
	for i := range 3 {
		if got, want := h.agentGets("b"), fmt.Sprintf(`"n":%d`, i); !strings.Contains(got, want) {
			t.Fatalf("b got %s, want the cancel with %s", got, want)
		}
	}
	h.agentSays("a", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}}}`,
		`{"jsonrpc":"2.0","method":"_a/after"}`)
	if got := h.clientGets(); got != `{"jsonrpc":"2.0","method":"_a/after"}` {
		t.Errorf("the client got %s, want what a sent after its late chunk, and never the chunk", got)
	}
	h.agentSays("b", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"from b"}}}}`)
	if got := h.clientGets(); !strings.Contains(got, `"from b"`) {
		t.Errorf("the client got %s, want b's chunk", got)
	}
}

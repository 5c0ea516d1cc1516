package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// portHarness runs a ClientPort with two relays, a and b, over in-memory
// pipes. The test plays the client and both agents. Frames whose method
// starts with "b/" go to b, the rest to a.
type portHarness struct {
	port     *ClientPort
	relays   map[string]*Relay
	clientW  *io.PipeWriter
	toClient *bufio.Reader
	agentW   map[string]*io.PipeWriter
	toAgent  map[string]*bufio.Reader
	eof      map[string]chan struct{}

	toClientR *io.PipeReader
	toAgentR  map[string]*io.PipeReader
	portDone  chan error
	done      map[string]chan error
	stopOnce  sync.Once
}

// routeByMethod is the harness's route: the frame's method names its relay.
func (h *portHarness) route(ctx context.Context, f *Frame) {
	name := "a"
	if strings.HasPrefix(string(f.Env.Method), "b/") {
		name = "b"
	}
	if err := h.relays[name].Feed(ctx, f); err != nil {
		h.port.Send(ErrorResponse(f.Env.ID, CodeInternalError, err.Error()))
	}
}

func newPortHarness(t *testing.T, cfgs map[string]Config) *portHarness {
	t.Helper()
	cIn, cW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	h := &portHarness{
		relays: map[string]*Relay{}, clientW: cW, toClient: bufio.NewReaderSize(toClientR, 1<<20), toClientR: toClientR,
		agentW: map[string]*io.PipeWriter{}, toAgent: map[string]*bufio.Reader{}, toAgentR: map[string]*io.PipeReader{},
		eof: map[string]chan struct{}{}, done: map[string]chan error{}, portDone: make(chan error, 1),
	}
	h.port = NewClientPort(PortConfig{In: cIn, Out: toClientW})
	for _, name := range []string{"a", "b"} {
		cfg := cfgs[name]
		aOutR, aW := io.Pipe()
		toAgentR, toAgentW := io.Pipe()
		h.agentW[name], h.toAgentR[name], h.toAgent[name] = aW, toAgentR, bufio.NewReaderSize(toAgentR, 1<<20)
		eof := make(chan struct{})
		h.eof[name] = eof
		cfg.Client, cfg.AgentIn, cfg.AgentOut = h.port, toAgentW, aOutR
		cfg.OnClientEOF = func() { close(eof) }
		cfg.Strict = true
		r := NewRelay(cfg)
		h.relays[name] = r
		done := make(chan error, 1)
		h.done[name] = done
		go func() { done <- r.Run(context.Background()) }()
	}
	go func() { h.portDone <- h.port.Run(context.Background(), h.route) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop ends the client and both agents and waits for everything; it runs
// once.
func (h *portHarness) stop(t *testing.T) {
	h.stopOnce.Do(func() {
		h.clientW.Close()
		if err := <-h.portDone; err != nil {
			t.Errorf("port Run: %v", err)
		}
		go io.Copy(io.Discard, h.toClientR)
		for name, r := range h.relays {
			go io.Copy(io.Discard, h.toAgentR[name])
			r.CloseClient()
			h.agentW[name].Close()
			if err := <-h.done[name]; err != nil {
				t.Errorf("relay %s Run: %v", name, err)
			}
			h.toAgentR[name].Close()
		}
		if err := h.port.Flush(); err != nil {
			t.Errorf("port Flush: %v", err)
		}
		h.toClientR.Close()
	})
}

// TestPortNoDataDropped: both agents stream numbered frames at once, and
// the client streams numbered frames to both; every frame arrives whole,
// once, and in its sender's order.
func TestPortNoDataDropped(t *testing.T) {
	const n = 10000
	h := newPortHarness(t, nil)
	agentGot := map[string]chan []string{}
	for _, name := range []string{"a", "b"} {
		ch := make(chan []string, 1)
		agentGot[name] = ch
		go func() {
			var got []string
			for len(got) < n {
				line, err := h.toAgent[name].ReadString('\n')
				if err != nil {
					break
				}
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
			ch <- got
		}()
		go func() {
			for i := range n {
				fmt.Fprintf(h.agentW[name], `{"jsonrpc":"2.0","method":"from/%s","params":{"n":%d,"pad":"%s"}}`+"\n", name, i, strings.Repeat("x", i%300))
			}
		}()
	}
	go func() {
		for i := range n {
			fmt.Fprintf(h.clientW, `{"jsonrpc":"2.0","id":%d,"method":"a/n"}`+"\n", i)
			fmt.Fprintf(h.clientW, `{"jsonrpc":"2.0","id":"b%d","method":"b/n"}`+"\n", i)
		}
	}()
	next := map[string]int{}
	for range 2 * n {
		line := recv(t, h.toClient)
		var name string
		var i int
		if _, err := fmt.Sscanf(line, `{"jsonrpc":"2.0","method":"from/%1s","params":{"n":%d,`, &name, &i); err != nil {
			t.Fatalf("client got %.80q: %v", line, err)
		}
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"from/%s","params":{"n":%d,"pad":"%s"}}`, name, next[name], strings.Repeat("x", next[name]%300)); line != want {
			t.Fatalf("client got %.80q, want %.80q", line, want)
		}
		next[name]++
	}
	for name, ch := range agentGot {
		got := <-ch
		for i := range n {
			want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"a/n"}`, i)
			if name == "b" {
				want = fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d","method":"b/n"}`, i)
			}
			if i >= len(got) || got[i] != want {
				t.Fatalf("agent %s frame %d = %q, want %q", name, i, at(got, i), want)
			}
		}
	}
}

// TestPortHoldKeepsOnlyItsRelayWaiting: a frame one relay holds keeps that
// relay's later frames behind it, and none of the other relay's.
func TestPortHoldKeepsOnlyItsRelayWaiting(t *testing.T) {
	var relayA *Relay
	held := make(chan func(...[]byte), 1)
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		if f.Dir == AgentToClient && f.Env.MethodIs("held") {
			held <- relayA.Hold(AgentToClient)
			return Verdict{Do: Drop}
		}
		return Verdict{}
	})
	h := newPortHarness(t, map[string]Config{"a": {Hook: hook}})
	relayA = h.relays["a"]
	send(t, h.agentW["a"], `{"method":"held"}`)
	release := <-held
	send(t, h.agentW["a"], `{"method":"a after"}`)
	send(t, h.agentW["b"], `{"method":"b meanwhile"}`)
	if got := recv(t, h.toClient); got != `{"method":"b meanwhile"}` {
		t.Fatalf("client got %q first, want b's frame while a's is held", got)
	}
	go release([]byte(`{"method":"held","released":true}`))
	for _, want := range []string{`{"method":"held","released":true}`, `{"method":"a after"}`} {
		if got := recv(t, h.toClient); got != want {
			t.Errorf("client got %q, want %q", got, want)
		}
	}
}

// TestPortAnswersWhatNoRelayMayGet: a malformed line, an oversized
// request and a batch are answered by the port, and no relay sees any.
func TestPortAnswersWhatNoRelayMayGet(t *testing.T) {
	seen := make(chan string, 4)
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		if f.Dir == ClientToAgent {
			seen <- string(f.Raw)
		}
		return Verdict{}
	})
	cIn, cW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	defer toClientR.Close()
	port := NewClientPort(PortConfig{In: cIn, Out: toClientW, MaxFrame: 200})
	aIn, aInW := io.Pipe()
	aOutR, aOutW := io.Pipe()
	relay := NewRelay(Config{Client: port, AgentIn: aInW, AgentOut: aOutR, Hook: hook, Strict: true})
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(context.Background()) }()
	portDone := make(chan error, 1)
	go func() {
		portDone <- port.Run(context.Background(), func(ctx context.Context, f *Frame) { relay.Feed(ctx, f) })
	}()
	toClient := bufio.NewReader(toClientR)
	toAgent := bufio.NewReader(aIn)
	send(t, cW, `{"jsonrpc":"2.0","id":7,"method":`)
	if got := recv(t, toClient); !strings.Contains(got, `"id":7`) || !strings.Contains(got, `-32700`) {
		t.Errorf("malformed request answered %q, want a parse error under its id", got)
	}
	send(t, cW, `{"jsonrpc":"2.0","id":8,"method":"m","params":{"x":"`+strings.Repeat("y", 300)+`"}}`)
	if got := recv(t, toClient); !strings.Contains(got, `"id":8`) || !strings.Contains(got, `-32600`) {
		t.Errorf("oversized request answered %q, want an invalid request under its id", got)
	}
	send(t, cW, `[{"jsonrpc":"2.0","id":10,"method":"m"}]`)
	if got := recv(t, toClient); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"`+BatchMessage+`"}}` {
		t.Errorf("batch answered %q, want one invalid request with id null", got)
	}
	send(t, cW, `{"jsonrpc":"2.0","id":9,"method":"m"}`)
	if got := recv(t, toAgent); got != `{"jsonrpc":"2.0","id":9,"method":"m"}` {
		t.Errorf("agent got %q", got)
	}
	if got := <-seen; got != `{"jsonrpc":"2.0","id":9,"method":"m"}` {
		t.Errorf("the hook saw %q first, want only the valid frame", got)
	}
	cW.Close()
	if err := <-portDone; err != nil {
		t.Errorf("port Run: %v", err)
	}
	go io.Copy(io.Discard, aIn)
	relay.CloseClient()
	aOutW.Close()
	if err := <-relayDone; err != nil {
		t.Errorf("relay Run: %v", err)
	}
	if err := relay.Feed(t.Context(), &Frame{Raw: []byte(`{"id":1,"method":"m"}`)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Feed after the relay ended: %v, want ErrClosed", err)
	}
}

// TestCallAsClientTravelsTheHook: the request and its response meet the
// hook as the client's would, and the response never reaches the client.
func TestCallAsClientTravelsTheHook(t *testing.T) {
	seen := make(chan string, 4)
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		seen <- f.Dir.String() + " " + f.Env.Kind.String()
		return Verdict{}
	})
	h := newPortHarness(t, map[string]Config{"b": {Hook: hook}})
	go func() {
		line := recv(t, h.toAgent["b"])
		env, _ := Scan([]byte(line))
		fmt.Fprintf(h.agentW["b"], `{"jsonrpc":"2.0","id":%s,"result":{"asked":%s}}`+"\n", env.ID, env.ID)
		send(t, h.agentW["b"], `{"method":"after"}`)
	}()
	var res struct{ Asked string }
	if err := h.relays["b"].CallAsClient(t.Context(), "initialize", map[string]int{"protocolVersion": 1}, &res); err != nil {
		t.Fatalf("CallAsClient: %v", err)
	}
	if !strings.HasPrefix(res.Asked, AskIDPrefix) {
		t.Errorf("the agent saw id %q, want one of CallAsClient's", res.Asked)
	}
	if got := recv(t, h.toClient); got != `{"method":"after"}` {
		t.Errorf("client got %q, want only what came after the response", got)
	}
	for _, want := range []string{"client->agent request", "agent->client response"} {
		if got := <-seen; got != want {
			t.Errorf("hook saw %s, want %s", got, want)
		}
	}
}

// TestEgressHasTheLastWord: Egress rewrites and drops the agent's frames,
// the hook's answers and the sidecar's own, and sees each once.
func TestEgressHasTheLastWord(t *testing.T) {
	var mu sync.Mutex
	var saw []string
	egress := EgressFunc(func(_ context.Context, f *Frame) []byte {
		mu.Lock()
		saw = append(saw, string(f.Env.Method))
		mu.Unlock()
		switch {
		case f.Env.MethodIs("drop"):
			return nil
		case f.Env.MethodIs("rw"):
			return []byte(`{"method":"rewritten"}`)
		}
		return f.Raw
	})
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		if f.Dir == ClientToAgent && f.Env.MethodIs("ask") {
			return Verdict{Do: Answer, Line: []byte(`{"id":1,"result":"answered"}`)}
		}
		return Verdict{}
	})
	h := newPortHarness(t, map[string]Config{"a": {Hook: hook, Egress: egress}})
	send(t, h.agentW["a"], `{"method":"drop"}`)
	send(t, h.agentW["a"], `{"method":"rw"}`)
	if got := recv(t, h.toClient); got != `{"method":"rewritten"}` {
		t.Errorf("client got %q, want the rewrite alone", got)
	}
	send(t, h.clientW, `{"id":1,"method":"ask"}`)
	if got := recv(t, h.toClient); got != `{"id":1,"result":"answered"}` {
		t.Errorf("client got %q, want the hook's answer", got)
	}
	go h.relays["a"].Send(AgentToClient, []byte(`{"method":"own"}`))
	if got := recv(t, h.toClient); got != `{"method":"own"}` {
		t.Errorf("client got %q, want the sidecar's own frame", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(saw, ","); got != "drop,rw,,own" {
		t.Errorf("egress saw %s, want drop,rw,,own", got)
	}
}

// TestCloseClientIsTheClientsEOF: the agent's stdin ends, OnClientEOF runs,
// and Feed takes no more frames.
func TestCloseClientIsTheClientsEOF(t *testing.T) {
	h := newPortHarness(t, nil)
	h.relays["b"].CloseClient()
	<-h.eof["b"]
	if _, err := h.toAgent["b"].ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("b's stdin: %v, want EOF", err)
	}
	send(t, h.clientW, `{"jsonrpc":"2.0","id":3,"method":"b/m"}`)
	if got := recv(t, h.toClient); !strings.Contains(got, `"id":3`) || !strings.Contains(got, ErrClosed.Error()) {
		t.Errorf("client got %q, want the route's error for a relay that takes no more", got)
	}
	send(t, h.clientW, `{"jsonrpc":"2.0","id":4,"method":"a/m"}`)
	if got := recv(t, h.toAgent["a"]); got != `{"jsonrpc":"2.0","id":4,"method":"a/m"}` {
		t.Errorf("a got %q", got)
	}
}

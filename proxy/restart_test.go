package proxy

import (
	"bufio"
	"context"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// restartHook plays the part of intercept's lifeline across a restart: a
// client request passes while the agent is up and waits for the restarted
// agent's initialize while it is not, and a request whose write failed
// because the agent was gone (Unsent) waits for that initialize too.
type restartHook struct {
	gone atomic.Bool   // set by OnAgentExit, as the supervisor tells the lifeline there
	up   chan struct{} // closed once the restarted agent answered the sidecar's initialize
	// The hook stalls on a request of method stall: entered is closed
	// right after it decided the request as if the agent were up, and
	// release lets it go on.
	stall   string
	entered chan struct{}
	release chan struct{}
	started chan struct{} // closed when OnAgentStarted has run
	kept    chan struct{} // closed when a request comes back (Unsent)
	keep    sync.Once
}

var _ UnsentHook = (*restartHook)(nil)

func (h *restartHook) Frame(ctx context.Context, f *Frame) Verdict {
	if f.Dir != ClientToAgent || f.Env.Kind != KindRequest {
		return Verdict{}
	}
	if h.gone.Load() {
		return h.waitUp(f)
	}
	if string(f.Env.Method) == h.stall {
		close(h.entered)
		<-h.release
		// The bug needed this frame written after the relay had swapped
		// the new agent in. Before the fix nothing stopped the swap, and
		// OnAgentStarted follows it; with the fix the swap waits for this
		// frame, and the relay's goroutine parks on the frame-in-hand
		// lock. Whichever comes first, the frame goes on then, so the test
		// fails every time without the fix and passes every time with it.
		for !isClosed(h.started) && !parkedInAgentToClient() {
			select {
			case <-ctx.Done():
				return Verdict{}
			default:
				runtime.Gosched()
			}
		}
	}
	return Verdict{}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// parkedInAgentToClient reports whether the relay's agent goroutine waits
// for a sync.Mutex in agentToClient itself: with the fix, the swap waiting
// for the client's frame in hand. Nothing in the relay's API shows that
// wait, so the goroutine dump is read.
func parkedInAgentToClient() bool { return parkedIn("proxy.(*Relay).agentToClient(") }

func (h *restartHook) Unsent(ctx context.Context, f *Frame) Verdict {
	h.keep.Do(func() { close(h.kept) })
	return h.waitUp(f)
}

// waitUp holds f until the restarted agent is initialized, then forwards it.
func (h *restartHook) waitUp(f *Frame) Verdict {
	raw := append([]byte(nil), f.Raw...)
	return Verdict{Do: Hold, Later: func(ctx context.Context) Decision {
		select {
		case <-h.up:
			return Decision{Forward: [][]byte{raw}}
		case <-ctx.Done():
			return Decision{Answer: [][]byte{ErrorResponse(f.Env.ID, CodeInternalError, "relay stopped")}}
		}
	}}
}

// TestRequestAcrossRestartAfterInitialize is the ordering that commit
// dcf463c fixed: a client request that the hook decided while it still took
// the old agent for up, and that was written only after OnAgentExit had
// started the new agent, reached the new agent ahead of the sidecar's own
// initialize, and codex-acp answers that with -32600 "first ACP request
// must be initialize". The request is read after the old agent's output
// ended and the relay is done waiting for the frame in hand, and the hook
// returns only once OnAgentExit has returned, so the relay's swap and the
// request's write meet. The new agent must see the initialize that
// OnAgentStarted sends first, then the request, once.
func TestRequestAcrossRestartAfterInitialize(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const prompt = `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`
	hook := &restartHook{up: make(chan struct{}), stall: "session/prompt", entered: make(chan struct{}),
		release: make(chan struct{}), started: make(chan struct{}), kept: make(chan struct{})}
	gotLine := make(chan struct{}) // the new agent read its first line

	clientR, clientW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	a1InR, a1InW := io.Pipe()
	a1OutR, a1OutW := io.Pipe()
	a2InR, a2InW := io.Pipe()
	a2OutR, a2OutW := io.Pipe()
	go io.Copy(io.Discard, a1InR)

	var relay *Relay
	exits := 0 // OnAgentExit runs on the relay's agent goroutine only
	relay = NewRelay(Config{
		ClientIn: clientR, ClientOut: toClientW, AgentIn: a1InW, AgentOut: a1OutR,
		Hook: hook, Strict: true,
		OnAgentExit: func(context.Context) (io.Writer, io.Reader, bool) {
			exits++
			if exits > 1 {
				return nil, nil, false
			}
			// Sent only now, the request cannot be the frame in hand
			// that the relay waited for before it called OnAgentExit.
			go io.WriteString(clientW, prompt+"\n")
			select {
			case <-hook.entered:
			case <-ctx.Done():
				t.Error("the request never reached the hook")
				return nil, nil, false
			}
			// What the supervisor does here: the lifeline learns of the
			// exit, a new agent starts. The request was decided before.
			hook.gone.Store(true)
			defer close(hook.release)
			return a2InW, a2OutR, true
		},
		OnAgentStarted: func() {
			close(hook.started)
			go func() {
				// The supervisor initializes the new agent on a goroutine,
				// which may run late. This one runs once the request has
				// gone one way or the other: back to the hook, or to the
				// new agent, which must then fail the test.
				select {
				case <-hook.kept:
				case <-gotLine:
				case <-ctx.Done():
					return
				}
				if err := relay.Call(ctx, "initialize", map[string]any{"protocolVersion": 1}, nil); err != nil {
					t.Errorf("initialize the new agent: %v", err)
					return
				}
				close(hook.up)
			}()
		},
	})
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()

	// The new agent answers its first line (which must be the sidecar's
	// initialize) and records the rest until its stdin ends.
	got := make(chan []string, 1)
	go func() {
		defer a2OutW.Close()
		var lines []string
		defer func() { got <- lines }()
		br := bufio.NewReader(a2InR)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			lines = append(lines, line)
			if len(lines) == 1 {
				close(gotLine)
			}
			env, err := Scan([]byte(line))
			if err != nil || env.Kind != KindRequest {
				continue
			}
			io.WriteString(a2OutW, `{"jsonrpc":"2.0","id":`+string(env.ID)+`,"result":{}}`+"\n")
		}
	}()
	// The client keeps every answer to its request, to see it answered once.
	answered := make(chan string, 8)
	go func() {
		defer close(answered)
		br := bufio.NewReader(toClientR)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.Contains(line, `"id":7`) {
				answered <- strings.TrimSuffix(line, "\n")
			}
		}
	}()

	a1OutW.Close() // the old agent dies
	select {
	case line := <-answered:
		if line != `{"jsonrpc":"2.0","id":7,"result":{}}` {
			t.Errorf("the client got %s for its request, want the new agent's result", line)
		}
	case <-ctx.Done():
		t.Fatal("the request across the restart was never answered")
	}

	clientW.Close()
	lines := <-got
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	toClientR.Close()
	a1InR.Close()
	if extra := len(answered); extra > 0 {
		t.Errorf("the client's request was answered %d more times", extra)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"method":"initialize"`) || !strings.Contains(lines[0], `"id":"`+OwnIDPrefix) || lines[1] != prompt {
		t.Errorf("the new agent got %q, want the sidecar's initialize, then the request", lines)
	}
}

// endHook stalls on the first client request, deciding it as if the agent
// were up, until the relay's agent goroutine waits for it at the agent's
// end, or until OnAgentEnd has run without waiting. It notes the order in
// which the request came back (Unsent) and OnAgentEnd ran.
type endHook struct {
	mu     sync.Mutex
	events []string
	ended  chan struct{} // closed by OnAgentEnd
	first  chan struct{} // closed when the first request is in the hook
	once   sync.Once
}

func (h *endHook) note(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *endHook) Frame(ctx context.Context, f *Frame) Verdict {
	if f.Dir != ClientToAgent || f.Env.Kind != KindRequest {
		return Verdict{}
	}
	h.once.Do(func() {
		close(h.first)
		for !isClosed(h.ended) && !parkedIn("proxy.(*Relay).lockFrameInHand.func1(") {
			select {
			case <-ctx.Done():
				return
			default:
				runtime.Gosched()
			}
		}
	})
	return Verdict{}
}

func (h *endHook) Unsent(context.Context, *Frame) Verdict {
	h.note("unsent")
	return Verdict{Do: Drop}
}

// parkedIn reports whether a goroutine waits for a sync.Mutex in fn. A
// frame of the dump is a function line and its file line: the caller of
// Lock is two lines below it.
func parkedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		for i := 0; i+2 < len(lines); i++ {
			if strings.HasPrefix(lines[i], "sync.(*Mutex).Lock(") && strings.Contains(lines[i+2], fn) {
				return true
			}
		}
	}
	return false
}

// TestAgentEndWaitsForTheFrameInHand: the owner learns of the agent's end
// in OnAgentEnd only once the client's request in hand has been decided
// and written, or handed back. Told earlier, the owner took the request,
// decided as if the agent were up, for one the dead agent had, and the
// client got "the agent exited" for a request that then went to the
// restarted agent as well.
func TestAgentEndWaitsForTheFrameInHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	hook := &endHook{ended: make(chan struct{}), first: make(chan struct{})}
	clientR, clientW := io.Pipe()
	aInR, aInW := io.Pipe()
	aOutR, aOutW := io.Pipe()
	aInR.Close() // the agent reads nothing: every write to it fails
	relay := NewRelay(Config{
		ClientIn: clientR, ClientOut: io.Discard, AgentIn: aInW, AgentOut: aOutR,
		Hook: hook, Strict: true,
		OnAgentEnd: func() {
			hook.note("end")
			close(hook.ended)
		},
		OnAgentExit: func(context.Context) (io.Writer, io.Reader, bool) { return nil, nil, false },
	})
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	go io.WriteString(clientW, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`+"\n")
	select {
	case <-hook.first:
	case <-ctx.Done():
		t.Fatal("the request never reached the hook")
	}
	aOutW.Close() // the agent dies while its request is being decided
	select {
	case <-hook.ended:
	case <-ctx.Done():
		t.Fatal("OnAgentEnd never ran")
	}
	clientW.Close()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if strings.Join(hook.events, " ") != "unsent end" {
		t.Errorf("events %q, want the request handed back before OnAgentEnd", hook.events)
	}
}

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestRunsKeepOrder: frames that pass unchanged leave from the reader's
// buffer, in runs written later than their hook calls, while the next
// buffer is read. Whatever else reaches the client must still land where it
// would have landed had every frame been written at once: a frame the hook
// sends while deciding frame i lies right before it, a held frame keeps its
// place, a rewrite replaces its frame, and frames sent or held from
// elsewhere keep their own order. The agent writes through a real pipe, in
// writes that cut frames anywhere, with frames of every size from a few
// bytes to more than a read buffer.
func TestRunsKeepOrder(t *testing.T) {
	const n = 6000
	frame := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"m","params":{"i":%d,"pad":"%s"}}`, i, testPad(i))
	}
	var want []string
	for i := range n {
		switch {
		case i%97 == 0:
			want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"sent","params":{"before":%d}}`, i), frame(i))
		case i%101 == 0:
			want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"held","params":{"i":%d}}`, i))
		case i%89 == 0:
			want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"rewritten","params":{"i":%d}}`, i))
		default:
			want = append(want, frame(i))
		}
	}

	var relay *Relay
	// Errors of the hook and the senders, which may still run after a
	// failed test has returned: reported at its end.
	var errMu sync.Mutex
	var errs []string
	errorf := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	defer func() {
		errMu.Lock()
		defer errMu.Unlock()
		for _, e := range errs {
			t.Error(e)
		}
	}()
	var held sync.WaitGroup
	hook := HookFunc(func(_ context.Context, f *Frame) Verdict {
		if f.Dir != AgentToClient || !f.Env.MethodIs("m") {
			return Verdict{}
		}
		var i int
		if _, err := fmt.Sscanf(string(f.Raw), `{"jsonrpc":"2.0","method":"m","params":{"i":%d,`, &i); err != nil {
			errorf("frame %.60q: %v", f.Raw, err)
			return Verdict{}
		}
		switch {
		case i%97 == 0:
			if err := relay.Send(AgentToClient, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"sent","params":{"before":%d}}`, i))); err != nil {
				errorf("send: %v", err)
			}
		case i%101 == 0:
			release := relay.Hold(AgentToClient)
			held.Add(1)
			go func() {
				defer held.Done()
				release([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"held","params":{"i":%d}}`, i)))
			}()
			return Verdict{Do: Drop}
		case i%89 == 0:
			return Verdict{Do: Rewrite, Line: []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"rewritten","params":{"i":%d}}`, i))}
		}
		return Verdict{}
	})

	agentOutR, agentOutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	clientOutR, clientOutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	clientInR, clientInW := io.Pipe()
	relay = NewRelay(Config{ClientIn: clientInR, ClientOut: clientOutW, AgentIn: nopCloser{io.Discard}, AgentOut: agentOutR, Hook: hook, Strict: true})
	done := make(chan error, 1)
	go func() { done <- relay.Run(context.Background()) }()

	go func() { // the agent, cutting its stream at sizes that share no factor with a frame's
		defer agentOutW.Close()
		var all strings.Builder
		for i := range n {
			all.WriteString(frame(i) + "\n")
		}
		writeCut(agentOutW, []byte(all.String()), 3*ReadBufSize)
	}()
	// Frames of the sidecar's own from elsewhere: every holdEvery-th fills
	// a place held there, the others are sent.
	const others, holdEvery = 300, 8
	var sent sync.WaitGroup
	sent.Add(1)
	go func() { // frames of the sidecar's own from elsewhere, at any time
		defer sent.Done()
		releases := make(chan func(...[]byte))
		released := make(chan struct{})
		go func() { // places held from elsewhere, filled by another goroutine
			defer close(released)
			for k := 1; ; k += holdEvery {
				release, ok := <-releases
				if !ok {
					return
				}
				release([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"other","params":{"k":%d}}`, k)))
			}
		}()
		for k := range others {
			if k%holdEvery == 1 {
				releases <- relay.Hold(AgentToClient)
				continue
			}
			// Behind the place held before it, whenever that is filled.
			if err := relay.Send(AgentToClient, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"other","params":{"k":%d}}`, k))); err != nil {
				errorf("send other: %v", err)
			}
		}
		close(releases)
		<-released
	}()

	r := bufio.NewReaderSize(clientOutR, 1<<20)
	var got []string
	nextOther := 0
	for len(got) < len(want) || nextOther < others {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d frames: %v", len(got), err)
		}
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","method":"other"`) {
			if w := fmt.Sprintf(`{"jsonrpc":"2.0","method":"other","params":{"k":%d}}`, nextOther); line != w {
				t.Fatalf("own frame %d = %.80q, want %q", nextOther, line, w)
			}
			nextOther++
			continue
		}
		if i := len(got); i >= len(want) || line != want[i] {
			t.Fatalf("frame %d = %.80q, want %.80q", i, line, at(want, i))
		}
		got = append(got, line)
	}
	sent.Wait()
	held.Wait()
	clientInW.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	clientOutW.Close()
	if rest, _ := io.ReadAll(r); len(rest) > 0 {
		t.Errorf("more than expected reached the client: %.80q", rest)
	}
}

// testPad is the padding of test frame i: a few hundred bytes at most, but
// longer than the room before a buffer read ahead every 250th frame and
// longer than a whole read buffer every 1000th.
func testPad(i int) string {
	switch {
	case i%1000 == 500:
		return strings.Repeat("y", ReadBufSize+i)
	case i%250 == 100:
		return strings.Repeat("z", aheadRoom+4<<10+i)
	}
	return strings.Repeat("x", (i*37)%700)
}

// writeCut writes b in pieces of 1 to most bytes, cut where no frame
// boundary need fall. A failed write ends it: the reader's missing frames
// tell.
func writeCut(w io.Writer, b []byte, most int) {
	for k := 0; len(b) > 0; k++ {
		m := min(len(b), 1+(k*7919)%most)
		if _, err := w.Write(b[:m]); err != nil {
			return
		}
		b = b[m:]
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

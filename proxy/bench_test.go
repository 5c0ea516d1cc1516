package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// The benchmarks run the relay in process over real pipes and, in the same
// b.Loop, a plain byte copy over the same pipes; they report the ratio
// (STYLE.md, "Benchmarks"). Throughput ratios are bytecopy time / relay time,
// so 0.5 means half the byte copy's speed (DESIGN.md, "Speed": target ≥ 0.5).
// `acp-sidecar bench` measures the same against the real binary.

// benchChunk is a 229-byte agent_message_chunk notification, the most common
// frame an agent sends.
const benchChunk = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"The relay reads one line and writes the same bytes on."}}}}`

// benchImage is a tool_call_update with size bytes of random base64 data.
func benchImage(size int) string {
	raw := make([]byte, size/4*3)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","content":[{"type":"content","content":{"type":"image","mimeType":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(raw) + `"}}]}}}`
}

// relayFunc relays between the four streams until agentOut ends, then
// returns once both directions have stopped.
type relayFunc func(clientIn io.ReadCloser, clientOut io.Writer, agentIn io.WriteCloser, agentOut io.Reader) error

// sidecar is the relay under test, with no hook: what it costs to frame,
// scan and write.
func sidecar(clientIn io.ReadCloser, clientOut io.Writer, agentIn io.WriteCloser, agentOut io.Reader) error {
	return NewRelay(Config{ClientIn: clientIn, ClientOut: clientOut, AgentIn: agentIn, AgentOut: agentOut, Strict: true}).Run(context.Background())
}

// byteCopy is the baseline: io.Copy both ways with the relay's buffer size,
// ending the way Relay.Run does.
func byteCopy(clientIn io.ReadCloser, clientOut io.Writer, agentIn io.WriteCloser, agentOut io.Reader) error {
	done := make(chan error, 1)
	go func() {
		_, err := plainCopy(agentIn, clientIn)
		agentIn.Close()
		done <- err
	}()
	_, err := plainCopy(clientOut, agentOut)
	clientIn.Close()
	cerr := <-done
	if errors.Is(cerr, os.ErrClosed) {
		cerr = nil
	}
	return errors.Join(err, cerr)
}

// plainCopy copies with a 64 KiB buffer through a read/write loop: the
// wrappers hide os.File's ReadFrom and WriteTo.
func plainCopy(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
}

// relayBurst writes reps copies of frame from the agent's side, and returns
// how long it took until the client's side had read them all.
func relayBurst(b *testing.B, relay relayFunc, frame string, reps int) time.Duration {
	b.Helper()
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatalf("pipe: %v", err)
		}
		return r, w
	}
	clientInR, clientInW := pipe()
	clientOutR, clientOutW := pipe()
	agentInR, agentInW := pipe()
	agentOutR, agentOutW := pipe()
	defer agentInR.Close()
	// The client sends nothing; the relay sees its EOF at once, as in a
	// burst of updates nothing answers.
	clientInW.Close()

	block := []byte(strings.Repeat(frame+"\n", max(1, (256<<10)/(len(frame)+1))))
	perBlock := len(block) / (len(frame) + 1)
	want := int64(reps) * int64(len(frame)+1)

	start := time.Now()
	wrote := make(chan error, 1)
	go func() { // the agent
		defer agentOutW.Close()
		for left := reps; left > 0; left -= perBlock {
			if _, err := agentOutW.Write(block[:min(left, perBlock)*(len(frame)+1)]); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	read := make(chan int64, 1)
	go func() { // the client
		n, _ := io.CopyBuffer(io.Discard, clientOutR, make([]byte, 1<<20))
		clientOutR.Close()
		read <- n
	}()
	rerr := relay(clientInR, clientOutW, agentInW, agentOutR)
	clientOutW.Close()
	n := <-read
	elapsed := time.Since(start)
	agentOutR.Close()
	if err := errors.Join(rerr, <-wrote); err != nil {
		b.Fatalf("relay: %v", err)
	}
	if n != want {
		b.Fatalf("client read %d bytes, want %d", n, want)
	}
	return elapsed
}

func benchRelay(b *testing.B, frame string, reps int) {
	var base, via time.Duration
	for b.Loop() {
		base += relayBurst(b, byteCopy, frame, reps)
		via += relayBurst(b, sidecar, frame, reps)
	}
	b.ReportMetric(float64(base)/float64(via), "x-bytecopy") // throughput ratio, target >= 0.5
}

// BenchmarkRelaySmall relays bursts of 20,000 small notifications.
func BenchmarkRelaySmall(b *testing.B) { benchRelay(b, benchChunk, 20_000) }

// BenchmarkRelayLarge relays bursts of four 5 MiB tool call updates.
func BenchmarkRelayLarge(b *testing.B) { benchRelay(b, benchImage(5<<20), 4) }

// BenchmarkScan compares Scan with copying the same frame, the least any
// relay does with it.
func BenchmarkScan(b *testing.B) {
	for _, bc := range []struct {
		name  string
		frame string
		reps  int
	}{
		{"small", benchChunk, 1000},
		{"large", benchImage(5 << 20), 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := []byte(bc.frame)
			dst := make([]byte, len(frame))
			var base, via time.Duration
			for b.Loop() {
				start := time.Now()
				for range bc.reps {
					copy(dst, frame)
				}
				base += time.Since(start)
				start = time.Now()
				for range bc.reps {
					if _, err := Scan(frame); err != nil {
						b.Fatal(err)
					}
				}
				via += time.Since(start)
			}
			b.ReportMetric(float64(base)/float64(via), "x-bytecopy")
		})
	}
	// What the relay runs: a stream of chunks that differ in their text,
	// each scanned from where the last one's text began.
	b.Run("small-stream", func(b *testing.B) {
		var frames [2][]byte
		frames[0] = []byte(benchChunk)
		frames[1] = []byte(strings.Replace(benchChunk, "The relay reads", "A relay answers", 1))
		dst := make([]byte, len(benchChunk))
		var ss streamScanner
		var env Envelope
		var base, via time.Duration
		for b.Loop() {
			start := time.Now()
			for i := range 1000 {
				copy(dst, frames[i&1])
			}
			base += time.Since(start)
			start = time.Now()
			for i := range 1000 {
				if err := ss.scan(frames[i&1], &env); err != nil {
					b.Fatal(err)
				}
			}
			via += time.Since(start)
		}
		b.ReportMetric(float64(base)/float64(via), "x-bytecopy")
	})
}

package intercept_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// BenchmarkRecordTurn is the in-process twin of `acp-sidecar bench`'s
// recording metric: a turn of 20,000 agent_message_chunk frames relayed
// over real pipes, from the prompt to its response, through the recorder's
// chain onto the disk store, against the same relay with no chain (what
// --record=false runs), in the same b.Loop. The ratio is recording-off time
// over recording-on time: the bench's target is at least 0.9.
func BenchmarkRecordTurn(b *testing.B) {
	for _, chunks := range []int{0, 20_000} {
		b.Run(fmt.Sprintf("chunks=%d", chunks), func(b *testing.B) { benchRecordTurn(b, chunks) })
	}
}

func benchRecordTurn(b *testing.B, chunks int) {
	store, err := state.Open(context.Background(), b.TempDir(), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	off := newTurnRig(b, nil, chunks)
	on := newTurnRig(b, store, chunks)
	var base, via, tail time.Duration
	for b.Loop() {
		base += off.turn(b)
		via += on.turn(b)
		tail += on.tail
	}
	b.ReportMetric(float64(tail.Nanoseconds())/float64(b.N)/1000, "µs/tail-on")
	b.ReportMetric(float64(base)/float64(via), "x-record-off")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N)/1000, "µs/turn-off")
	b.ReportMetric(float64(via.Nanoseconds())/float64(b.N)/1000, "µs/turn-on")
}

// turnRig is a relay between a driver and a bench agent over os pipes, with
// a session open. A nil store relays with no interceptors.
type turnRig struct {
	in   io.Writer
	out  *bufio.Reader
	id   int
	tail time.Duration // from the last other line to the response
}

const benchSessionID = "sess_5f3a9c2e81d047b6"

func newTurnRig(b *testing.B, store state.Store, chunks int) *turnRig {
	b.Helper()
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		return r, w
	}
	cInR, cInW := pipe()
	cOutR, cOutW := pipe()
	aInR, aInW := pipe()
	aOutR, aOutW := pipe()
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		benchAgent(aInR, aOutW, chunks)
		aOutW.Close()
	}()
	var chain []intercept.Interceptor
	var rec *intercept.Core
	if store != nil {
		rec = intercept.New(intercept.Config{Store: store, Agent: []string{"bench"}})
		chain = rec.StageList()
	}
	hook := intercept.NewChain(nil, chain...)
	if rec != nil {
		hook.WithAnswers(rec.Ledger(), true)
	}
	relay := proxy.NewRelay(proxy.Config{
		ClientIn: cInR, ClientOut: cOutW, AgentIn: aInW, AgentOut: aOutR,
		Hook: hook, Strict: true,
	})
	if rec != nil {
		rec.Bind(relay)
		rec.Start(ctx)
	}
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	r := &turnRig{in: cInW, out: bufio.NewReaderSize(cOutR, 1<<20)}
	b.Cleanup(func() {
		cInW.Close()
		<-agentDone
		if err := <-relayDone; err != nil {
			b.Errorf("relay: %v", err)
		}
		cOutW.Close()
		cOutR.Close()
		if rec != nil {
			rec.Close(context.Background())
		}
		cancel()
	})
	r.call(b, `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n")
	r.call(b, `{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`+"\n")
	return r
}

// turn runs one prompt and returns the time from the request to the
// response.
func (r *turnRig) turn(b *testing.B) time.Duration {
	start := time.Now()
	r.call(b, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"`+benchSessionID+`","prompt":[{"type":"text","text":"go on"}]}}`+"\n")
	return time.Since(start)
}

func (r *turnRig) call(b *testing.B, format string) {
	r.id++
	if _, err := fmt.Fprintf(r.in, format, r.id); err != nil {
		b.Fatal(err)
	}
	head := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(r.id) + `,`)
	last := time.Now()
	for {
		line, err := r.out.ReadSlice('\n')
		if err != nil {
			b.Fatalf("read the response to %d: %v", r.id, err)
		}
		if bytes.HasPrefix(line, head) {
			r.tail = time.Since(last)
			return
		}
		last = time.Now()
	}
}

// benchAgent answers initialize, session/new and each session/prompt, with
// chunks agent_message_chunk frames before the prompt's response, as
// `acp-sidecar bench turns` does.
func benchAgent(in io.Reader, out io.Writer, chunks int) {
	const filler = "The relay reads one line, peeks its envelope and writes the same bytes on. "
	var block []byte
	for i := range 1000 {
		block = fmt.Appendf(block, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d %s"}}}}`+"\n", benchSessionID, i, filler[:60])
	}
	lr := proxy.NewLineReader(in, 0)
	w := bufio.NewWriterSize(out, 64<<10)
	for {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) || err != nil {
			w.Flush()
			return
		}
		env, err := proxy.Scan(line)
		if err != nil || env.Kind != proxy.KindRequest {
			continue
		}
		result := `{}`
		switch string(env.Method) {
		case "initialize":
			result = `{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}`
		case "session/new":
			result = `{"sessionId":"` + benchSessionID + `"}`
		case "session/prompt":
			for left := chunks; left > 0; left -= 1000 {
				w.Write(block)
			}
			result = `{"stopReason":"end_turn"}`
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", env.ID, result)
		if lr.Buffered() == 0 {
			w.Flush()
		}
	}
}

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

func TestFramesHaveExactSizeAndPass(t *testing.T) {
	for _, tt := range []struct {
		kind string
		size int
	}{
		{kindChunk, 229}, {kindChunk, minFrameSize(kindChunk)}, {kindChunk, 4096},
		{kindImage, 5 << 20}, {kindImage, minFrameSize(kindImage)},
		{kindImage, minFrameSize(kindImage) + 1}, {kindImage, minFrameSize(kindImage) + 2}, {kindImage, minFrameSize(kindImage) + 3},
	} {
		block, err := frameBlock(tt.kind, tt.size, 3)
		if err != nil {
			t.Fatalf("frameBlock(%s, %d): %v", tt.kind, tt.size, err)
		}
		lines := bytes.Split(bytes.TrimSuffix(block, []byte("\n")), []byte("\n"))
		if len(lines) != 3 {
			t.Fatalf("%s/%d: %d lines, want 3", tt.kind, tt.size, len(lines))
		}
		for _, l := range lines {
			if len(l) != tt.size {
				t.Errorf("%s/%d: frame of %d bytes", tt.kind, tt.size, len(l))
			}
			env, err := proxy.Scan(l)
			if err != nil || !json.Valid(l) {
				t.Fatalf("%s/%d: not valid JSON: %v", tt.kind, tt.size, err)
			}
			if env.Kind != proxy.KindNotification || string(env.Method) != "session/update" || env.Update == nil {
				t.Errorf("%s/%d: envelope %+v", tt.kind, tt.size, env)
			}
		}
	}
	if _, err := chunkFrame(minFrameSize(kindChunk)-1, 0); err == nil {
		t.Error("chunkFrame below the minimum size: no error")
	}
}

func TestGenWaitsForStartThenWritesAndDrains(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- gen(inR, outW, 1000, 229, kindChunk)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	ready, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(ready) != readyLine {
		t.Fatalf("first line %q (%v), want the ready line", ready, err)
	}
	io.WriteString(inW, startLine+"\n")
	for i := range 1000 {
		line, err := out.ReadSlice('\n')
		if err != nil || len(line) != 230 {
			t.Fatalf("frame %d: %d bytes, err %v", i, len(line), err)
		}
	}
	inW.Close() // the generator exits only now
	if err := <-done; err != nil {
		t.Fatalf("gen: %v", err)
	}
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Errorf("%d bytes after the last frame", len(rest))
	}
}

func TestEchoAnswersRequestsOnly(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"_bench/echo","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"_bench/note"}` + "\n" + "not json\n" +
		`{"jsonrpc":"2.0","id":"x","method":"m"}`)
	var out bytes.Buffer
	if err := echo(in, &out); err != nil {
		t.Fatalf("echo: %v", err)
	}
	want := `{"jsonrpc":"2.0","id":7,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"x","result":{}}` + "\n"
	if out.String() != want {
		t.Errorf("echo wrote %q, want %q", out.String(), want)
	}
}

func TestQuickKeepsExplicitFlags(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-n", "42"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.small != 42 || o.rounds != 3 || o.roundTrips != 2000 {
		t.Errorf("got -n %d -rounds %d -rt %d, want 42, 3, 2000", o.small, o.rounds, o.roundTrips)
	}
	if _, err := parseOptions([]string{"-size", "10"}, io.Discard); err == nil {
		t.Error("-size 10: no error")
	}
}

func TestMetricsAreMediansOfRounds(t *testing.T) {
	r := newResults(options{})
	us := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Microsecond)
		}
		return ds
	}
	for _, f := range []int{1, 3, 2} { // sidecar at 1/f of the byte copy's speed
		tp := func(d time.Duration) tputResult {
			return tputResult{elapsed: d, frames: 1000, bytes: 1 << 20, hwm: int64(10*f) << 20}
		}
		small := [2]tputResult{byteCopyRelay: tp(time.Second), sidecarRelay: tp(time.Duration(f) * time.Second)}
		r.add(small, small, [2][]time.Duration{byteCopyRelay: us(10, 20, 30), sidecarRelay: us(30, 40, 50)})
	}
	m := r.metrics()
	if got := m[0].Ratio; got != 0.5 {
		t.Errorf("small throughput ratio %v, want the median 0.5", got)
	}
	if got := m[2].Added; got != 20 {
		t.Errorf("round trip p50 added %v µs, want 20", got)
	}
	if got := m[4].Sidecar; got != 30 {
		t.Errorf("peak RSS %v MiB, want the maximum 30", got)
	}
	if r.pass() {
		t.Error("pass() with a small-frame ratio of 0.5 and RSS of 30 MiB")
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100 - i)
	}
	if p50, p99 := quantile(ds, 0.5), quantile(ds, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %d, p99 %d, want 50, 99", p50, p99)
	}
}

func TestTurnsAgentAnswersAPromptWithChunks(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}` + "\n")
	var out bytes.Buffer
	if err := turns(in, &out, 5, 229); err != nil {
		t.Fatalf("turns: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines, want 8: %q", len(lines), lines)
	}
	if !strings.Contains(lines[1], `"sessionId":"`+benchSession+`"`) {
		t.Errorf("session/new answered %q", lines[1])
	}
	for _, l := range lines[2:7] {
		if !strings.HasPrefix(l, chunkHead) || len(l) != 229 {
			t.Errorf("chunk %q", l)
		}
	}
	if lines[7] != `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}` {
		t.Errorf("prompt answered %q", lines[7])
	}
}

func TestOnlyPicksWorkloads(t *testing.T) {
	o, err := parseOptions([]string{"-only", "recording,turns"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range allWorkloads {
		if got, want := o.only.has(w), w == wRecording || w == wTurns; got != want {
			t.Errorf("-only recording,turns: has(%s) = %v, want %v", w, got, want)
		}
	}
	if all, _ := parseOptions(nil, io.Discard); !all.only.has(wSmall) || !all.only.has(wRecording) {
		t.Error("without -only, not every workload runs")
	}
	if _, err := parseOptions([]string{"-only", "recordings"}, io.Discard); err == nil {
		t.Error("-only recordings: no error")
	}
	r := newResults(o)
	tp := tputResult{elapsed: time.Second, frames: 1000}
	r.add([2]tputResult{}, [2]tputResult{}, [2][]time.Duration{})
	r.rounds[0].rec = [2]tputResult{tp, tp}
	var names []string
	for _, m := range r.metrics() {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, " "); got != "recording_throughput" {
		t.Errorf("metrics %s, want recording_throughput alone", got)
	}
	if s := r.roundSummary(0); s != "recording 1.00x" {
		t.Errorf("round summary %q", s)
	}
}

func TestStreamCheckFindsLossAndDisorder(t *testing.T) {
	const n, size = 2500, 229
	block, err := genBlock(kindChunk, n, size)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	gen(strings.NewReader(startLine+"\n"), &stream, n, size, kindChunk)
	good := bytes.TrimPrefix(stream.Bytes(), []byte(readyLine+"\n"))
	if len(good) != n*(size+1) {
		t.Fatalf("the generator wrote %d bytes, want %d", len(good), n*(size+1))
	}
	frames := bytes.SplitAfter(good, []byte("\n"))
	swapped := slices.Concat(frames[:5], [][]byte{frames[6], frames[5]}, frames[7:])
	for _, tt := range []struct {
		name    string
		stream  []byte
		wantErr bool
	}{
		{"as written, in odd pieces", good, false},
		{"a frame lost", bytes.Join(slices.Delete(slices.Clone(frames), 1200, 1201), nil), true},
		{"two frames swapped", bytes.Join(swapped, nil), true},
		{"frames interleaved mid-line", slices.Concat(good[:100], frames[3], good[100:]), true},
	} {
		c := &streamCheck{block: block}
		var err error
		for p := tt.stream; len(p) > 0 && err == nil; {
			m := min(len(p), 777)
			err = c.check(p[:m])
			p = p[m:]
		}
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: check = %v, want an error: %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestSeveralAgentsWorkload(t *testing.T) {
	o, err := parseOptions([]string{"-only", "several"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{exe: "/bin/acp-sidecar", dir: "/tmp/b"}
	argv := strings.Join(r.severalArgv([]string{"/bin/acp-sidecar", "bench", "gen", "-n", "5"}), " ")
	if want := `--agent a='/bin/acp-sidecar' 'bench' 'gen' '-n' '5' --agent b='/bin/acp-sidecar' 'bench' 'gen' '-n' '5' --default-agent a`; !strings.HasSuffix(argv, want) {
		t.Errorf("sidecar command line %s, want it to end in %s", argv, want)
	}
	res := newResults(o)
	res.add([2]tputResult{}, [2]tputResult{}, [2][]time.Duration{})
	half := func(d time.Duration) [2]tputResult {
		return [2]tputResult{byteCopyRelay: {elapsed: time.Second, frames: 100, bytes: 1 << 20}, sidecarRelay: {elapsed: d, frames: 100, bytes: 1 << 20}}
	}
	res.rounds[0].several = [2][2]tputResult{half(2 * time.Second), half(time.Second)}
	var names []string
	for _, m := range res.metrics() {
		names = append(names, fmt.Sprintf("%s %.2f", m.Name, m.Ratio))
	}
	if got, want := strings.Join(names, ", "), "several_agents_small 0.50, several_agents_large 1.00"; got != want {
		t.Errorf("metrics %s, want %s", got, want)
	}
	if s := res.roundSummary(0); s != "several agents small 0.50x, large 1.00x" {
		t.Errorf("round summary %q", s)
	}
}

// TestMedianPairAlternatesAndTakesMedians: the first way of each pair
// alternates, each way gets its run of median time, and the peak RSS is
// the largest of its runs.
func TestMedianPairAlternatesAndTakesMedians(t *testing.T) {
	times := map[relayKind][]time.Duration{
		byteCopyRelay: {30, 10, 20, 50, 40},
		sidecarRelay:  {5, 1, 4, 2, 3},
	}
	var calls []relayKind
	got, err := medianPair([]relayKind{sidecarRelay, byteCopyRelay}, 5, func(k relayKind) (tputResult, error) {
		n := 0
		for _, c := range calls {
			if c == k {
				n++
			}
		}
		calls = append(calls, k)
		return tputResult{elapsed: times[k][n], hwm: int64(times[k][n]) * 100, cpu: times[k][n]}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []relayKind{sidecarRelay, byteCopyRelay, byteCopyRelay, sidecarRelay, sidecarRelay, byteCopyRelay, byteCopyRelay, sidecarRelay, sidecarRelay, byteCopyRelay}
	if !slices.Equal(calls, want) {
		t.Errorf("runs in the order %v, want %v", calls, want)
	}
	if b := got[byteCopyRelay]; b.elapsed != 30 || b.cpu != 30 || b.hwm != 5000 {
		t.Errorf("bytecopy: %+v, want the run of 30 with the peak RSS of 50's", b)
	}
	if s := got[sidecarRelay]; s.elapsed != 3 || s.cpu != 3 || s.hwm != 500 {
		t.Errorf("sidecar: %+v, want the run of 3 with the peak RSS of 5's", s)
	}
	if _, err := medianPair([]relayKind{byteCopyRelay, sidecarRelay}, 3, func(k relayKind) (tputResult, error) {
		return tputResult{}, errors.New("the relay died")
	}); err == nil || err.Error() != "the relay died" {
		t.Errorf("a failed run gives %v, want its error", err)
	}
}

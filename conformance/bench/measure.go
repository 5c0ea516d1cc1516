package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// relayKind names the relay under measurement.
type relayKind int

const (
	byteCopyRelay relayKind = iota // `acp-sidecar bench bytecopy -- AGENT`
	sidecarRelay                   // `acp-sidecar --state-dir … -- AGENT`
)

func (k relayKind) String() string {
	if k == sidecarRelay {
		return "sidecar"
	}
	return "bytecopy"
}

// runner starts relays of the binary under test, one process at a time.
type runner struct {
	exe     string
	dir     string // temporary: the sidecar's state dir and log
	timeout time.Duration
	extra   []string // more sidecar flags (-sidecar-flag)
	state   string   // the sidecar's state dir; "" is dir/state
}

// argv is the command line of a relay of kind k around the agent; flags
// are more sidecar flags.
func (r *runner) argv(k relayKind, agent []string, flags ...string) []string {
	if k == byteCopyRelay {
		return append([]string{r.exe, "bench", "bytecopy", "--"}, agent...)
	}
	state := r.state
	if state == "" {
		state = filepath.Join(r.dir, "state")
	}
	argv := []string{r.exe, "--state-dir", state, "--log-file", filepath.Join(r.dir, "sidecar.log")}
	argv = append(append(argv, r.extra...), flags...)
	return append(append(argv, "--"), agent...)
}

// relayProc is one running relay with the driver on its client side.
type relayProc struct {
	kind   relayKind
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *acpclient.Buffer
}

func (r *runner) start(ctx context.Context, k relayKind, agent []string, flags ...string) (*relayProc, error) {
	return r.startArgv(ctx, k, r.argv(k, agent, flags...))
}

// startArgv starts a relay of kind k with its whole command line.
func (r *runner) startArgv(ctx context.Context, k relayKind, argv []string) (*relayProc, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	p := &relayProc{kind: k, cmd: cmd, cancel: cancel, stderr: &acpclient.Buffer{Max: 4 << 10}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: stdin pipe: %w", k, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: stdout pipe: %w", k, err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", k, err)
	}
	p.stdin, p.stdout = stdin, bufio.NewReaderSize(stdout, 1<<20)
	return p, nil
}

// finish closes the relay's input, reads what is left of its output and
// waits for it. Both relays exit 0 when their agent does.
func (p *relayProc) finish() error {
	defer p.cancel()
	p.stdin.Close()
	extra, rerr := io.Copy(io.Discard, p.stdout)
	err := p.cmd.Wait()
	switch {
	case err != nil:
		return fmt.Errorf("%s exited: %w%s", p.kind, err, stderrSuffix(p.stderr))
	case rerr != nil:
		return fmt.Errorf("%s: read output: %w", p.kind, rerr)
	case extra > 0:
		return fmt.Errorf("%s: %d unexpected bytes after the last frame", p.kind, extra)
	}
	return nil
}

// abort kills the relay after a failed run, and its agent with it (the
// sidecar's agent gets SIGTERM when the sidecar dies, and bytecopy's sees its
// stdin end).
func (p *relayProc) abort() {
	p.cancel()
	p.stdin.Close()
	p.cmd.Wait()
}

func (p *relayProc) fail(err error) error {
	p.abort()
	return fmt.Errorf("%s: %w%s", p.kind, err, stderrSuffix(p.stderr))
}

// tputResult is one throughput run.
type tputResult struct {
	elapsed time.Duration
	frames  int
	bytes   int64
	hwm     int64         // the relay's peak RSS in bytes; 0 when unknown
	cpu     time.Duration // the relay's own CPU time (not its agent's); 0 when unknown
}

// throughput relays n frames of size bytes from a generator agent to the
// driver and times them from the start signal to the last byte.
func (r *runner) throughput(ctx context.Context, k relayKind, kind string, n, size int) (tputResult, error) {
	p, err := r.start(ctx, k, genArgv(r.exe, kind, n, size))
	if err != nil {
		return tputResult{}, err
	}
	// The frames are counted, as the byte copy's reader would need to.
	frames := 0
	res, err := relayStream(p, n, size, func(b []byte) error {
		frames += bytes.Count(b, []byte{'\n'})
		return nil
	})
	if err == nil && frames != n {
		err = fmt.Errorf("%s: got %d frames in %d bytes, want %d", k, frames, res.bytes, n)
	}
	return res, err
}

// genArgv is the command line of a generator agent (gen).
func genArgv(exe, kind string, n, size int) []string {
	return []string{exe, "bench", "gen", "-kind", kind, "-n", strconv.Itoa(n), "-size", strconv.Itoa(size)}
}

// relayStream runs a throughput measurement on a started relay whose agent
// is the generator: it waits for the generator's ready line, starts the
// clock with the start line, reads the bytes of n frames of size bytes,
// each read through check, then reads the relay's peak RSS and CPU time
// and ends the relay.
func relayStream(p *relayProc, n, size int, check func([]byte) error) (tputResult, error) {
	ready, err := p.stdout.ReadSlice('\n')
	if err != nil || string(bytes.TrimSpace(ready)) != readyLine {
		return tputResult{}, p.fail(fmt.Errorf("want the generator's ready line, got %.80q (err %v)", ready, err))
	}
	want := int64(n) * int64(size+1)
	buf := make([]byte, 1<<20)
	var res tputResult
	start := time.Now()
	if _, err := io.WriteString(p.stdin, startLine+"\n"); err != nil {
		return tputResult{}, p.fail(fmt.Errorf("send start line: %w", err))
	}
	for res.bytes < want {
		m, err := p.stdout.Read(buf[:min(int64(len(buf)), want-res.bytes)])
		res.bytes += int64(m)
		if cerr := check(buf[:m]); cerr != nil {
			return tputResult{}, p.fail(cerr)
		}
		if err != nil {
			return tputResult{}, p.fail(fmt.Errorf("after %d of %d frames: %w", res.bytes/int64(size+1), n, err))
		}
	}
	res.elapsed = time.Since(start)
	res.frames = n
	pid := p.cmd.Process.Pid
	res.hwm = peakRSS(pid)
	res.cpu = cpuTime(pid)
	return res, p.finish()
}

// rtRequest is the request of a round trip; %d is its id.
const rtRequest = `{"jsonrpc":"2.0","id":%d,"method":"_bench/echo","params":{"sessionId":"sess_5f3a9c2e81d047b6","text":"ping"}}` + "\n"

// roundTrips sends n requests one after another through the relay to an
// echo agent and returns the time each took to be answered, after a short
// warm-up that is not counted.
func (r *runner) roundTrips(ctx context.Context, k relayKind, n int) ([]time.Duration, error) {
	p, err := r.start(ctx, k, []string{r.exe, "bench", "echo"})
	if err != nil {
		return nil, err
	}
	warm := min(n/10, 500)
	times := make([]time.Duration, 0, n)
	var req []byte
	for i := 1; i <= warm+n; i++ {
		req = fmt.Appendf(req[:0], rtRequest, i)
		start := time.Now()
		if _, err := p.stdin.Write(req); err != nil {
			return nil, p.fail(fmt.Errorf("send request %d: %w", i, err))
		}
		resp, err := p.stdout.ReadSlice('\n')
		d := time.Since(start)
		if err != nil {
			return nil, p.fail(fmt.Errorf("read response %d: %w", i, err))
		}
		if !bytes.HasPrefix(resp, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,`, i)) {
			return nil, p.fail(fmt.Errorf("request %d: unexpected response %.100q", i, resp))
		}
		if i > warm {
			times = append(times, d)
		}
	}
	return times, p.finish()
}

// peakRSS is a process's peak resident set (VmHWM), read while it runs: its
// rusage after exit would fold in its agent, which it has waited for.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// clockTick is USER_HZ, the unit of /proc/PID/stat times; it is 100 on every
// Linux platform Go supports.
const clockTick = 10 * time.Millisecond

// cpuTime is a process's own user+system time so far, without its children.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: fields 14
	// and 15 (utime, stime) are the 12th and 13th after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0
	}
	return time.Duration(u+s) * clockTick
}

// stderrSuffix is a relay's stderr formatted to end an error message, or "".
func stderrSuffix(b *acpclient.Buffer) string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// The requests of a recorded turn. The session is the one the turn agent
// hands out.
const (
	initRequest       = `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n"
	newSessionRequest = `{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}` + "\n"
	promptRequest     = `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"` + benchSession + `","prompt":[{"type":"text","text":"go on"}]}}` + "\n"
)

// call sends a request with the id and reads until its response, counting
// the chunk frames that come before it.
func (p *relayProc) call(format string, id int) (chunks int, err error) {
	if _, err := fmt.Fprintf(p.stdin, format, id); err != nil {
		return 0, fmt.Errorf("send request %d: %w", id, err)
	}
	want := strconv.Itoa(id)
	for {
		line, err := p.stdout.ReadSlice('\n')
		if err != nil {
			return chunks, fmt.Errorf("read the response to request %d: %w", id, err)
		}
		if bytes.HasPrefix(line, []byte(chunkHead)) {
			chunks++
			continue
		}
		env, err := proxy.Scan(line)
		if err == nil && env.Kind == proxy.KindResponse && string(env.ID) == want {
			if env.Error {
				return chunks, fmt.Errorf("request %d failed: %.200s", id, line)
			}
			return chunks, nil
		}
	}
}

// session starts a sidecar around the turn agent and opens a session. Each
// gets a state dir of its own, so no run reads what an earlier one recorded.
func (r *runner) session(ctx context.Context, chunks, size int, flags ...string) (*relayProc, error) {
	state, err := os.MkdirTemp(r.dir, "state-")
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	fresh := *r
	fresh.state = state
	r = &fresh
	agent := []string{r.exe, "bench", "turns", "-n", strconv.Itoa(chunks), "-size", strconv.Itoa(size)}
	p, err := r.start(ctx, sidecarRelay, agent, flags...)
	if err != nil {
		return nil, err
	}
	if _, err := p.call(initRequest, 1); err != nil {
		return nil, p.fail(err)
	}
	if _, err := p.call(newSessionRequest, 2); err != nil {
		return nil, p.fail(err)
	}
	return p, nil
}

// recording relays one turn of n chunk frames of size bytes through the
// sidecar with recording on or off, and times it from the prompt to its
// response. With recording on, the recorder claims and records every chunk:
// they belong to a running turn.
func (r *runner) recording(ctx context.Context, record bool, n, size int) (tputResult, error) {
	p, err := r.session(ctx, n, size, "--record="+strconv.FormatBool(record))
	if err != nil {
		return tputResult{}, err
	}
	start := time.Now()
	got, err := p.call(promptRequest, 3)
	res := tputResult{elapsed: time.Since(start), frames: got, bytes: int64(got) * int64(size+1)}
	if err != nil {
		return tputResult{}, p.fail(err)
	}
	if got != n {
		return tputResult{}, p.fail(fmt.Errorf("got %d chunks, want %d", got, n))
	}
	pid := p.cmd.Process.Pid
	res.hwm = peakRSS(pid)
	res.cpu = cpuTime(pid)
	return res, p.finish()
}

// recordingRound runs the recorded turn runs times each way, recording off
// and on (medianPair). One turn of 20,000 chunks takes about 10 ms, and on a
// busy machine a single pair of them put a round's ratio anywhere from 0.5
// to 1.2 (issue 3).
func (r *runner) recordingRound(ctx context.Context, order []relayKind, runs, n, size int) ([2]tputResult, error) {
	return medianPair(order, runs, func(k relayKind) (tputResult, error) {
		res, err := r.recording(ctx, k == sidecarRelay, n, size)
		if err != nil {
			return res, fmt.Errorf("recording (on: %v): %w", k == sidecarRelay, err)
		}
		return res, nil
	})
}

// medianPair runs both ways of a measurement runs times, alternating which
// goes first, and returns each way's run of median time, with the peak RSS
// of all its runs. A throughput run is a fraction of a second, and on the
// project's 2-core machine the byte copy alone ran anywhere from 4.4 to
// 9.8 M small frames/s: one pair a round put its ratio anywhere from 0.3
// to 1.1.
func medianPair(order []relayKind, runs int, run func(relayKind) (tputResult, error)) ([2]tputResult, error) {
	var all [2][]tputResult
	for j := range runs {
		pair := order
		if j%2 == 1 {
			pair = []relayKind{order[1], order[0]}
		}
		for _, k := range pair {
			res, err := run(k)
			if err != nil {
				return [2]tputResult{}, err
			}
			all[k] = append(all[k], res)
		}
	}
	var med [2]tputResult
	for k := range all {
		var hwm int64
		for _, res := range all[k] {
			hwm = max(hwm, res.hwm)
		}
		slices.SortFunc(all[k], func(a, b tputResult) int { return cmp.Compare(a.elapsed, b.elapsed) })
		med[k] = all[k][len(all[k])/2]
		med[k].hwm = hwm
	}
	return med, nil
}

// turnsResult is a run of many short turns.
type turnsResult struct {
	turns   int
	elapsed time.Duration
	hwm     int64 // the sidecar's peak RSS in bytes; 0 when unknown
}

// manyTurns runs count prompt turns of chunks chunk frames each, one after
// another, through the sidecar recording to its disk store.
func (r *runner) manyTurns(ctx context.Context, count, chunks int) (turnsResult, error) {
	p, err := r.session(ctx, chunks, 229)
	if err != nil {
		return turnsResult{}, err
	}
	start := time.Now()
	for i := range count {
		got, err := p.call(promptRequest, 3+i)
		if err == nil && got != chunks {
			err = fmt.Errorf("turn %d: got %d chunks, want %d", i+1, got, chunks)
		}
		if err != nil {
			return turnsResult{}, p.fail(err)
		}
	}
	res := turnsResult{turns: count, elapsed: time.Since(start), hwm: peakRSS(p.cmd.Process.Pid)}
	return res, p.finish()
}

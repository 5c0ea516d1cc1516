//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// proc is one process, identified by pid and start time so a reused pid is
// not taken for it.
type proc struct {
	pid   int
	start string
	comm  string
}

// stat reads /proc/PID/stat: parent pid, state, start time, command name.
func stat(pid int) (ppid int, state byte, start, comm string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", "", false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, 0, "", "", false
	}
	f := strings.Fields(s[end+1:]) // state is field 3 of stat, start time field 22
	if len(f) < 20 {
		return 0, 0, "", "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0], f[19], s[open+1 : end], true
}

// descendantsOf lists every process below pid, by parent pid.
func descendantsOf(t *testing.T, pid int) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]proc{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, start, comm, ok := stat(p); ok {
			children[ppid] = append(children[ppid], proc{p, start, comm})
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// running reports whether p still runs: a zombie has been killed and only
// waits for its new parent to reap it.
func (p proc) running() bool {
	_, state, start, _, ok := stat(p.pid)
	return ok && start == p.start && state != 'Z' && state != 'X'
}

func (p proc) String() string { return fmt.Sprintf("%s[%d]", p.comm, p.pid) }

// agents that keep running after their stdin ends, or leave a child behind.
// ready waits until the whole tree is up.
var stubbornAgents = []struct {
	name  string
	argv  []string
	procs int // at least this many processes below the sidecar
	ready func(p *peer)
}{
	{
		name:  "fakeagent ignores EOF",
		argv:  []string{"acp-sidecar", "fakeagent", "-ignore-eof"},
		procs: 1,
		ready: initialize,
	},
	{
		// The shell ignores SIGTERM, and so does its child (an ignored
		// signal stays ignored across exec): only SIGKILL ends them.
		name:  "shell ignores SIGTERM and has a child",
		argv:  []string{"sh", "-c", `trap "" TERM; sleep 1000 & printf '%s\n' '{"jsonrpc":"2.0","method":"ready"}'; wait`},
		procs: 2,
		ready: func(p *peer) { p.await("ready", acpclient.HasMethod("ready")) },
	},
	{
		// The agent exits at EOF but leaves a child that holds its stdout.
		name:  "agent leaves a child behind",
		argv:  []string{"sh", "-c", `sleep 1000 & exec acp-sidecar fakeagent`},
		procs: 2,
		ready: initialize,
	},
}

func initialize(p *peer) {
	p.call(`1`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
}

// checkTreeGone fails for every process of tree that still runs.
func checkTreeGone(t *testing.T, tree []proc) {
	t.Helper()
	for _, p := range tree {
		if p.running() {
			t.Errorf("%v still runs after the sidecar exited", p)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

// startTree starts the sidecar in front of argv, waits for the agent's tree
// and returns it.
func startTree(t *testing.T, argv []string, procs int, ready func(*peer)) (*peer, []proc) {
	t.Helper()
	p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, []string{"--grace", "200ms"}, argv...)...)
	ready(p)
	tree := descendantsOf(t, p.c.Pid())
	if len(tree) < procs {
		t.Fatalf("agent tree %v, want at least %d processes", tree, procs)
	}
	t.Cleanup(func() {
		for _, p := range tree {
			if p.running() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	return p, tree
}

// TestClientEOFStopsAgentTree: when the client closes our stdin, the
// sidecar stops the agent's whole tree, whatever the agent does about EOF
// and SIGTERM, and exits (DESIGN.md "Processes").
func TestClientEOFStopsAgentTree(t *testing.T) {
	for _, a := range stubbornAgents {
		t.Run(a.name, func(t *testing.T) {
			p, tree := startTree(t, a.argv, a.procs, a.ready)
			p.finish() // bounded: fails if the sidecar does not exit
			checkTreeGone(t, tree)
		})
	}
}

// TestSignalStopsAgentTree: a signal to the sidecar alone (not its group)
// stops the agent's whole tree, and the sidecar exits, with no EOF from the
// client.
func TestSignalStopsAgentTree(t *testing.T) {
	type row struct {
		sig   syscall.Signal
		agent int // index in stubbornAgents
	}
	rows := []row{{syscall.SIGINT, 0}, {syscall.SIGHUP, 0}}
	for i := range stubbornAgents {
		rows = append(rows, row{syscall.SIGTERM, i})
	}
	for _, r := range rows {
		a := stubbornAgents[r.agent]
		t.Run(r.sig.String()+"/"+a.name, func(t *testing.T) {
			t.Parallel()
			p, tree := startTree(t, a.argv, a.procs, a.ready)
			if err := syscall.Kill(p.c.Pid(), r.sig); err != nil {
				t.Fatal(err)
			}
			// The sidecar must exit on the signal alone, with the editor's
			// end of stdin still open.
			if _, err := p.c.Wait(p.ctx); err != nil {
				regression(t, "relay.Run waits for client EOF after a shutdown by signal (OnAgentExit set)",
					"sidecar did not exit after %v: %v", r.sig, err)
				p.finish()
			}
			checkTreeGone(t, tree)
		})
	}
}

// TestAgentExitStatus: with --restart=false, an agent that exits by itself
// takes the sidecar with it, and the sidecar exits with the agent's status
// (128+N for a signal), with no EOF from the client.
func TestAgentExitStatus(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		script  func(p *peer)
		want    int
		raceBug bool
	}{
		{
			name: "fakeagent -die-after 1 -die-code 7",
			argv: []string{"acp-sidecar", "fakeagent", "-die-after", "1", "-die-code", "7"},
			script: func(p *peer) {
				initialize(p)
				p.call(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
				p.call(`3`, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"hi"}]}}`)
			},
			want:    7,
			raceBug: true,
		},
		{name: "exit 3", argv: []string{"sh", "-c", "exit 3"}, script: func(*peer) {}, want: 3, raceBug: true},
		{name: "killed", argv: []string{"sh", "-c", "kill -KILL $$"}, script: func(*peer) {}, want: 128 + 9, raceBug: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startPeer(boundedCtx(t), t, nil, sidecarArgv(t, []string{"--restart=false"}, tt.argv...)...)
			tt.script(p)
			code, err := p.c.Wait(p.ctx)
			if err != nil {
				t.Fatalf("sidecar did not exit after its agent: %v", err)
			}
			if code != tt.want {
				if tt.raceBug {
					regression(t, "proxy.Relay.Run: its own close of stdin after the agent exits fires OnClientEOF, so run.go takes it for a shutdown by us and exits 0",
						"exit status %d, want %d", code, tt.want)
					return
				}
				t.Errorf("exit status %d, want %d", code, tt.want)
			}
		})
	}
}

// TestStdoutOnlyACP: whatever the agent writes, the sidecar's stdout carries
// nothing but JSON lines; its stderr carries the agent's stderr and nothing
// of its own (DESIGN.md "Processes", "Data flow" 5).
func TestStdoutOnlyACP(t *testing.T) {
	agent := `printf 'agent stderr line\n' >&2; printf 'Welcome to agent v1!\n\377\376 not utf-8\n{"half":\n'; exec acp-sidecar fakeagent`
	stateDir := t.TempDir()
	var stderr acpclient.Buffer
	p := startPeer(boundedCtx(t), t, &stderr, "acp-sidecar", "--state-dir", stateDir, "--", "sh", "-c", agent)
	initialize(p)
	p.call(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	p.call(`3`, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"hello"}]}}`)
	if code := p.finish(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	out := p.c.Output()
	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Errorf("stdout ends in an unterminated line: %s", clip(out))
	}
	for i, l := range p.lines() {
		if !json.Valid(l) {
			t.Errorf("stdout line %d is not JSON: %s", i+1, clip(l))
		}
	}
	if got, want := stderr.String(), "agent stderr line\n"; got != want {
		t.Errorf("stderr = %q, want only the agent's %q", got, want)
	}
	if log := mustReadFile(t, filepath.Join(stateDir, "sidecar.log")); !bytes.Contains(log, []byte("malformed")) {
		t.Errorf("the sidecar's log does not mention the dropped lines:\n%s", log)
	}
}

// TestTrace: --trace writes valid JSONL with every frame, both ways and in
// order, malformed and sidecar-made ones included, and says so on stderr.
func TestTrace(t *testing.T) {
	dir := t.TempDir()
	trace, agentOut := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "agent.out")
	var stderr acpclient.Buffer
	p := startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, []string{"--trace", trace},
		"acp-sidecar", "fakeagent", "-stdout-log", agentOut)...)
	initialize(p)
	p.send(`not json`)
	p.await("parse error", acpclient.Contains(`-32700`))
	p.call(`2`, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	p.barrier()
	p.call(`3`, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"fake-sess-1","prompt":[{"type":"text","text":"meta"}]}}`)
	if code := p.finish(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}

	if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "--trace") || !strings.Contains(s, trace) {
		t.Errorf("stderr = %q, want one line warning that --trace records to %s", s, trace)
	}
	var (
		fromClient, fromAgent []string // frames as the peers wrote them
		toClient              []string // every frame traced towards the client
		byUs, malformed       []string
	)
	raw := mustReadFile(t, trace)
	if !bytes.HasSuffix(raw, []byte("\n")) {
		t.Errorf("trace does not end in a newline")
	}
	for i, l := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var e struct {
			T         string          `json:"t"`
			Dir       string          `json:"dir"`
			From      string          `json:"from"`
			Frame     json.RawMessage `json:"frame"`
			Error     string          `json:"error"`
			Malformed string          `json:"malformed"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("trace line %d is not JSON: %v: %s", i+1, err, clip(l))
		}
		if _, err := time.Parse(time.RFC3339Nano, e.T); err != nil {
			t.Errorf("trace line %d: t %q: %v", i+1, e.T, err)
		}
		if e.Dir == "agent->client" && e.Frame != nil {
			toClient = append(toClient, string(e.Frame))
		}
		switch {
		case e.Malformed != "":
			malformed = append(malformed, e.Malformed)
		case e.From == "sidecar":
			byUs = append(byUs, e.Dir+" "+string(e.Frame))
		case e.From == "peer" && e.Dir == "client->agent":
			fromClient = append(fromClient, string(e.Frame))
		case e.From == "peer" && e.Dir == "agent->client":
			fromAgent = append(fromAgent, string(e.Frame))
		default:
			t.Errorf("trace line %d: unexpected entry %s", i+1, clip(l))
		}
	}
	sent := strings.ReplaceAll(p.sent.String(), "not json\n", "")
	if d := diffStreams([]byte(sent), []byte(strings.Join(fromClient, "\n")+"\n")); d != "" {
		t.Errorf("traced client frames differ from those sent: %s", d)
	}
	if d := diffStreams(mustReadFile(t, agentOut), []byte(strings.Join(fromAgent, "\n")+"\n")); d != "" {
		t.Errorf("traced agent frames differ from those the agent wrote: %s", d)
	}
	// Every line the client got is traced. (Not necessarily in the same
	// order: the sidecar's own frames are traced by the goroutine that sends
	// them, just before they take their turn on the wire.)
	traced := map[string]int{}
	for _, f := range toClient {
		traced[f]++
	}
	for _, l := range p.lines() {
		if traced[string(l)] == 0 {
			regression(t, "proxy: frames released through Relay.Hold are never traced", "client got %s, which is not in the trace", clip(l))
			continue
		}
		traced[string(l)]--
	}
	if len(malformed) != 1 || malformed[0] != "not json" {
		t.Errorf("traced malformed lines %q, want [\"not json\"]", malformed)
	}
	parseErrors := 0
	for _, f := range byUs {
		if strings.HasPrefix(f, "agent->client ") && strings.Contains(f, "-32700") {
			parseErrors++
		}
	}
	if parseErrors != 1 {
		t.Errorf("traced sidecar frames %q, want one parse error sent to the client", byUs)
	}
}

// TestTerminalExecsAgent: with a terminal on stdin (a person, not an
// editor) the sidecar becomes the agent: same pid, no relay.
func TestTerminalExecsAgent(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	defer slave.Close()
	var stdout, stderr acpclient.Buffer
	cmd := exec.CommandContext(boundedCtx(t), "acp-sidecar", "--state-dir", t.TempDir(), "--", "sh", "-c", `echo "pid=$$ not ACP"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), fmt.Sprintf("pid=%d not ACP\n", cmd.Process.Pid); got != want {
		t.Errorf("stdout = %q, want %q: the agent runs in the sidecar's own process, its output unrelayed", got, want)
	}
}

// openPTY opens a pseudo-terminal pair, or skips the test.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	ioctl := func(req uintptr, arg unsafe.Pointer) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), req, uintptr(arg)); errno != 0 {
			return errno
		}
		return nil
	}
	var unlock int32
	var n uint32
	if err := ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		m.Close()
		t.Skipf("unlock pty: %v", err)
	}
	if err := ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		m.Close()
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open pty: %v", err)
	}
	return m, s
}

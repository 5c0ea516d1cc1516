//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// The scenario scripts (testdata/script/scenario_*.txtar) play an editor
// against the real sidecar in front of the real fake agent, one frame at a
// time, so that an ACP exchange reads top to bottom as it happens on the
// wire. The commands below are the client's side of it:
//
//	client start ARGS...   run `acp-sidecar ARGS...` on real pipes, as an editor would
//	client stop            close its stdin and wait for it to exit 0; stdout is
//	                       every frame it wrote, stderr its log
//	client term            the same after SIGTERM, with its stdin still open, as
//	                       an editor that closes shuts its agent down
//	send FRAME|FILE        write one frame (inline JSON, or a file of the script, compacted);
//	                       a FILE.jsonl holds several, one a line, written in one write
//	expect [-re] PATTERN   wait for the next frame that matches and consume every
//	                       frame up to it
//	saw [-re] PATTERN      a frame the last expect consumed matches (negatable)
//	text REGEXP            the agent's text in what the last expect consumed
//	                       (agent_message_chunk texts, joined) matches (negatable)
//	capture NAME PATH      set $NAME to the string or number at PATH (dotted members,
//	                       e.g. result.sessionId) in the frame the last expect matched
//	kill-agent             SIGKILL the sidecar's agent process and wait until it is gone
//	logged FILE REGEXP     wait until the sidecar's log FILE (--log-file, or
//	                       sidecar.log in --state-dir) matches REGEXP: for what the
//	                       sidecar does that the client never sees. Negated, it
//	                       does not wait: FILE does not match now
//	calls FILE             print the fake agent's -call-log FILE, one call a line, to
//	                       stdout (for cmp): who sent it (client, sidecar, or notify
//	                       for a notification), the method, the session and what
//	                       it sets or says
//
// A JSON PATTERN matches a frame that holds it: every member of an object
// pattern must be in the frame's object and match there; arrays and scalars
// must be equal (arrays element by element). With -re, PATTERN is a regular
// expression over the frame's raw bytes.
//
// Every wait is for an event, bounded by scenarioBound only to turn a hang
// into a failure that shows the frames seen.

// scenarioBound bounds each wait; the machine may be small and under -race.
const scenarioBound = 60 * time.Second

// scenarioKey is the key of a script's *scenario in testscript's Values.
type scenarioKey struct{}

// scenario is one script's client: the sidecar it runs and its read cursor.
type scenario struct {
	c      *acpclient.RawClient
	stderr *acpclient.Buffer
	cancel context.CancelFunc
	seen   int      // frames before this index have been consumed by expect
	window [][]byte // the frames the last expect consumed, its match last
}

// scenarioSetup gives each script its own client state and makes sure a
// sidecar the script left running is killed at the end.
func scenarioSetup(env *testscript.Env) error {
	s := &scenario{}
	env.Values[scenarioKey{}] = s
	env.Defer(func() {
		if s.c != nil {
			_ = s.c.Kill()
			_, _ = s.c.Close()
		}
		if s.cancel != nil {
			s.cancel()
		}
	})
	return nil
}

// TestScript runs the txtar scripts in testdata/script. They need Linux:
// kill-agent finds the agent in /proc, and scripts exec grep.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("GORACE", os.Getenv("GORACE"))
			return scenarioSetup(env)
		},
		Cmds: scenarioCmds(),
	})
}

// scenarioCmds are the script commands above, for testscript.Params.Cmds.
func scenarioCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"client":     cmdClient,
		"send":       cmdSend,
		"expect":     cmdExpect,
		"saw":        cmdSaw,
		"text":       cmdText,
		"capture":    cmdCapture,
		"kill-agent": cmdKillAgent,
		"logged":     cmdLogged,
		"calls":      cmdCalls,
	}
}

func scenarioOf(ts *testscript.TestScript) *scenario {
	s, ok := ts.Value(scenarioKey{}).(*scenario)
	if !ok {
		ts.Fatalf("no scenario state: TestScript's Setup must call scenarioSetup")
	}
	return s
}

// running returns the script's client, failing the script if none runs.
func (s *scenario) running(ts *testscript.TestScript) *acpclient.RawClient {
	if s.c == nil {
		ts.Fatalf("no client: run `client start` first")
	}
	return s.c
}

func cmdClient(ts *testscript.TestScript, neg bool, args []string) {
	s := scenarioOf(ts)
	if len(args) == 0 {
		ts.Fatalf("usage: client start ARGS... | client stop | client term")
	}
	switch args[0] {
	case "start":
		if neg {
			ts.Fatalf("client start cannot be negated")
		}
		if s.c != nil {
			ts.Fatalf("a client is already running")
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		s.stderr = &acpclient.Buffer{}
		// The sidecar runs in the script's environment, not the test
		// binary's: PATH holds the acp-sidecar that testscript.Main made.
		var env []string
		for _, k := range []string{"PATH", "HOME", "TMPDIR", "GORACE", "GOCOVERDIR"} {
			env = append(env, k+"="+ts.Getenv(k))
		}
		c, err := acpclient.StartRaw(ctx, append([]string{"acp-sidecar"}, args[1:]...), acpclient.Options{
			Stderr: s.stderr, Env: env, Dir: ts.MkAbs("."), CloseTimeout: scenarioBound,
		})
		ts.Check(err)
		s.c, s.seen, s.window = c, 0, nil
	case "stop", "term":
		c := s.running(ts)
		what := "stdin EOF"
		if args[0] == "term" {
			what = "SIGTERM"
			ts.Check(syscall.Kill(c.Pid(), syscall.SIGTERM))
		} else {
			ts.Check(c.CloseStdin())
		}
		ctx, cancel := context.WithTimeout(context.Background(), scenarioBound)
		defer cancel()
		code, err := c.Wait(ctx)
		fmt.Fprintf(ts.Stdout(), "%s", c.Output())
		fmt.Fprintf(ts.Stderr(), "%s", s.stderr.Bytes())
		if err != nil {
			ts.Fatalf("the sidecar did not exit after %s: %v", what, err)
		}
		if (code != 0) != neg {
			ts.Fatalf("the sidecar exited with status %d", code)
		}
		_, _ = c.Close()
		s.c = nil
	default:
		ts.Fatalf("unknown client command %q: want start, stop or term", args[0])
	}
}

// jsonArg reads a JSON argument: inline if it starts like JSON, else the
// named file of the script.
func jsonArg(ts *testscript.TestScript, arg string) []byte {
	b := []byte(arg)
	if !strings.HasPrefix(arg, "{") && !strings.HasPrefix(arg, "[") {
		b = []byte(ts.ReadFile(arg))
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		ts.Fatalf("not JSON: %v: %s", err, b)
	}
	return out.Bytes()
}

func cmdSend(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: send FRAME|FILE")
	}
	c := scenarioOf(ts).running(ts)
	if strings.HasSuffix(args[0], ".jsonl") {
		// Several frames in one write, as a client that sends them back
		// to back: the sidecar reads them at once.
		var frames []string
		for _, line := range strings.Split(strings.TrimSpace(ts.ReadFile(args[0])), "\n") {
			var out bytes.Buffer
			if err := json.Compact(&out, []byte(line)); err != nil {
				ts.Fatalf("%s: not JSON: %v: %s", args[0], err, line)
			}
			ts.Logf("> %s", out.Bytes())
			frames = append(frames, out.String())
		}
		ts.Check(c.WriteLine(strings.Join(frames, "\n")))
		return
	}
	frame := jsonArg(ts, args[0])
	if !strings.HasPrefix(args[0], "{") && !strings.HasPrefix(args[0], "[") {
		ts.Logf("> %s", frame)
	}
	ts.Check(c.WriteLine(string(frame)))
}

// matcher reports whether a frame matches a pattern.
type matcher struct {
	what string
	f    func(frame []byte) bool
}

// patternArgs parses [-re] PATTERN.
func patternArgs(ts *testscript.TestScript, cmd string, args []string) matcher {
	switch {
	case len(args) == 2 && args[0] == "-re":
		re, err := regexp.Compile(args[1])
		ts.Check(err)
		return matcher{"/" + args[1] + "/", re.Match}
	case len(args) == 1:
		var want any
		if err := json.Unmarshal(jsonArg(ts, args[0]), &want); err != nil {
			ts.Fatalf("%s: pattern: %v", cmd, err)
		}
		return matcher{args[0], func(frame []byte) bool {
			var got any
			return json.Unmarshal(frame, &got) == nil && holds(got, want)
		}}
	}
	ts.Fatalf("usage: %s [-re] PATTERN", cmd)
	return matcher{}
}

// holds reports whether got holds want: objects by subset, recursively;
// arrays element by element, of the same length; anything else by equality.
func holds(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !holds(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !holds(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return got == want
}

func cmdExpect(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("expect cannot be negated: expect a later frame, then `! saw PATTERN`")
	}
	s := scenarioOf(ts)
	c := s.running(ts)
	m := patternArgs(ts, "expect", args)
	ctx, cancel := context.WithTimeout(context.Background(), scenarioBound)
	defer cancel()
	from := s.seen
	for {
		lines, err := c.WaitLines(ctx, from+1)
		for i := from; i < len(lines); i++ {
			if m.f(lines[i]) {
				s.window = lines[s.seen : i+1]
				s.seen = i + 1
				ts.Logf("< %s", clip(lines[i]))
				return
			}
		}
		if err != nil {
			ts.Fatalf("no frame matching %s: %v\n%s", m.what, err, s.report(lines))
		}
		from = len(lines)
	}
}

// report shows what the client got, for a failure: the frames the last
// successful expect consumed, then every frame after them, then the
// sidecar's log.
func (s *scenario) report(lines [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "frames the last successful expect consumed (%d):\n", len(s.window))
	for _, l := range s.window {
		fmt.Fprintf(&b, "  %s\n", clip(l))
	}
	fmt.Fprintf(&b, "frames after them (%d):\n", len(lines)-min(s.seen, len(lines)))
	for _, l := range lines[min(s.seen, len(lines)):] {
		fmt.Fprintf(&b, "  %s\n", clip(l))
	}
	fmt.Fprintf(&b, "sidecar stderr:\n%s", s.stderr.Bytes())
	return b.String()
}

func cmdSaw(ts *testscript.TestScript, neg bool, args []string) {
	s := scenarioOf(ts)
	m := patternArgs(ts, "saw", args)
	var hit []byte
	for _, l := range s.window {
		if m.f(l) {
			hit = l
			break
		}
	}
	switch {
	case hit == nil && !neg:
		ts.Fatalf("no frame the last expect consumed matches %s\n%s", m.what, s.report(s.c.Lines()))
	case hit != nil && neg:
		ts.Fatalf("a frame the last expect consumed matches %s: %s\n%s", m.what, clip(hit), s.report(s.c.Lines()))
	}
}

// agentText joins the agent_message_chunk texts among frames, of any session.
func agentText(frames [][]byte) string {
	var b strings.Builder
	for _, l := range frames {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					Content       struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &m) == nil && m.Method == "session/update" && m.Params.Update.SessionUpdate == "agent_message_chunk" {
			b.WriteString(m.Params.Update.Content.Text)
		}
	}
	return b.String()
}

func cmdText(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: text REGEXP")
	}
	s := scenarioOf(ts)
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	text := agentText(s.window)
	if re.MatchString(text) == neg {
		verb := "does not match"
		if neg {
			verb = "matches"
		}
		ts.Fatalf("the agent's text %s /%s/:\n%s", verb, args[0], text)
	}
}

func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: capture NAME PATH")
	}
	s := scenarioOf(ts)
	if len(s.window) == 0 {
		ts.Fatalf("capture: no frame matched yet")
	}
	frame := s.window[len(s.window)-1]
	var v any
	d := json.NewDecoder(bytes.NewReader(frame))
	d.UseNumber() // a numeric id is captured as its digits
	ts.Check(d.Decode(&v))
	for _, member := range strings.Split(args[1], ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			ts.Fatalf("capture: %s: no member %q in %s", args[1], member, clip(frame))
		}
		v = obj[member]
	}
	var str string
	switch v := v.(type) {
	case string:
		str = v
	case json.Number:
		str = v.String()
	default:
		ts.Fatalf("capture: %s is %v, not a string or a number, in %s", args[1], v, clip(frame))
	}
	ts.Setenv(args[0], str)
}

// procStat is what /proc/PID/stat says of a process: enough to tell it
// from a later process with the same pid, and whether it is wholly dead.
type procStat struct {
	ppid    int
	state   byte
	start   string
	threads int // the thread group's live threads, its zombie leader included
}

// readProcStat parses /proc/PID/stat; the command name may hold spaces and
// parentheses, so the fields are read after the last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	threads, err := strconv.Atoi(f[17])
	if err != nil {
		return procStat{}, false
	}
	return procStat{ppid: ppid, state: f[0][0], start: f[19], threads: threads}, true
}

// liveChildren lists the pids of parent's children that are not zombies.
func liveChildren(parent int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.ppid == parent && st.state != 'Z' {
			out = append(out, pid)
		}
	}
	return out, nil
}

// cmdKillAgent SIGKILLs the sidecar's one child, its agent, and waits until
// that process is gone: reaped, or a zombie the sidecar has yet to reap
// whose other threads have all exited. The leader of a Go agent can be a
// zombie while its other threads still run their exit, and one of them,
// woken in a read of its stdin, still takes a line written then: a prompt
// sent "after the kill" reached the dying agent, which is a prompt lost
// with the agent, not one sent while no agent ran. The agent is found by
// its parent pid, as the sidecar starts it directly.
func cmdKillAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: kill-agent")
	}
	c := scenarioOf(ts).running(ts)
	kids, err := liveChildren(c.Pid())
	ts.Check(err)
	if len(kids) != 1 {
		ts.Fatalf("the sidecar has children %v, want exactly one agent", kids)
	}
	pid := kids[0]
	before, ok := readProcStat(pid)
	if !ok {
		ts.Fatalf("agent %d is already gone", pid)
	}
	ts.Check(syscall.Kill(pid, syscall.SIGKILL))
	ts.Logf("killed agent %d", pid)
	deadline := time.Now().Add(scenarioBound)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		now, ok := readProcStat(pid)
		if !ok || now.start != before.start || now.state == 'Z' && now.threads <= 1 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("agent %d still runs %v after SIGKILL", pid, scenarioBound)
		}
		<-tick.C
	}
}

// cmdLogged waits for the sidecar's log file to hold what REGEXP matches.
// A file gives no event to wait on, so it is read every few milliseconds,
// as kill-agent looks at /proc; only the match ends the wait.
func cmdLogged(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: logged FILE REGEXP")
	}
	s := scenarioOf(ts)
	s.running(ts)
	path := ts.MkAbs(args[0])
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	match := func() bool {
		b, err := os.ReadFile(path)
		return err == nil && re.Match(b) // no file yet: nothing logged
	}
	if neg {
		if match() {
			ts.Fatalf("the sidecar logged /%s/ in %s", args[1], args[0])
		}
		return
	}
	deadline := time.Now().Add(scenarioBound)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !match() {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			ts.Fatalf("the sidecar did not log /%s/ in %v; %s:\n%s\n%s", args[1], scenarioBound, args[0], b, s.report(s.c.Lines()))
		}
		<-tick.C
	}
}

func cmdCalls(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: calls FILE")
	}
	calls, err := fakeagent.ReadCallLog(ts.MkAbs(args[0]))
	ts.Check(err)
	for _, c := range calls {
		fmt.Fprintln(ts.Stdout(), describeCall(c))
	}
}

// describeCall is one line of `calls`: who sent the call, its method, its
// session and what it sets or says. The sidecar's own requests carry ids
// of its own id space, "acp-sidecar:N" (DESIGN.md "Data flow" 4).
func describeCall(c fakeagent.Call) string {
	who := "client"
	switch {
	case len(c.ID) == 0:
		who = "notify"
	case bytes.HasPrefix(c.ID, []byte(`"acp-sidecar:`)):
		who = "sidecar"
	}
	parts := []string{fmt.Sprintf("%-7s", who), c.Method}
	if c.SessionID != "" {
		parts = append(parts, c.SessionID)
	}
	var p struct {
		ConfigID string `json:"configId"`
		Value    string `json:"value"`
		ModeID   string `json:"modeId"`
		ModelID  string `json:"modelId"`
		Prompt   []struct {
			Text *string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(c.Params, &p) // a call whose params do not fit shows its method alone
	switch c.Method {
	case "session/set_config_option":
		parts = append(parts, p.ConfigID+"="+p.Value)
	case "session/set_mode":
		parts = append(parts, p.ModeID)
	case "session/set_model":
		parts = append(parts, p.ModelID)
	case "session/fork":
		if at := wire.ForkAtOf(c.Params); at != "" {
			parts = append(parts, "at the message of turn "+turnOfMessage(c.SessionID, at))
		}
		for _, m := range metaOf(c.Params) {
			if meta, ok := strings.CutPrefix(m, "_meta="); ok {
				// The fork point is said above; the rest is the session's.
				if rest := wire.WithoutForkAt(json.RawMessage(meta)); rest != nil {
					parts = append(parts, "_meta="+string(rest))
				}
				continue
			}
			parts = append(parts, m)
		}
	case "session/new", "session/load", "session/resume":
		parts = append(parts, metaOf(c.Params)...)
	case "session/prompt":
		if len(p.Prompt) > 1 {
			parts = append(parts, fmt.Sprintf("(%d blocks)", len(p.Prompt)))
		}
		if n := len(p.Prompt); n > 0 && p.Prompt[n-1].Text != nil {
			parts = append(parts, strconv.Quote(*p.Prompt[n-1].Text))
		}
	}
	return strings.Join(parts, " ")
}

// metaOf is a session call's _meta as `_meta=BYTES`, then its systemPrompt
// as `systemPrompt=BYTES`, exactly as the agent received them; nothing for
// what it has not.
func metaOf(params json.RawMessage) []string {
	var out []string
	for _, key := range []string{"_meta", "systemPrompt"} {
		if start, end, ok := wire.Find(params, key); ok {
			out = append(out, key+"="+string(params[start:end])) // the bytes as received
		}
	}
	return out
}

// turnOfMessage is the turn of session sid whose answer the fake agent sent
// with messageId id (fakeagent.MessageID), as text; "?" for none of the
// first hundred.
func turnOfMessage(sid, id string) string {
	for n := 1; n <= 100; n++ {
		if fakeagent.MessageID(sid, n) == id {
			return strconv.Itoa(n)
		}
	}
	return "?"
}

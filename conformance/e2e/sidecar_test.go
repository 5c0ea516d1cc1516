//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// startSidecar starts `acp-sidecar --state-dir S --log-file L [flags...] --
// argv...` as an editor would, with the agent's environment and working
// directory, and returns it as an agent: to the client it is one. State and
// log live in the test's temp dir; the log is printed when the test fails or
// runs with -v.
func startSidecar(t *testing.T, argv, env []string, dir string, flags ...string) *agent {
	t.Helper()
	return startSidecarState(t, argv, env, dir, t.TempDir(), flags...)
}

// sidecarBounds are the bounds of the sidecar's own calls and of a request
// waiting for a rebuild, for a test's sidecar. The defaults (30 s, 60 s)
// are for a user's machine. On CI, with the other suites and a second job
// beside, claude-agent-acp 0.23.1 took more than 30 s for the session/new
// of a switch, and the switch failed as it should at the default bound (a
// clear error, the session left where it was). With two fuzz workers
// beside, the same session/new took 6-12 s. The tests assert what the
// sidecar does, not how fast a loaded agent is; a hang still fails, at
// stepTimeout. A test's own flags come after these and win.
var sidecarBounds = []string{"--call-timeout", "2m", "--hold-timeout", "3m"}

// startSidecarState is startSidecar with the state directory chosen by the
// caller, so the test can read the record afterwards (`show --json`).
func startSidecarState(t *testing.T, argv, env []string, dir, state string, flags ...string) *agent {
	t.Helper()
	bin := sidecarBinary(t)
	logFile := filepath.Join(t.TempDir(), "sidecar.log")
	// Registered before startAgent, so it runs after the sidecar is stopped
	// and the log holds the shutdown too.
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			data, err := os.ReadFile(logFile)
			t.Logf("sidecar log (%v):\n%s", err, data)
		}
	})
	args := append([]string{bin, "--state-dir", state, "--log-file", logFile}, sidecarBounds...)
	args = append(append(append(args, flags...), "--"), argv...)
	a := startAgent(t, args, env, dir)
	// Registered after startAgent's own cleanup, so it runs first, on
	// everything the client got while the test ran (schema_test.go).
	t.Cleanup(func() {
		if !t.Failed() {
			checkSchema(t, a)
		}
	})
	return a
}

// A sessionRun is what one run of the scripted session left: every frame the
// client received, in order, and every request the mock LLM received.
type sessionRun struct {
	sessionID string
	frames    []frame
	requests  []mockllm.Request
	// dirs maps each temp directory of the run to its role (<home>, <cwd>,
	// <proc>), and the temp root they share to <tmp>. Their names differ
	// between runs, and so does the number within the root: the sidecar
	// run makes two more (state and log).
	dirs map[string]string
}

// runScriptedSession starts claude-agent-acp against a fresh mock LLM with a
// fresh HOME, directly or through the sidecar, and runs one whole session:
// initialize, session/new, model opus[1m] via set_config_option, set_mode
// plan, a prompt, model haiku, a second prompt. It waits for the one
// available_commands_update the agent sends at no fixed point (NOTES.md), so
// both runs end with everything the agent had to say.
func runScriptedSession(t *testing.T, viaSidecar bool) sessionRun {
	argv, env, mock := ClaudeAgentMock(t)
	home := envValue(env, "HOME")
	procDir := t.TempDir()
	var a *agent
	if viaSidecar {
		a = startSidecar(t, argv, env, procDir)
	} else {
		a = startAgent(t, argv, env, procDir)
	}

	initializeAsEditor(t, a)
	cwd := t.TempDir()
	newRes := step(t, a, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(newRes.Result, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s: %v", newRes.Result, err)
	}
	sid := sess.SessionID
	setModel := func(value string) {
		res := step(t, a, "session/set_config_option", map[string]any{"sessionId": sid, "configId": "model", "value": value})
		if got := currentValue(t, res.Result, "model"); got != value {
			t.Fatalf("set_config_option model %q: result has %q: %s", value, got, res.Result)
		}
	}
	prompt := func(text string) {
		res := step(t, a, "session/prompt", map[string]any{
			"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": text}},
		})
		var pr struct {
			StopReason string `json:"stopReason"`
		}
		if err := json.Unmarshal(res.Result, &pr); err != nil || pr.StopReason != "end_turn" {
			t.Fatalf("prompt %q: result %s (%v), want stopReason end_turn", text, res.Result, err)
		}
	}
	setModel("opus[1m]")
	step(t, a, "session/set_mode", map[string]any{"sessionId": sid, "modeId": "plan"})
	prompt("hello")
	setModel("haiku")
	prompt("second prompt")

	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	if _, err := a.waitFrame(ctx, 0, isCommandsUpdate); err != nil {
		t.Fatalf("no available_commands_update within %v: %v", stepTimeout, err)
	}
	return sessionRun{
		sessionID: sid,
		frames:    a.framesSince(0),
		requests:  mock.Requests(),
		dirs: map[string]string{
			home: "<home>", cwd: "<cwd>", procDir: "<proc>", filepath.Dir(procDir): "<tmp>",
		},
	}
}

// envValue returns the value of key in env, or "".
func envValue(env []string, key string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func isCommandsUpdate(f frame) bool {
	var p struct {
		Update json.RawMessage `json:"update"`
	}
	return f.Method == "session/update" && json.Unmarshal(f.Params, &p) == nil &&
		updateKind(p.Update) == "available_commands_update"
}

// TestClaudeAgentThroughSidecar runs the same scripted session twice, once
// against claude-agent-acp directly and once through `acp-sidecar -- node
// …`, each with its own HOME and mock LLM, and asserts the sidecar changed
// nothing but what DESIGN.md says it adds (see sidecarAdditions): the client
// receives the same frames, byte for byte once what legitimately differs
// between two runs is normalized (see normalizer), and the LLM receives the
// same requests.
func TestClaudeAgentThroughSidecar(t *testing.T) {
	sidecarBinary(t) // fail before the direct run if there is nothing to compare
	var direct, via sessionRun
	if !t.Run("direct", func(t *testing.T) { direct = runScriptedSession(t, false) }) {
		t.FailNow()
	}
	if !t.Run("sidecar", func(t *testing.T) { via = runScriptedSession(t, true) }) {
		t.FailNow()
	}
	nd, nv := newNormalizer(direct), newNormalizer(via)

	// The frames. First the sidecar's documented additions come out of its
	// run, byte-precisely (sidecarAdditions). Then the agent's
	// available_commands_update, which comes once per session at no fixed
	// point (NOTES.md: in one run just before the first set_config_option
	// response), is taken out of the sequence and compared on its own, as a
	// multiset; everything else must be equal, in order.
	viaFrames, adds := sidecarAdditions(t, via.frames, sessionCapsOf(direct.frames))
	for _, a := range adds {
		t.Logf("sidecar addition: %s", a)
	}
	dSeq, dCmds := splitFrames(direct.frames, nd)
	vSeq, vCmds := splitFrames(viaFrames, nv)
	if len(dCmds) != 1 {
		t.Errorf("direct run: %d available_commands_update frames, want 1 (NOTES.md)", len(dCmds))
	}
	slices.Sort(dCmds)
	slices.Sort(vCmds)
	compareLines(t, "available_commands_update frames", dCmds, vCmds)
	compareLines(t, "client-received frames", dSeq, vSeq)

	// The LLM's side. The direct run is checked against NOTES.md first, so
	// that equality below is not equality of two empty or broken runs.
	dReqs, vReqs := summarizeRequests(direct.requests, nd), summarizeRequests(via.requests, nv)
	var models, lasts []string
	for _, r := range direct.requests {
		if r.Path == "/v1/messages" {
			models = append(models, r.Model)
			lasts = append(lasts, r.LastUserText())
		}
	}
	// haiku in plan mode is not a mistake of the script: claude code runs
	// sonnet instead while the mode is plan (cli.js: `if(model==="haiku"&&
	// permissionMode==="plan")return <sonnet>`; NOTES.md).
	if want := []string{"claude-opus-4-6", "claude-sonnet-4-6"}; !slices.Equal(models, want) {
		t.Errorf("direct run: mock saw /v1/messages models %q, want %q", models, want)
	}
	if want := []string{"hello", "second prompt"}; !slices.Equal(lasts, want) {
		t.Errorf("direct run: mock saw last user texts %q, want %q", lasts, want)
	}
	compareLines(t, "mock LLM requests", dReqs, vReqs)
}

// A normalizer rewrites what legitimately differs between two runs of the
// same session, and nothing else:
//   - the native session id (a fresh UUID per run) becomes <session>, and any
//     other UUID <uuid>;
//   - the run's temp directories become their role, <home>, <cwd> (the
//     session's), <proc> (the agent's working directory) or <tmp> (their
//     root), also in the form claude uses for project directories under
//     ~/.claude/projects (every non-alphanumeric byte turned into '-');
//   - the plan file claude names with three random words when plan mode is
//     on (~/.claude/plans/wild-conjuring-dragon.md) becomes <plan>.md;
//   - RFC 3339 timestamps become <time> and dates <date> (the LLM is told
//     today's date; two runs may straddle midnight);
//   - usage numbers and costs (usage_update used and cost.amount, the prompt
//     result's token counts) become 0: the mock estimates tokens from the
//     request's length, and that includes the temp paths.
//
// Field order, spacing and every other byte stay as they are, so a sidecar
// that re-encoded a frame would show up.
type normalizer struct {
	paths *strings.Replacer
}

var (
	uuidRE     = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	timeRE     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
	dateRE     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	usageRE    = regexp.MustCompile(`"(used|amount|inputTokens|outputTokens|cachedReadTokens|cachedWriteTokens|thoughtTokens|totalTokens)":-?[0-9][0-9.eE+-]*`)
	planRE     = regexp.MustCompile(`/\.claude/plans/[a-z]+(-[a-z]+)*\.md`)
	nonAlnumRE = regexp.MustCompile(`[^a-zA-Z0-9]`)
)

func newNormalizer(r sessionRun) normalizer {
	// Longest first: a strings.Replacer tries its pairs in argument order,
	// and the root is a prefix of the others.
	dirs := slices.SortedFunc(maps.Keys(r.dirs), func(a, b string) int { return len(b) - len(a) })
	pairs := []string{r.sessionID, "<session>"}
	for _, d := range dirs {
		pairs = append(pairs, d, r.dirs[d])
	}
	for _, d := range dirs {
		pairs = append(pairs, nonAlnumRE.ReplaceAllString(d, "-"), r.dirs[d])
	}
	return normalizer{paths: strings.NewReplacer(pairs...)}
}

func (n normalizer) text(s string) string {
	s = n.paths.Replace(s)
	s = planRE.ReplaceAllString(s, "/.claude/plans/<plan>.md")
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	s = timeRE.ReplaceAllString(s, "<time>")
	return dateRE.ReplaceAllString(s, "<date>")
}

func (n normalizer) frame(raw []byte) string {
	return usageRE.ReplaceAllString(n.text(string(raw)), `"$1":0`)
}

// sidecarCommands are the slash commands DESIGN.md ("Surfaces") says the
// sidecar merges into the agent's available_commands_update.
var sidecarCommands = []string{"rewind", "reset", "restore-original", "accept-config", "sidecar-status"}

// sidecarAdditions takes out of the frames a client received through the
// sidecar exactly what DESIGN.md says the sidecar adds, and returns the
// frames as the agent sent them, with a description of each addition:
//   - agentCapabilities._meta["acp-sidecar"] in the initialize result
//     ("Surfaces": the `_sidecar/*` methods are advertised there);
//   - the sessionCapabilities the sidecar answers for where the agent
//     lacks them (resume, list, fork, close, delete: "A session's whole
//     life"), each `{}`; agentCaps are the agent's own, from the direct run;
//   - the sidecar's slash commands in an available_commands_update (merged
//     into the agent's list);
//   - an available_commands_update that holds nothing but the sidecar's
//     commands: intercept sends one for each new session in case the agent
//     never sends its own. It is dropped here, but it must come before the
//     agent's merged list, because each update replaces the client's list:
//     after it, the client would see none of the agent's commands.
//
// The removal cuts the added member's bytes, with one adjacent comma, out of
// the line and touches nothing else, so a sidecar that re-encoded, reordered
// or respaced the agent's bytes while adding still fails the comparison.
func sidecarAdditions(t *testing.T, frames []frame, agentCaps map[string]bool) ([]frame, []string) {
	t.Helper()
	var out []frame
	var adds []string
	own, merged := -1, -1
	for i, f := range frames {
		raw := string(f.Raw)
		switch {
		case f.Method == "" && f.Result != nil && string(f.ID) == "1": // initialize is the client's request 1
			var r struct {
				AgentCapabilities struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"agentCapabilities"`
			}
			if json.Unmarshal(f.Result, &r) == nil {
				if adv, ok := r.AgentCapabilities.Meta["acp-sidecar"]; ok {
					raw = cutMember(t, raw, `"acp-sidecar":`+string(adv))
					adds = append(adds, "initialize agentCapabilities._meta[acp-sidecar] = "+string(adv))
				}
			}
			for k := range sessionCapsOf([]frame{f}) {
				if !agentCaps[k] {
					raw = cutMember(t, raw, `"`+k+`":{}`)
					adds = append(adds, "initialize sessionCapabilities."+k)
				}
			}
		case isCommandsUpdate(f):
			var u struct {
				Params struct {
					Update struct {
						AvailableCommands []json.RawMessage `json:"availableCommands"`
					} `json:"update"`
				} `json:"params"`
			}
			if err := json.Unmarshal(f.Params, &u.Params); err != nil {
				t.Errorf("decode available_commands_update %s: %v", f.Raw, err)
				break
			}
			var removed []string
			agentCmds := 0
			for _, c := range u.Params.Update.AvailableCommands {
				var cmd struct {
					Name string `json:"name"`
				}
				if json.Unmarshal(c, &cmd) == nil && slices.Contains(sidecarCommands, cmd.Name) {
					raw = cutMember(t, raw, string(c))
					removed = append(removed, cmd.Name)
				} else {
					agentCmds++
				}
			}
			if agentCmds == 0 && len(removed) > 0 {
				if own >= 0 {
					t.Errorf("two command lists of the sidecar's own (frames #%d and #%d)", own, i)
				}
				own = i
				adds = append(adds, fmt.Sprintf("frame #%d: own available_commands_update %q", i, removed))
				continue
			}
			merged = i
			if len(removed) > 0 {
				adds = append(adds, fmt.Sprintf("frame #%d: commands %q merged into the agent's list", i, removed))
			}
		}
		g := f
		g.Raw = json.RawMessage(raw)
		out = append(out, g)
	}
	if own > merged {
		t.Errorf("the sidecar's own command list (frame #%d) came after the agent's (frame #%d): the client's list now lacks the agent's commands", own, merged)
	}
	return out, adds
}

// sessionCapsOf is the sessionCapabilities of the initialize result among
// frames.
func sessionCapsOf(frames []frame) map[string]bool {
	caps := map[string]bool{}
	for _, f := range frames {
		if f.Method != "" || f.Result == nil || string(f.ID) != "1" {
			continue
		}
		var r struct {
			AgentCapabilities struct {
				SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
			} `json:"agentCapabilities"`
		}
		if json.Unmarshal(f.Result, &r) == nil {
			for k := range r.AgentCapabilities.SessionCapabilities {
				caps[k] = true
			}
		}
	}
	return caps
}

// cutMember removes member (an object member or array element, exactly as
// it appears in line) and one comma next to it. It must occur exactly once.
func cutMember(t *testing.T, line, member string) string {
	t.Helper()
	for _, cut := range []string{"," + member, member + ",", member} {
		if n := strings.Count(line, cut); n == 1 {
			return strings.Replace(line, cut, "", 1)
		} else if n > 1 {
			break
		}
	}
	t.Errorf("cannot cut %s out of %s: not there exactly once", member, line)
	return line
}

// splitFrames normalizes frames and separates the available_commands_update
// notifications from the rest.
func splitFrames(frames []frame, n normalizer) (seq, cmds []string) {
	for _, f := range frames {
		if isCommandsUpdate(f) {
			cmds = append(cmds, n.frame(f.Raw))
			continue
		}
		seq = append(seq, n.frame(f.Raw))
	}
	return seq, cmds
}

// summarizeRequests renders each request the mock received as one line of
// what must be the same in both runs: method, path, query, the answer's
// status, the model, streaming, the anthropic-beta flags, the system prompt
// and every user text block, normalized.
func summarizeRequests(reqs []mockllm.Request, n normalizer) []string {
	var out []string
	for _, r := range reqs {
		s, err := json.Marshal(map[string]any{
			"request":   r.Method + " " + r.Path + "?" + r.Query,
			"status":    r.Status,
			"model":     r.Model,
			"stream":    r.Stream,
			"beta":      r.Header.Get("Anthropic-Beta"),
			"messages":  r.Messages(),
			"system":    n.text(r.System()),
			"userTexts": normalizeAll(r.UserTexts(), n),
		})
		if err != nil {
			panic(err) // strings, ints and bools always encode
		}
		out = append(out, string(s))
	}
	return out
}

func normalizeAll(ss []string, n normalizer) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = n.text(s)
	}
	return out
}

// compareLines reports the first difference between two sequences of
// normalized lines: the index, the byte offset and a window around it.
func compareLines(t *testing.T, what string, direct, via []string) {
	t.Helper()
	if slices.Equal(direct, via) {
		t.Logf("%s: %d equal after normalization", what, len(direct))
		return
	}
	for i := range max(len(direct), len(via)) {
		if i >= len(direct) || i >= len(via) {
			t.Errorf("%s: direct has %d, through the sidecar %d; first extra: %s", what, len(direct), len(via),
				clip(slices.Concat(direct[min(i, len(direct)):], via[min(i, len(via)):])[0], 0))
			return
		}
		if d, v := direct[i], via[i]; d != v {
			off := 0
			for off < len(d) && off < len(v) && d[off] == v[off] {
				off++
			}
			t.Errorf("%s differ at #%d (of %d and %d), byte %d:\n direct:  %s\n sidecar: %s",
				what, i, len(direct), len(via), off, clip(d, off), clip(v, off))
			return
		}
	}
}

// clip returns up to 300 bytes of s around off.
func clip(s string, off int) string {
	lo, hi := max(0, off-150), min(len(s), off+150)
	return fmt.Sprintf("…%s…", s[lo:hi])
}

// TestSidecarStopsAgentOnClientEOF closes the sidecar's stdin, as an editor
// that closes the pipe does, and checks that nothing the sidecar started
// outlives it, although claude-agent-acp ignores EOF (agents.md,
// "Processes"): the sidecar must escalate to signals on the whole tree.
func TestSidecarStopsAgentOnClientEOF(t *testing.T) {
	argv, env := ClaudeAgent(t)
	a := startSidecar(t, argv, env, t.TempDir(), "--grace", "1s")
	sidecarPid := a.cmd.Process.Pid

	// Whatever happens below, no recorded process outlives the test.
	seen := map[int]procInfo{}
	t.Cleanup(func() {
		for pid, p := range seen {
			if cur, err := readProc(pid); err == nil && cur.start == p.start {
				_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: gone meanwhile
			}
		}
	})
	record := func() {
		for _, pid := range descendantsOf(sidecarPid) {
			if _, ok := seen[pid]; ok {
				continue
			}
			if p, err := readProc(pid); err == nil {
				seen[pid] = p
			}
		}
	}

	step(t, a, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	record()
	// session/new makes claude-agent-acp start its claude CLI child.
	step(t, a, "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	record()
	var agentSeen, grandchild bool
	for pid, p := range seen {
		t.Logf("sidecar descendant %d (ppid %d, %s): %s", pid, p.ppid, p.comm, p.cmdline)
		agentSeen = agentSeen || (p.ppid == sidecarPid && strings.Contains(p.cmdline, argv[len(argv)-1]))
		grandchild = grandchild || p.ppid != sidecarPid
	}
	if !agentSeen {
		t.Fatalf("no child of the sidecar (pid %d) runs %s; descendants: %v", sidecarPid, argv[len(argv)-1], seen)
	}
	// The claude CLI, a child of node, is what makes this a test of the
	// whole tree rather than of the direct child.
	if !grandchild {
		t.Fatalf("claude-agent-acp started no child by session/new; descendants: %v", seen)
	}

	record()
	if err := a.stdin.Close(); err != nil {
		t.Fatalf("close the sidecar's stdin: %v", err)
	}
	if !waitOrTimeout(a.exited, eofExitBound) {
		t.Fatalf("sidecar (pid %d, --grace 1s) still running %v after its stdin was closed", sidecarPid, eofExitBound)
	}
	t.Logf("sidecar exited: %v", a.waitErr)

	for pid, p := range seen {
		cur, err := readProc(pid)
		switch {
		case err != nil || cur.start != p.start:
			// Gone (or the pid was reused by an unrelated process).
		case cur.state == "Z" || cur.state == "X":
			// Dead; only its exit status waits for a reaper (the sidecar
			// was its subreaper and is gone, so init inherits it).
			t.Logf("pid %d (%s) is a zombie after the sidecar exited", pid, p.comm)
		case cur.flags&pfExiting != 0:
			// In the kernel's exit path: it runs no more user code. The
			// claude CLI can take a second or more there, after the
			// sidecar, which does not wait for it, has exited.
			t.Logf("pid %d (%s, state %s) is exiting after the sidecar exited", pid, p.comm, cur.state)
		default:
			t.Errorf("pid %d (%s, state %s, flags %#x) outlived the sidecar: %s", pid, p.comm, cur.state, cur.flags, p.cmdline)
		}
	}
}

// eofExitBound bounds how long the sidecar may take to go down after client
// EOF with --grace 1s: two grace steps (EOF, then SIGTERM) and the SIGKILL,
// with a wide margin for a loaded machine. It is a hang guard, not a
// duration assertion.
const eofExitBound = 30 * time.Second

// procInfo is what the test reads of a process from /proc/PID/stat and
// cmdline. start (clock ticks since boot) tells a process from a later one
// that reuses its pid.
type procInfo struct {
	ppid    int
	comm    string
	state   string
	flags   uint64 // the kernel's PF_* flags
	start   string
	cmdline string
}

// pfExiting is PF_EXITING (include/linux/sched.h): set when a process
// starts to exit, by exit_group or by a fatal signal such as SIGKILL.
const pfExiting = 0x4

func readProc(pid int) (procInfo, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, err
	}
	// comm is in parentheses and may hold spaces and parentheses: the other
	// fields follow the last ')'. After it come field 3 (state), 4 (ppid),
	// …, 9 (flags), …, 22 (starttime).
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %d fields after comm", pid, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat ppid: %w", pid, err)
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat flags: %w", pid, err)
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)) // empty for a zombie
	return procInfo{
		ppid: ppid, comm: s[open+1 : end], state: f[0], flags: flags, start: f[19],
		cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")),
	}, nil
}

// descendantsOf lists every process below pid, found by walking parent pids
// in /proc/*/stat.
func descendantsOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if info, err := readProc(p); err == nil {
			children[info.ppid] = append(children[info.ppid], p)
		}
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// TestNormalizer pins what the normalizer may hide, so that equality in
// TestClaudeAgentThroughSidecar means what it says: ids, temp paths and
// usage numbers differ legitimately; key order, spacing and values do not.
func TestNormalizer(t *testing.T) {
	n := newNormalizer(sessionRun{
		sessionID: "0e559358-65b9-4304-b6a6-08e5a060338a",
		dirs:      map[string]string{"/tmp/T1/001": "<home>", "/tmp/T1": "<tmp>"},
	})
	m := newNormalizer(sessionRun{
		sessionID: "11111111-2222-3333-4444-555555555555",
		dirs:      map[string]string{"/tmp/T22/001": "<home>", "/tmp/T22": "<tmp>"},
	})
	same := [][2]string{
		{`{"sessionId":"0e559358-65b9-4304-b6a6-08e5a060338a","cost":{"amount":0.12465999999999999,"currency":"USD"},"used":24863}`,
			`{"sessionId":"11111111-2222-3333-4444-555555555555","cost":{"amount":0.2,"currency":"USD"},"used":7}`},
		{`{"path":"/tmp/T1/001/.claude/projects/-tmp-T1-001/memory","at":"2026-01-02T03:04:05.678Z"}`,
			`{"path":"/tmp/T22/001/.claude/projects/-tmp-T22-001/memory","at":"2027-11-12T13:14:15Z"}`},
		{`{"usage":{"inputTokens":24862,"outputTokens":14,"totalTokens":24876}}`,
			`{"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`},
	}
	for _, p := range same {
		if a, b := n.frame([]byte(p[0])), m.frame([]byte(p[1])); a != b {
			t.Errorf("normalized differently:\n %s\n %s", a, b)
		}
	}
	differ := [][2]string{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`{"a":1}`, `{"a": 1}`},
		{`{"size":1000000}`, `{"size":200000}`},
		{`{"text":"model=claude-opus-4-6 "}`, `{"text":"model=claude-haiku-4-5 "}`},
		{`{"cwd":"/tmp/T1/001"}`, `{"cwd":"/tmp/T22"}`},
	}
	for _, p := range differ {
		if a, b := n.frame([]byte(p[0])), m.frame([]byte(p[1])); a == b {
			t.Errorf("%s and %s both normalized to %s", p[0], p[1], a)
		}
	}
}

// TestSidecarAdditions pins that taking the sidecar's documented additions
// out restores the agent's bytes exactly, and only then.
func TestSidecarAdditions(t *testing.T) {
	mk := func(lines ...string) []frame {
		var fs []frame
		for _, l := range lines {
			var f frame
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			f.Raw = json.RawMessage(l)
			fs = append(fs, f)
		}
		return fs
	}
	agentInit := `{"jsonrpc":"2.0","id":1,"result":{"agentCapabilities":{"_meta":{"claudeCode":{"x":true}},"loadSession":true}}}`
	agentCmds := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"d"}]}}}`
	via := mk(
		`{"jsonrpc":"2.0","id":1,"result":{"agentCapabilities":{"_meta":{"claudeCode":{"x":true},"acp-sidecar":{"methods":["_sidecar/reset"]}},"loadSession":true}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"availableCommands":[{"description":"r","name":"reset"}],"sessionUpdate":"available_commands_update"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"d"},{"description":"r","name":"reset"}]}}}`,
		// Re-encoded by a sidecar: the same value, other bytes.
		`{"jsonrpc":"2.0","id":1,"result":{"agentCapabilities":{"loadSession":true,"_meta":{"claudeCode":{"x":true},"acp-sidecar":{}}}}}`,
	)
	got, adds := sidecarAdditions(t, via, nil)
	if len(got) != 3 || len(adds) != 4 {
		t.Fatalf("got %d frames and additions %q, want 3 frames and 4 additions", len(got), adds)
	}
	if string(got[0].Raw) != agentInit || string(got[1].Raw) != agentCmds {
		t.Errorf("additions not cut out exactly:\n %s\n %s", got[0].Raw, got[1].Raw)
	}
	if string(got[2].Raw) == agentInit {
		t.Errorf("a re-encoded initialize result passed as the agent's bytes")
	}
}

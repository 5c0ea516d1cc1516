//go:build linux

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// bound is how long any one request may go unanswered: past it the client
// counts a hang.
const bound = 20 * time.Second

// closeBound is how long a sidecar may take to exit after its stdin ends.
const closeBound = 10 * time.Second

// dumpEnv goes into every sidecar's environment, and so its agent's: a
// SIGQUIT (dumpGoroutines) then prints every goroutine.
var dumpEnv = []string{"GOTRACEBACK=all"}

// report counts what a test did; its line ends every test.
type report struct {
	name  string
	seed  uint64
	mu    sync.Mutex
	runs  int
	kills int
	lost  int
	hangs int
	// partial counts prompts that ran on another config than the capture,
	// twice requests answered more than once.
	partial, twice int
	bad            int // runs that broke an invariant: their kills did not survive
	extra          []string
}

func (r *report) add(f func(r *report)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *report) hang() { r.add(func(r *report) { r.hangs++ }) }

// print logs the report line. Kills survived are those of runs that kept
// every invariant.
func (r *report) print(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("chaos report %s: runs=%d kills=%d survived=%d turns-lost=%d hangs=%d partial-config=%d answered-twice=%d seed=%d %s",
		r.name, r.runs, r.kills, r.kills-r.bad, r.lost, r.hangs, r.partial, r.twice, r.seed, strings.Join(r.extra, " "))
	if r.lost > 0 || r.hangs > 0 || r.partial > 0 || r.twice > 0 {
		t.Errorf("chaos %s: %d turns lost, %d hangs, %d prompts on a partial config, %d requests answered twice (all must be 0); replay with -chaos.seed %d",
			r.name, r.lost, r.hangs, r.partial, r.twice, r.seed)
	}
}

// sidecar is one real sidecar process around `acp-sidecar fakeagent`,
// driven by a scripted client.
type sidecar struct {
	t      *testing.T
	c      *acpclient.Client
	pid    int
	dir    string // --state-dir
	stderr *acpclient.Buffer

	dumpOnce  sync.Once
	mu        sync.Mutex
	agents    []procInfo // every agent process seen
	onPermit  func()     // runs when the agent asks permission; may be nil
	cancelCtx context.CancelFunc
}

// startSidecar starts the sidecar on state dir dir around the fake agent
// with agentArgs.
func startSidecar(t *testing.T, dir string, agentArgs []string, extra ...string) (*sidecar, error) {
	bin := binary(t)
	s := &sidecar{t: t, dir: dir, stderr: &acpclient.Buffer{}}
	argv := append([]string{bin, "--state-dir", dir, "--grace", "500ms"}, extra...)
	argv = append(append(argv, "--", bin, "fakeagent"), agentArgs...)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	s.cancelCtx = cancel
	c, err := acpclient.Start(ctx, argv, acpclient.Options{
		Stderr:       s.stderr,
		Env:          dumpEnv,
		Dir:          dir,
		CloseTimeout: closeBound,
		Permission: func(req acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
			s.mu.Lock()
			f := s.onPermit
			s.onPermit = nil
			s.mu.Unlock()
			if f != nil {
				f()
			}
			return acp.NewRequestPermissionOutcomeSelected(req.Options[0].OptionId)
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	s.c, s.pid = c, c.Pid()
	t.Cleanup(func() {
		c.Kill()
		cancel()
	})
	return s, nil
}

// agent returns the sidecar's agent process now (waiting up to 5 s for one
// to run, as after a restart) and remembers it.
func (s *sidecar) agent() (procInfo, bool) {
	p, ok := agentOf(s.pid, 5*time.Second)
	if ok {
		s.mu.Lock()
		seen := false
		for _, a := range s.agents {
			seen = seen || a == p
		}
		if !seen {
			s.agents = append(s.agents, p)
		}
		s.mu.Unlock()
	}
	return p, ok
}

// leftBehind returns the agent processes seen that still run.
func (s *sidecar) leftBehind() []procInfo {
	s.mu.Lock()
	agents := append([]procInfo(nil), s.agents...)
	s.mu.Unlock()
	var out []procInfo
	for _, a := range agents {
		if !waitGone(a, 5*time.Second) {
			out = append(out, a)
		}
	}
	return out
}

// close ends the client's input and waits for the sidecar to exit; it must
// go on its own, within closeBound. One that does not prints its goroutines
// into the log (dump) before it is killed.
func (s *sidecar) close() error {
	s.c.CloseStdin()
	ctx, cancel := context.WithTimeout(context.Background(), closeBound)
	_, werr := s.c.Wait(ctx)
	cancel()
	if werr != nil {
		s.dump(fmt.Sprintf("did not exit within %v after stdin EOF", closeBound))
	}
	_, err := s.c.Close()
	s.cancelCtx()
	if werr != nil || errors.Is(err, acpclient.ErrKilled) {
		return fmt.Errorf("sidecar %d did not exit after stdin EOF: %w", s.pid, acpclient.ErrKilled)
	}
	return nil
}

// dump makes the sidecar and its agent print their goroutines and exit
// (dumpGoroutines), once, and logs the sidecar's stderr, which holds both
// dumps: what a hang or a sidecar that does not exit leaves to read.
func (s *sidecar) dump(why string) {
	s.dumpOnce.Do(func() {
		// The client's side first, as it is at the hang: a client that
		// stopped reading would stall the sidecar too.
		client := clientSide(s.c)
		dumpGoroutines(s.pid)
		// The stderr copy ends once every process holding the pipe is gone.
		ctx, cancel := context.WithTimeout(context.Background(), closeBound)
		_, err := s.c.Wait(ctx)
		cancel()
		if err != nil {
			s.t.Logf("sidecar %d: still running after SIGQUIT: %v", s.pid, err)
		}
		s.t.Logf("sidecar %d %s; its client: %s\nits stderr, with its goroutines and its agent's (SIGQUIT):\n%s", s.pid, why, client, s.stderr.String())
	})
}

// clientSide describes the scripted client of a sidecar for a hang report:
// the last lines it read, and the test's goroutines in acpclient and the
// SDK under it (those of every client: the test runs several).
func clientSide(c *acpclient.Client) string {
	var b strings.Builder
	lines := c.Lines()
	b.WriteString(fmt.Sprintf("%d lines read; the last:", len(lines)))
	for _, l := range lines[max(0, len(lines)-10):] {
		b.WriteString("\n  ")
		b.Write(l[:min(len(l), 300)])
	}
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "/acpclient.") || strings.Contains(g, "/acp-go-sdk.") {
			b.WriteString("\n")
			b.WriteString(g)
		}
	}
	return b.String()
}

// retryable reports whether err says the request never reached the agent
// and asks to send it again in a moment: the agent is being restarted
// (-32012) or a rebuild is running (-32011).
func retryable(err error) bool {
	switch acpclient.Code(err) {
	case -32011:
		return true
	case -32012:
		return strings.Contains(err.Error(), "being restarted")
	}
	return false
}

// lostToKill reports whether err is the clear error of a request the
// agent's death took: it was pending when the agent exited, or the session
// could not be rebuilt because the new agent died too. The client may send
// it again.
func lostToKill(err error) bool {
	return acpclient.Code(err) == -32012 && !strings.Contains(err.Error(), "no longer restarted")
}

// ended reports whether err says the sidecar went away.
func ended(err error) bool {
	return err != nil && (errors.Is(err, acpclient.ErrEnded) || strings.Contains(err.Error(), "peer disconnected") ||
		strings.Contains(err.Error(), "closed pipe") || strings.Contains(err.Error(), "broken pipe") ||
		strings.Contains(err.Error(), "connection closed") || strings.Contains(err.Error(), "EOF"))
}

// call runs f with the bound; an answer that does not come within it is a
// hang, counted in rep and reported.
func call[T any](t *testing.T, rep *report, what string, f func(ctx context.Context) (T, error)) (T, error) {
	t.Helper()
	return callOn(t, rep, nil, what, f)
}

// callOn is call for a request to sidecar s: on a hang, s and its agent
// print their goroutines into the log (sidecar.dump), and so exit.
func callOn[T any](t *testing.T, rep *report, s *sidecar, what string, f func(ctx context.Context) (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	v, err := f(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rep.hang()
		t.Errorf("HANG: %s: no answer within %v: %v", what, bound, err)
		if s != nil {
			s.dump("HANG: " + what)
		}
	}
	return v, err
}

// retry is callOn, sending again while the answer is retryable; the bound
// covers all the tries.
func retry[T any](t *testing.T, rep *report, s *sidecar, what string, f func(ctx context.Context) (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	return callOn(t, rep, s, what, func(ctx context.Context) (T, error) {
		for {
			v, err := f(ctx)
			if err == nil || !retryable(err) || time.Now().After(deadline) {
				return v, err
			}
			select {
			case <-ctx.Done():
				return v, err
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
}

// turnResult is a prompt's outcome as the client saw it.
type turnResult struct {
	stop  acp.StopReason
	text  string
	reply fakeagent.Reply
	ok    bool // the text holds a fake agent reply line
}

func (s *sidecar) prompt(t *testing.T, rep *report, sid acp.SessionId, blocks ...string) (turnResult, error) {
	t.Helper()
	return retry(t, rep, s, fmt.Sprintf("prompt %q", blocks), func(ctx context.Context) (turnResult, error) {
		stop, text, err := s.c.Prompt(ctx, sid, blocks...)
		r := turnResult{stop: stop, text: text}
		r.reply, r.ok = fakeagent.ParseReply(text)
		return r, err
	})
}

// record is what `show SID --json` says, as far as these tests read it.
type record struct {
	SessionID     string   `json:"sessionId"`
	NativeHistory []string `json:"nativeHistory"`
	Live          *struct {
		Values map[string]json.RawMessage `json:"values"`
		Mode   string                     `json:"mode"`
		Model  string                     `json:"model"`
	} `json:"live"`
	Blocked *struct {
		Fields []string `json:"fields"`
	} `json:"blocked"`
	Turns []recTurn `json:"turns"`
}

type recTurn struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
}

// cli runs `acp-sidecar ARGS...` within the bound and returns stdout.
func cli(t *testing.T, rep *report, args ...string) ([]byte, error) {
	t.Helper()
	return call(t, rep, "acp-sidecar "+strings.Join(args, " "), func(ctx context.Context) ([]byte, error) {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, binary(t), args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("acp-sidecar %s: %w: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.Bytes(), nil
	})
}

// show reads a session's record through the CLI.
func show(t *testing.T, rep *report, dir, sid string) (record, error) {
	t.Helper()
	out, err := cli(t, rep, "show", sid, "--json", "--state-dir", dir)
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(out, &r); err != nil {
		return record{}, fmt.Errorf("show %s: %w: %s", sid, err, out)
	}
	return r, nil
}

// sessionIDs runs `sessions --json` and returns the ids.
func sessionIDs(t *testing.T, rep *report, dir string) ([]string, error) {
	t.Helper()
	out, err := cli(t, rep, "sessions", "--json", "--state-dir", dir)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("sessions: %w: %s", err, out)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.SessionID)
	}
	return ids, nil
}

// findTurn returns the record's turn whose prompt holds tag.
func findTurns(r record, tag string) []recTurn {
	var out []recTurn
	for _, tr := range r.Turns {
		if strings.Contains(tr.Prompt, tag) {
			out = append(out, tr)
		}
	}
	return out
}

// tail returns the last n lines of a file, for failure reports.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

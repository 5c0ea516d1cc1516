//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// cSession is one client session of the concurrency test and what its
// client saw.
type cSession struct {
	sid    acp.SessionId
	prefix string // every prompt of this session starts with it

	mu        sync.Mutex
	completed []string        // tags of turns answered end_turn
	visible   []string        // the completed turns a /rewind counts
	rolled    map[string]bool // tags a /rewind took back
	unsure    map[string]bool // tags a /rewind cut short by a kill may have taken back
}

// cSidecar is one of the sidecars sharing the state dir.
type cSidecar struct {
	n        int // its number, as in its agent's -id-prefix wN-
	s        *sidecar
	killed   atomic.Bool
	sessions []*cSession
}

// TestConcurrentSidecars runs four sidecars on one state dir, two sessions
// each, with random prompts, /reset and /rewind, while the store's owner
// is SIGKILLed and replaced now and then. Nothing is lost and nothing is
// mixed up: every session's record holds exactly its own completed turns.
func TestConcurrentSidecars(t *testing.T) {
	sd := seed(t)
	rep := &report{name: "concurrent", seed: sd}
	defer rep.print(t)
	d := chaosProfile().concurrentFor
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(sd, 3))
	var (
		mu       sync.Mutex
		all      []*cSidecar
		sessions []*cSession
		wg       sync.WaitGroup
		ops      atomic.Int64
	)
	deadline := time.Now().Add(d)
	start := func(n int) *cSidecar {
		// Real agents name sessions with UUIDs; the fake agent counts, so
		// each gets its own prefix (see the report on shared ids).
		s, err := startSidecar(t, dir, []string{"-profile", "default", "-id-prefix", fmt.Sprintf("w%d-", n)})
		if err != nil {
			t.Errorf("start sidecar %d: %v", n, err)
			return nil
		}
		cs := &cSidecar{n: n, s: s}
		if _, err := callOn(t, rep, s, "initialize", func(ctx context.Context) (acp.InitializeResponse, error) { return s.c.Initialize(ctx) }); err != nil {
			t.Errorf("sidecar %d: initialize: %v\nsidecar log:\n%s", n, err, tail(filepath.Join(dir, "sidecar.log"), 40))
			return nil
		}
		s.agent()
		for range 2 {
			res, err := callOn(t, rep, s, "session/new", func(ctx context.Context) (acp.NewSessionResponse, error) { return s.c.NewSession(ctx, dir) })
			if err != nil {
				t.Errorf("sidecar %d: session/new: %v\nsidecar log:\n%s", n, err, tail(filepath.Join(dir, "sidecar.log"), 40))
				break
			}
			mu.Lock()
			cv := &cSession{sid: res.SessionId, prefix: fmt.Sprintf("[c%d.", len(sessions)), rolled: map[string]bool{}, unsure: map[string]bool{}}
			sessions = append(sessions, cv)
			mu.Unlock()
			cs.sessions = append(cs.sessions, cv)
		}
		mu.Lock()
		all = append(all, cs)
		mu.Unlock()
		for i, cv := range cs.sessions {
			wg.Add(1)
			r := rand.New(rand.NewPCG(sd, uint64(n*2+i)+100))
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && !cs.killed.Load() {
					if !concurrentOp(t, rep, cs, cv, r) {
						return
					}
					ops.Add(1)
				}
			}()
		}
		return cs
	}
	for i := range 4 {
		start(i)
	}
	next := 4
	for time.Now().Before(deadline) {
		time.Sleep(d/6 + time.Duration(rng.IntN(int(d/6))))
		if !time.Now().Before(deadline) {
			break
		}
		owner := storeOwner(dir, all)
		if owner == nil {
			t.Logf("no sidecar holds the store's LOCK now")
			continue
		}
		agent, _ := owner.s.agent()
		owner.killed.Store(true)
		if err := syscall.Kill(owner.s.pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill the store owner %d: %v", owner.s.pid, err)
			continue
		}
		rep.add(func(rep *report) { rep.kills++ })
		owner.s.c.Wait(t.Context())
		if !waitGone(agent, 5*time.Second) {
			t.Errorf("agent %d outlived its SIGKILLed sidecar", agent.pid)
		}
		start(next)
		next++
	}
	wg.Wait()
	for _, cs := range all {
		if cs.killed.Load() {
			continue
		}
		if err := cs.s.close(); err != nil {
			t.Errorf("%v", err)
		}
		if left := cs.s.leftBehind(); len(left) > 0 {
			t.Errorf("agents left behind: %+v", left)
		}
	}
	// A sidecar whose store did not open records in memory for its whole
	// run (cmd/acp-sidecar openStore): its sessions never reach the disk,
	// and the checks below would only say that sessions and turns are
	// missing. Say why first.
	for _, cs := range all {
		if out := cs.s.stderr.String(); strings.Contains(out, "recording in memory") {
			t.Errorf("sidecar %d (pid %d) did not open the shared store and recorded in memory only; its sessions are not on disk:\n%s", cs.n, cs.s.pid, out)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", tail(filepath.Join(dir, "sidecar.log"), 60))
		}
	}()
	ids, err := sessionIDs(t, rep, dir)
	if err != nil {
		t.Fatalf("sessions: %v", err)
	}
	if len(ids) != len(sessions) {
		t.Errorf("sessions lists %d sessions; the clients made %d", len(ids), len(sessions))
	}
	turns := 0
	for _, cv := range sessions {
		turns += checkSession(t, rep, dir, cv)
	}
	rep.add(func(rep *report) {
		rep.runs = len(all)
		rep.extra = append(rep.extra, fmt.Sprintf("sidecars=%d sessions=%d ops=%d completed-turns=%d duration=%v", len(all), len(sessions), ops.Load(), turns, d))
	})
}

// storeOwner is the live sidecar that owns the state dir's badger: the pid
// badger wrote into its LOCK file, if that process has badger's MANIFEST
// open (the LOCK file keeps a dead owner's pid until the next one opens
// the store; badger's flock is on the directory itself).
func storeOwner(dir string, all []*cSidecar) *cSidecar {
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !holdsFile(pid, filepath.Join(dir, "MANIFEST")) {
		return nil
	}
	for _, cs := range all {
		if !cs.killed.Load() && cs.s.pid == pid {
			return cs
		}
	}
	return nil
}

// concurrentOp runs one random operation on a session and reports whether
// the session goes on.
func concurrentOp(t *testing.T, rep *report, cs *cSidecar, cv *cSession, r *rand.Rand) bool {
	gone := func(err error) bool { return cs.killed.Load() || ended(err) }
	switch n := r.IntN(100); {
	case n < 65:
		cv.mu.Lock()
		tag := fmt.Sprintf("%s%d]", cv.prefix, len(cv.completed)+len(cv.rolled)+r.IntN(1<<30))
		cv.mu.Unlock()
		res, err := cs.s.prompt(t, rep, cv.sid, tag+" says hello")
		switch {
		case err != nil:
			if !gone(err) {
				t.Errorf("session %s prompt %s: %v", cv.sid, tag, err)
			}
			return false
		case !res.ok || res.stop != acp.StopReasonEndTurn:
			t.Errorf("session %s prompt %s: stop %q, text %q", cv.sid, tag, res.stop, res.text)
			return false
		case !strings.Contains(res.reply.Text, tag):
			t.Errorf("session %s prompt %s got another prompt's reply: %q", cv.sid, tag, res.text)
			return false
		}
		cv.mu.Lock()
		cv.completed = append(cv.completed, tag)
		cv.visible = append(cv.visible, tag)
		cv.mu.Unlock()
	case n < 80:
		res, err := cs.s.prompt(t, rep, cv.sid, "/reset")
		if err != nil {
			if !gone(err) {
				t.Errorf("session %s /reset: %v", cv.sid, err)
			}
			return false
		}
		if !strings.HasPrefix(res.text, "acp-sidecar: reset done") || strings.Contains(res.text, "could not be restored") {
			t.Errorf("session %s /reset: %q", cv.sid, res.text)
		}
		cv.mu.Lock()
		cv.visible = nil
		cv.mu.Unlock()
	default:
		res, err := cs.s.prompt(t, rep, cv.sid, "/rewind")
		if err != nil {
			if !gone(err) {
				t.Errorf("session %s /rewind: %v", cv.sid, err)
			} else {
				// The sidecar died with the rewind in flight: it may have
				// landed in the record before the answer was lost.
				cv.mu.Lock()
				if len(cv.visible) > 0 {
					cv.unsure[cv.visible[len(cv.visible)-1]] = true
				}
				cv.mu.Unlock()
			}
			return false
		}
		cv.mu.Lock()
		defer cv.mu.Unlock()
		switch {
		case strings.HasPrefix(res.text, "acp-sidecar: rewound"):
			if len(cv.visible) == 0 {
				t.Errorf("session %s /rewind took back a turn the client does not know of: %q", cv.sid, res.text)
				return true
			}
			last := cv.visible[len(cv.visible)-1]
			if !strings.Contains(res.text, last) {
				t.Errorf("session %s /rewind took back something else than %s: %q", cv.sid, last, res.text)
			}
			cv.rolled[last] = true
			cv.visible = cv.visible[:len(cv.visible)-1]
		case len(cv.visible) == 0 && strings.Contains(res.text, "/rewind failed"):
		default:
			t.Errorf("session %s /rewind with %d visible turns: %q", cv.sid, len(cv.visible), res.text)
		}
	}
	return true
}

// checkSession reads a session's record and checks it holds exactly its own
// completed turns; it returns how many there were.
func checkSession(t *testing.T, rep *report, dir string, cv *cSession) int {
	rec, err := show(t, rep, dir, string(cv.sid))
	if err != nil {
		t.Errorf("show %s: %v", cv.sid, err)
		rep.add(func(rep *report) { rep.lost += len(cv.completed) })
		return 0
	}
	seen := map[string]int{}
	for _, tr := range rec.Turns {
		if !strings.HasPrefix(tr.Prompt, cv.prefix) {
			t.Errorf("session %s holds a turn that is not its own: %q", cv.sid, tr.Prompt)
			continue
		}
		tag, _, _ := strings.Cut(tr.Prompt, " ")
		seen[tag]++
	}
	for _, tag := range cv.completed {
		want := "completed"
		if cv.rolled[tag] {
			want = "rolled_back"
		}
		got := findTurns(rec, tag+" ")
		if len(got) == 1 && cv.unsure[tag] && (got[0].Status == "completed" || got[0].Status == "rolled_back") {
			continue
		}
		if len(got) != 1 || got[0].Status != want {
			rep.add(func(rep *report) { rep.lost++ })
			t.Errorf("session %s turn %s: record has %+v; want one %s turn", cv.sid, tag, got, want)
		}
	}
	for tag, n := range seen {
		if n > 1 {
			t.Errorf("session %s: turn %s recorded %d times", cv.sid, tag, n)
		}
	}
	return len(cv.completed)
}

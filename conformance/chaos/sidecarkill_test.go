//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Where the sidecar kill loop kills the sidecar.
var sidecarKillPoints = []string{"session/new", "set-config", "mid-prompt", "mid-stream", "between-turns"}

// TestSidecarKillLoop SIGKILLs the sidecar at a random point and starts a
// new one on the same state dir: the store opens, `sessions` and `show`
// work, every completed turn is there, and a session/load of the old
// session followed by a prompt continues the conversation.
func TestSidecarKillLoop(t *testing.T) {
	sd := seed(t)
	rep := &report{name: "sidecar-kill", seed: sd}
	defer rep.print(t)
	for run := range chaosProfile().sidecarKills {
		rng := rand.New(rand.NewPCG(sd, uint64(run)+1<<32))
		t.Run(fmt.Sprintf("run%03d", run), func(t *testing.T) {
			broken := sidecarKillRun(t, rep, rng, run)
			rep.add(func(rep *report) {
				rep.runs++
				rep.kills++
				if broken {
					rep.bad++
				}
			})
		})
	}
}

func sidecarKillRun(t *testing.T, rep *report, rng *rand.Rand, run int) (broken bool) {
	profile := []string{"default", "no-load"}[rng.IntN(2)]
	point := sidecarKillPoints[rng.IntN(len(sidecarKillPoints))]
	dir := t.TempDir()
	fail := func(format string, args ...any) {
		t.Helper()
		if !broken {
			t.Logf("sidecar log:\n%s", tail(filepath.Join(dir, "sidecar.log"), 60))
		}
		broken = true
		t.Errorf("run %d (profile %s, kill at %s): %s", run, profile, point, fmt.Sprintf(format, args...))
	}
	s, err := startSidecar(t, dir, []string{"-profile", profile})
	if err != nil {
		t.Fatal(err)
	}
	agent, ok := s.agent()
	if !ok {
		fail("no agent process")
		return
	}
	killed := false
	kill := func(after time.Duration) {
		time.Sleep(after)
		if err := syscall.Kill(s.pid, syscall.SIGKILL); err == nil {
			killed = true
		}
	}
	if _, err := call(t, rep, "initialize", func(ctx context.Context) (acp.InitializeResponse, error) { return s.c.Initialize(ctx) }); err != nil {
		fail("initialize: %v", err)
		return
	}
	// work runs f with the kill at a random moment within it.
	work := func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			kill(time.Duration(rng.IntN(3000)) * time.Microsecond)
		}()
		f()
		<-done
	}
	var sid acp.SessionId
	newSession := func() {
		res, err := call(t, rep, "session/new", func(ctx context.Context) (acp.NewSessionResponse, error) { return s.c.NewSession(ctx, dir) })
		if err == nil {
			sid = res.SessionId
		}
	}
	if point == "session/new" {
		work(newSession)
	} else {
		newSession()
		if sid == "" {
			fail("session/new failed")
			return
		}
	}
	model, modelSet := "smart-2", false
	if !killed {
		want := []string{"fast-1", "deep-3"}[rng.IntN(2)]
		set := func() {
			_, err := call(t, rep, "set model", func(ctx context.Context) ([]acp.SessionConfigOption, error) {
				return s.c.SetConfigOption(ctx, sid, "model", want)
			})
			if err == nil {
				model, modelSet = want, true
			}
		}
		if point == "set-config" {
			work(set)
			if !modelSet {
				model = "" // it may or may not have landed
			}
		} else {
			set()
		}
	}
	var completed []string
	turns := 1 + rng.IntN(4)
	killAt := rng.IntN(turns)
	for i := 0; i < turns && !killed; i++ {
		tag := fmt.Sprintf("[s%d.t%d]", run, i+1)
		blocks := []string{tag + " remember this"}
		stream := point == "mid-stream" && i == killAt
		if stream {
			blocks = append(blocks, "stream 200 100")
		}
		var res turnResult
		var err error
		prompt := func() { res, err = s.prompt(t, rep, sid, blocks...) }
		switch {
		case point == "mid-prompt" && i == killAt:
			work(prompt)
		case stream:
			mark := len(s.c.Updates(sid))
			after := 1 + rng.IntN(150)
			done := make(chan struct{})
			go func() {
				defer close(done)
				prompt()
			}()
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-done
				cancel()
			}()
			s.c.WaitUpdates(ctx, sid, func(u []acp.SessionNotification) bool { return len(u) >= mark+after })
			cancel()
			kill(0)
			<-done
		default:
			prompt()
		}
		switch {
		case err == nil && res.ok && res.stop == acp.StopReasonEndTurn:
			completed = append(completed, tag)
		case killed:
		default:
			fail("prompt %s: %v (%q)", tag, err, res.text)
			return
		}
		if point == "between-turns" && i == killAt {
			kill(0)
		}
	}
	if !killed {
		kill(0)
	}
	if !killed {
		fail("the sidecar was not killed")
		return
	}
	s.c.Wait(t.Context())
	if !waitGone(agent, 5*time.Second) {
		fail("agent %d outlived its SIGKILLed sidecar", agent.pid)
	}
	// The store opens for the CLI, with no sidecar running.
	ids, err := sessionIDs(t, rep, dir)
	if err != nil {
		fail("sessions after the kill: %v", err)
		return
	}
	if sid == "" {
		return // killed before session/new was answered: nothing to continue
	}
	if !slices.Contains(ids, string(sid)) {
		fail("sessions after the kill lists %v, not %s", ids, sid)
		return
	}
	checkTurns := func(when string) {
		rec, err := show(t, rep, dir, string(sid))
		if err != nil {
			fail("show %s: %v", when, err)
			return
		}
		for _, tag := range completed {
			if got := findTurns(rec, tag); len(got) != 1 || got[0].Status != "completed" {
				rep.add(func(rep *report) { rep.lost++ })
				fail("%s: completed turn %s: record has %+v", when, tag, got)
			}
		}
	}
	checkTurns("after the kill")

	// A new sidecar on the same state dir continues the session.
	s2, err := startSidecar(t, dir, []string{"-profile", profile})
	if err != nil {
		t.Fatal(err)
	}
	s2.agent()
	if _, err := call(t, rep, "initialize", func(ctx context.Context) (acp.InitializeResponse, error) { return s2.c.Initialize(ctx) }); err != nil {
		fail("initialize after the kill: %v", err)
		return
	}
	if _, err := call(t, rep, "session/load", func(ctx context.Context) (acp.LoadSessionResponse, error) { return s2.c.Load(ctx, sid, dir) }); err != nil {
		fail("session/load %s after the kill: %v", sid, err)
		return
	}
	cont := fmt.Sprintf("echo: [s%d.cont] go on", run)
	res, err := s2.prompt(t, rep, sid, cont)
	switch {
	case err != nil:
		fail("prompt after the load: %v", err)
	case !res.ok:
		fail("prompt after the load: no reply in %q", res.text)
	default:
		if model != "" && res.reply.Model != model {
			fail("after the load the agent runs model %s; the session had %s", res.reply.Model, model)
		}
		handoff := strings.Join(res.reply.Echo, "\n")
		if n := len(completed); n > 0 && (!strings.Contains(handoff, completed[n-1]) || !strings.Contains(handoff, completed[0])) {
			fail("the handoff after the load lacks the first or last completed turn %v: %q", completed, handoff)
		}
		completed = append(completed, fmt.Sprintf("[s%d.cont]", run))
	}
	if err := s2.close(); err != nil {
		fail("%v", err)
	}
	if left := s2.leftBehind(); len(left) > 0 {
		fail("agents left behind: %+v", left)
	}
	checkTurns("after the continuation")
	return broken
}

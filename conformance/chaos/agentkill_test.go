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
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// Where the agent kill loop kills the agent.
const (
	killNew        = "session/new"
	killStream     = "mid-stream"
	killRestore    = "restore"
	killPermission = "permission"
	killBetween    = "between-turns"
)

var killPoints = []string{killNew, killStream, killRestore, killPermission, killBetween}

// agentProfiles are the fake agent profiles a run picks from: with and
// without loadSession, legacy APIs only, configOptions only.
var agentProfiles = []string{"default", "no-load", "legacy-only", "config-options-only"}

// TestAgentKillLoop runs sessions whose agent is SIGKILLed at a random point
// and checks that the client never hangs, every completed turn is in the
// record, the config after recovery is the captured one (or the session is
// visibly blocked), and no agent outlives the sidecar.
func TestAgentKillLoop(t *testing.T) {
	sd := seed(t)
	rep := &report{name: "agent-kill", seed: sd}
	defer rep.print(t)
	counts := map[string]int{}
	blocked := 0
	// A soak (scripts/soak) runs until a number of kills instead of runs.
	wantKills, _ := strconv.Atoi(os.Getenv("ACP_SIDECAR_CHAOS_KILLS"))
	for run := 0; ; run++ {
		if wantKills > 0 {
			rep.mu.Lock()
			enough := rep.kills >= wantKills
			rep.mu.Unlock()
			if enough {
				break
			}
		} else if run >= chaosProfile().agentKills {
			break
		}
		rng := rand.New(rand.NewPCG(sd, uint64(run)))
		t.Run(fmt.Sprintf("run%03d", run), func(t *testing.T) {
			r := &agentRun{t: t, rep: rep, rng: rng, run: run}
			r.do()
			for _, k := range r.kills() {
				counts[k]++
			}
			if r.blocked {
				blocked++
			}
		})
	}
	var parts []string
	for _, k := range killPoints {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	rep.extra = append(rep.extra, "kills-at:"+strings.Join(parts, ","), fmt.Sprintf("blocked-runs=%d", blocked))
}

// agentRun is one run of the agent kill loop.
type agentRun struct {
	t   *testing.T
	rep *report
	rng *rand.Rand
	run int

	force       []string // kill points to use instead of random ones
	sidecarArgs []string // extra sidecar flags

	s                   *sidecar
	sid                 acp.SessionId
	profile             string
	wantModel, wantMode string
	configSet           bool
	recentKill          bool     // a kill since the last completed turn; guarded by mu
	completed           []string // tags of the turns the client saw complete
	mu                  sync.Mutex
	killed              []string // kill points that hit; guarded by mu
	broken              bool
	blocked             bool
	turn                int
}

func (r *agentRun) fail(format string, args ...any) {
	r.t.Helper()
	if !r.broken && r.s != nil {
		r.t.Logf("sidecar log:\n%s", tail(filepath.Join(r.s.dir, "sidecar.log"), 60))
	}
	r.broken = true
	r.t.Errorf("run %d (profile %s, kills %v): %s", r.run, r.profile, r.kills(), fmt.Sprintf(format, args...))
}

// kill SIGKILLs the agent p. It may run on another goroutine (the
// permission callback, a timed kill), hence the lock.
func (r *agentRun) kill(point string, p procInfo) {
	if err := sigkill(p); err == nil {
		r.mu.Lock()
		r.recentKill = true
		r.killed = append(r.killed, point)
		r.mu.Unlock()
		r.rep.add(func(rep *report) { rep.kills++ })
	}
}

func (r *agentRun) kills() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.killed...)
}

func (r *agentRun) setRecent(v bool) {
	r.mu.Lock()
	r.recentKill = v
	r.mu.Unlock()
}

func (r *agentRun) recent() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recentKill
}

func (r *agentRun) do() {
	t := r.t
	defer func() {
		r.rep.add(func(rep *report) {
			rep.runs++
			if r.broken {
				rep.bad += len(r.kills())
			}
		})
	}()
	r.profile = agentProfiles[r.rng.IntN(len(agentProfiles))]
	points := map[string]bool{}
	for range 1 + r.rng.IntN(2) {
		points[killPoints[r.rng.IntN(len(killPoints))]] = true
	}
	if r.force != nil {
		points = map[string]bool{}
		for _, k := range r.force {
			points[k] = true
		}
	}
	dir := t.TempDir()
	s, err := startSidecar(t, dir, []string{"-profile", r.profile}, r.sidecarArgs...)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	if _, err := call(t, r.rep, "initialize", func(ctx context.Context) (acp.InitializeResponse, error) { return s.c.Initialize(ctx) }); err != nil {
		r.fail("initialize: %v", err)
		return
	}
	waitKill := func() {}
	if points[killNew] {
		p, ok := s.agent()
		if !ok {
			r.fail("no agent process")
			return
		}
		delay := time.Duration(r.rng.IntN(3000)) * time.Microsecond
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			time.Sleep(delay)
			r.kill(killNew, p)
		}()
		waitKill = func() { <-killed }
	}
	for try := 0; r.sid == ""; try++ {
		res, err := retry(t, r.rep, s, "session/new", func(ctx context.Context) (acp.NewSessionResponse, error) { return s.c.NewSession(ctx, dir) })
		switch {
		case err == nil:
			r.sid = res.SessionId
		case try == 0 && points[killNew]:
			// The agent died under it: a clear error; send it again.
		default:
			waitKill()
			r.fail("session/new: %v", err)
			return
		}
	}
	waitKill() // the kill lands before the session goes on
	r.setConfig()
	steps := 3 + r.rng.IntN(3)
	var kills []string
	for _, k := range killPoints {
		if points[k] && k != killNew {
			kills = append(kills, k)
		}
	}
	at := map[int]string{}
	for _, k := range kills {
		at[r.rng.IntN(steps)] = k // a collision drops one kill: fine
	}
	for i := range steps {
		if r.broken {
			break
		}
		switch at[i] {
		case killStream:
			r.streamKill()
		case killRestore:
			r.restoreKill()
		case killPermission:
			r.permissionKill()
		case killBetween:
			r.promptOK("")
			p, ok := s.agent()
			if !ok {
				r.fail("no agent process")
				return
			}
			r.kill(killBetween, p)
			time.Sleep(time.Duration(r.rng.IntN(50)) * time.Millisecond)
		default:
			r.promptOK("")
		}
	}
	if !r.broken {
		r.promptOK("") // the session goes on after every kill
	}
	r.finish(dir)
}

// setConfig chooses a model and a mode other than the defaults, through the
// surface the profile has.
func (r *agentRun) setConfig() {
	t, s := r.t, r.s
	r.wantModel, r.wantMode = "smart-2", "code"
	model := []string{"fast-1", "deep-3"}[r.rng.IntN(2)]
	mode := []string{"ask", "plan"}[r.rng.IntN(2)]
	var err error
	for try := 0; try == 0 || try < 3 && lostToKill(err); try++ {
		switch r.profile {
		case "legacy-only":
			_, err = retry(t, r.rep, s, "set_model", func(ctx context.Context) (struct{}, error) { return struct{}{}, s.c.SetModel(ctx, r.sid, model) })
		default:
			_, err = retry(t, r.rep, s, "set model", func(ctx context.Context) ([]acp.SessionConfigOption, error) {
				return s.c.SetConfigOption(ctx, r.sid, "model", model)
			})
		}
	}
	if err != nil {
		r.fail("set model %s: %v", model, err)
		return
	}
	for try := 0; try == 0 || try < 3 && lostToKill(err); try++ {
		switch r.profile {
		case "config-options-only":
			_, err = retry(t, r.rep, s, "set mode", func(ctx context.Context) ([]acp.SessionConfigOption, error) {
				return s.c.SetConfigOption(ctx, r.sid, "mode", mode)
			})
		default:
			_, err = retry(t, r.rep, s, "set_mode", func(ctx context.Context) (struct{}, error) { return struct{}{}, s.c.SetMode(ctx, r.sid, mode) })
		}
	}
	if err != nil {
		r.fail("set mode %s: %v", mode, err)
		return
	}
	r.wantModel, r.wantMode, r.configSet = model, mode, true
}

func (r *agentRun) nextTag() string {
	r.turn++
	return fmt.Sprintf("[a%d.t%d]", r.run, r.turn)
}

// check judges a prompt's outcome: a completed turn must carry the
// captured config; a refusal must be the visible -32010 naming fields.
// It reports whether the turn completed.
func (r *agentRun) check(tag string, res turnResult, err error, killed bool) bool {
	switch {
	case err == nil:
		if res.stop != acp.StopReasonEndTurn || !res.ok {
			if killed {
				return false
			}
			r.fail("prompt %s: stop %q, text %q; want end_turn and a reply", tag, res.stop, res.text)
			return false
		}
		if res.reply.Model != r.wantModel || res.reply.Mode != r.wantMode {
			r.rep.add(func(rep *report) { rep.partial++ })
			r.fail("prompt %s ran on model=%s mode=%s; the captured config is model=%s mode=%s",
				tag, res.reply.Model, res.reply.Mode, r.wantModel, r.wantMode)
		}
		r.completed = append(r.completed, tag)
		r.setRecent(false)
		return true
	case acpclient.Code(err) == -32010:
		if !strings.Contains(err.Error(), "model") && !strings.Contains(err.Error(), "mode") {
			r.fail("prompt %s blocked without naming the fields: %v", tag, err)
		}
		r.blocked = true
		return false
	case (killed || r.recent()) && lostToKill(err):
		return false // the agent died under it: a clear error; send it again
	default:
		r.fail("prompt %s: %v\nsidecar stderr:\n%s", tag, err, r.s.stderr.String())
		return false
	}
}

// promptOK sends a plain prompt that no kill touches. A blocked session
// is sent /reset once, as a user would.
func (r *agentRun) promptOK(quirk string) {
	var err error
	for try := 0; try == 0 || try < 3 && lostToKill(err) && !r.broken; try++ {
		tag := r.nextTag()
		blocks := []string{tag + " plain prompt"}
		if quirk != "" {
			blocks = append(blocks, quirk)
		}
		var res turnResult
		res, err = r.s.prompt(r.t, r.rep, r.sid, blocks...)
		if r.check(tag, res, err, false) {
			return
		}
	}
	if acpclient.Code(err) == -32010 {
		res, err := r.s.prompt(r.t, r.rep, r.sid, "/reset")
		if err != nil {
			r.fail("/reset of a blocked session: %v", err)
		} else {
			r.t.Logf("run %d blocked; /reset says %q", r.run, res.text)
		}
	}
}

func (r *agentRun) streamKill() {
	tag := r.nextTag()
	p, ok := r.s.agent()
	if !ok {
		r.fail("no agent process")
		return
	}
	mark := len(r.s.c.Updates(r.sid))
	after := 1 + r.rng.IntN(150)
	done := make(chan struct{})
	var res turnResult
	var err error
	go func() {
		defer close(done)
		res, err = r.s.prompt(r.t, r.rep, r.sid, tag+" stream me", "stream 200 100")
	}()
	ctx, cancel := context.WithCancel(r.t.Context())
	go func() {
		<-done
		cancel()
	}()
	r.s.c.WaitUpdates(ctx, r.sid, func(u []acp.SessionNotification) bool { return len(u) >= mark+after })
	cancel()
	r.kill(killStream, p)
	<-done
	r.check(tag, res, err, true)
	r.setRecent(true) // the kill may have come after the turn ended
}

func (r *agentRun) restoreKill() {
	p, ok := r.s.agent()
	if !ok {
		r.fail("no agent process")
		return
	}
	delay := time.Duration(r.rng.IntN(8000)) * time.Microsecond
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		time.Sleep(delay)
		r.kill(killRestore, p)
	}()
	res, err := r.s.prompt(r.t, r.rep, r.sid, "/reset")
	<-killed
	if err == nil {
		r.t.Logf("run %d: /reset with the agent killed %v in: %q", r.run, delay, res.text)
	} else if !lostToKill(err) {
		r.fail("/reset: %v", err)
	}
}

func (r *agentRun) permissionKill() {
	tag := r.nextTag()
	p, ok := r.s.agent()
	if !ok {
		r.fail("no agent process")
		return
	}
	r.s.mu.Lock()
	r.s.onPermit = func() { r.kill(killPermission, p) }
	r.s.mu.Unlock()
	res, err := r.s.prompt(r.t, r.rep, r.sid, tag+" may I", "ask permission")
	r.s.mu.Lock()
	r.s.onPermit = nil
	r.s.mu.Unlock()
	r.check(tag, res, err, true)
	r.setRecent(true)
}

// finish closes the sidecar and checks what outlives it: no agent, and a
// record with every completed turn.
func (r *agentRun) finish(dir string) {
	t := r.t
	if err := r.s.close(); err != nil {
		r.fail("%v", err)
	}
	if ids := acpclient.AnsweredTwice(r.s.c.Lines()); len(ids) > 0 {
		r.rep.add(func(rep *report) { rep.twice += len(ids) })
		r.fail("requests answered twice: %v", ids)
	}
	if left := r.s.leftBehind(); len(left) > 0 {
		r.fail("agent processes left behind after the sidecar exited: %+v", left)
	}
	if r.sid == "" {
		return
	}
	rec, err := show(t, r.rep, dir, string(r.sid))
	if err != nil {
		r.fail("%v", err)
		return
	}
	for _, tag := range r.completed {
		got := findTurns(rec, tag)
		if len(got) != 1 || got[0].Status != "completed" {
			r.rep.add(func(rep *report) { rep.lost++ })
			r.fail("completed turn %s: record has %+v; want one completed turn", tag, got)
		}
	}
}

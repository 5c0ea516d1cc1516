//go:build unix

package agenthost

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// quick restarts at once, twice at most; the backoff is no part of what
// these tests check.
var quick = proxy.RestartPolicy{Max: 2, Window: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}

// withoutBacks is events without the Back calls, which come on a goroutine
// of their own and so in no fixed place among the rest.
func withoutBacks(events []string) []string {
	return slices.DeleteFunc(slices.Clone(events), func(e string) bool { return e == "back" })
}

// TestRestartsWithinPolicy: an agent that keeps dying while the client is
// there is started again within the policy, and the Life hears of each
// death, each restart and, once the budget is used up, that no agent
// follows. The run's status is then the agent's own last exit.
func TestRestartsWithinPolicy(t *testing.T) {
	life := newLife(nil)
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: sh("exit 3")}, Restart: true, Policy: quick, Life: life}, runOpts{})
	events := life.until(t, "dead: ")
	r.eof(t)
	if end, want := r.wait(t), (End{Code: 3}); end != want {
		t.Errorf("end %+v, want %+v", end, want)
	}
	events = append(events, life.rest()...)
	got := withoutBacks(events)
	want := []string{"end", "gone: exit status 3", "end", "gone: exit status 3", "end", "gone: exit status 3"}
	if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("life heard %q, want %q then dead", events, want)
	}
	if dead := got[len(want)]; !strings.HasPrefix(dead, "dead: exit status 3; ") || !strings.Contains(dead, proxy.ErrRestartBudget.Error()) {
		t.Errorf("dead %q, want the last status and %q", dead, proxy.ErrRestartBudget)
	}
	if backs := len(events) - len(got); backs != quick.Max {
		t.Errorf("%d restarted agents initialized, want %d", backs, quick.Max)
	}
}

// TestFailedInitializeKillsTheAgent: a restarted agent that the Life cannot
// initialize is killed, tree and all, and its death goes the way of any
// other: the Life hears of it, and the policy decides on the next.
func TestFailedInitializeKillsTheAgent(t *testing.T) {
	life := newLife(func(int) error { return errors.New("initialize refused") })
	// The first agent dies at once; the restarted one would run for good.
	marker := filepath.Join(t.TempDir(), "started")
	agent := sh(`if [ -e "$1" ]; then exec sleep 1000; fi; : > "$1"; exit 3`, marker)
	policy := quick
	policy.Max = 1
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: agent}, Restart: true, Policy: policy, Life: life}, runOpts{})
	events := life.until(t, "dead: ")
	r.eof(t)
	if end, want := r.wait(t), (End{Code: 128 + 9}); end != want {
		t.Errorf("end %+v, want %+v (the killed agent's own status)", end, want)
	}
	events = append(events, life.rest()...)
	want := []string{"end", "gone: exit status 3", "back", "end", "gone: exit status 137"}
	if len(events) != len(want)+1 || !slices.Equal(events[:len(want)], want) || !strings.HasPrefix(events[len(want)], "dead: exit status 137; ") {
		t.Errorf("life heard %q, want %q then dead", events, want)
	}
}

// TestNoRestartAtShutdown: an agent that dies of the shutdown the sidecar
// asked for is not restarted, and the Life hears nothing of it: no client
// waits for a next agent.
func TestNoRestartAtShutdown(t *testing.T) {
	life := newLife(nil)
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: sh(`printf '%s\n' '{"jsonrpc":"2.0","method":"ready"}'; exec cat`), Grace: grace},
		Restart: true, Policy: quick, Life: life}, runOpts{})
	r.awaitLine(t, `"ready"`)
	r.eof(t)
	if end := r.wait(t); !end.ByUs || end.Code != 0 {
		t.Errorf("end %+v, want status 0, stopped by the sidecar", end)
	}
	if events := life.rest(); len(events) != 0 {
		t.Errorf("life heard %q at a shutdown, want nothing", events)
	}
}

//go:build linux

package agenthost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// running reports whether pid runs and is not a zombie, from /proc.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // the state follows the command name
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// TestCrashEndsOrphans: what a crashed agent left running is stopped
// before the next agent starts, so it neither outlives the agent nor
// lingers beside the new one (DESIGN.md "Processes").
func TestCrashEndsOrphans(t *testing.T) {
	// As the CLI does once at its start: a dead agent's children come to
	// this process, where a shutdown can find them. It changes this test
	// process for good, which the other tests here do not mind: their
	// agents' trees are stopped by parent pid while the agent runs.
	if err := proxy.AdoptOrphans(); err != nil {
		t.Skipf("cannot adopt orphans here: %v", err)
	}
	var pid struct {
		Params struct{ Pid int }
	}
	life := newLife(nil)
	// The first agent leaves a child and dies; the restarted one runs until
	// its stdin ends.
	marker := filepath.Join(t.TempDir(), "started")
	agent := sh(`if [ -e "$1" ]; then exec cat; fi; : > "$1"
sleep 1000 </dev/null >/dev/null 2>&1 &
printf '{"jsonrpc":"2.0","method":"orphan","params":{"pid":%d}}\n' $!
exit 3`, marker)
	r := startRun(t, Config{Spec: proxy.AgentSpec{Argv: agent, Grace: grace, Orphans: true}, Restart: true, Policy: quick, Life: life}, runOpts{})
	if err := json.Unmarshal([]byte(r.awaitLine(t, `"orphan"`)), &pid); err != nil || pid.Params.Pid == 0 {
		t.Fatalf("the orphan's pid: %v (%+v)", err, pid)
	}
	// The restarted agent is initialized only after the dead one's orphans
	// were stopped.
	life.until(t, "back")
	if running(pid.Params.Pid) {
		t.Errorf("the dead agent's child %d still runs once the next agent is initialized", pid.Params.Pid)
	}
	r.eof(t)
	if end := r.wait(t); !end.ByUs || end.Code != 0 {
		t.Errorf("end %+v, want status 0, stopped by the sidecar", end)
	}
}

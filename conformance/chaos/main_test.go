//go:build linux

package chaos

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

var (
	fullFlag = flag.Bool("chaos.full", false, "run the full chaos profile (also ACP_SIDECAR_CHAOS=full)")
	seedFlag = flag.Uint64("chaos.seed", 0, "seed for the random choices (0: from the clock); printed by every test")
)

// profile is how much chaos a run gets.
type profile struct {
	name          string
	agentKills    int           // runs of the agent kill loop
	sidecarKills  int           // runs of the sidecar kill loop
	concurrentFor time.Duration // how long the four sidecars run
	floodChunks   int           // chunks of the turn that floods during a restore
}

var (
	ciProfile   = profile{name: "ci", agentKills: 15, sidecarKills: 8, concurrentFor: 15 * time.Second, floodChunks: 20000}
	fullProfile = profile{name: "full", agentKills: 200, sidecarKills: 50, concurrentFor: 2 * time.Minute, floodChunks: 100000}
)

func chaosProfile() profile {
	if *fullFlag || os.Getenv("ACP_SIDECAR_CHAOS") == "full" {
		return fullProfile
	}
	return ciProfile
}

// seed returns the seed for this run and prints how to replay it.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: profile %s, seed %d (replay with -chaos.seed %d)", chaosProfile().name, s, s)
	return s
}

// built is acp-sidecar built once from the working tree.
var built *testbin.Bin

func TestMain(m *testing.M) {
	flag.Parse()
	built = testbin.Build("acp-sidecar-chaos-bin-")
	code := m.Run()
	built.Close()
	os.Exit(code)
}

// binary returns the built sidecar or fails the test.
func binary(t testing.TB) string { return built.Path(t) }

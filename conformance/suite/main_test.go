package suite

import (
	"os"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// sidecar is the acp-sidecar binary TestMain built for this run: the suite
// runs the real binary as the sidecar, as `show` and as the fake agent.
var sidecar *testbin.Bin

func TestMain(m *testing.M) {
	sidecar = testbin.Build("acp-sidecar-suite-bin-")
	code := m.Run()
	sidecar.Close()
	os.Exit(code)
}

func sidecarBinary(t testing.TB) string { return sidecar.Path(t) }

func repoRoot() (string, error) { return testbin.RepoRoot() }

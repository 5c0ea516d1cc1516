//go:build linux

package suite

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// sidecar is the acp-sidecar binary TestMain built for this run: the suite
// runs the real binary as the sidecar, as `show` and as the fake agent.
var sidecar *testbin.Bin

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == doubleFlag {
		os.Exit(runDouble(os.Args[2:])) // this binary started as a double (double_test.go)
	}
	sidecarProcess = throughDoubles
	sidecar = testbin.Build("acp-sidecar-suite-bin-")
	goleak.VerifyTestMain(withBin{m})
}

// withBin runs the tests, then removes the binary TestMain built, before
// goleak looks for goroutines a test left running (the suite's conns, its
// doubles' pipes).
type withBin struct{ m *testing.M }

func (w withBin) Run() int {
	code := w.m.Run()
	sidecar.Close()
	return code
}

func sidecarBinary(t testing.TB) string { return sidecar.Path(t) }

func repoRoot() (string, error) { return testbin.RepoRoot() }

//go:build linux

package e2e

import (
	"os"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// sidecar is acp-sidecar built once per test run, from the working tree, so
// the tests always exercise what proxy/, intercept/ and cmd/ hold now. A
// build failure does not stop the tests that run agents directly: only the
// tests that need the binary fail, with the build's output.
var sidecar *testbin.Bin

func TestMain(m *testing.M) {
	// Every sidecar the tests start panics where it would answer a request
	// twice or never (proxy.Config.Strict), so no test passes on such a bug.
	os.Setenv("ACP_SIDECAR_STRICT_ANSWERS", "1")
	sidecar = testbin.Build("acp-sidecar-e2e-bin-")
	code := m.Run()
	sidecar.Close()
	os.Exit(code)
}

func sidecarBinary(t testing.TB) string { return sidecar.Path(t) }

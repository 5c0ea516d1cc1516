//go:build linux

package remote

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// sidecar is the acp-sidecar binary TestMain built: the server, the bridge
// and the fake agent.
var sidecar *testbin.Bin

func TestMain(m *testing.M) {
	sidecar = testbin.Build("acp-sidecar-remote-bin-")
	goleak.VerifyTestMain(withBin{m})
}

type withBin struct{ m *testing.M }

func (w withBin) Run() int {
	code := w.m.Run()
	sidecar.Close()
	return code
}

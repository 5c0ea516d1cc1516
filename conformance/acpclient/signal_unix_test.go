//go:build unix

package acpclient_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

// TestAgentExitsBySignal: a peer killed reports -1, death by signal, and
// one sent SIGTERM exits by itself. Both are unix's: Windows has no signals
// to send, and a terminated job's peer exits 1.
func TestAgentExitsBySignal(t *testing.T) {
	t.Run("ignores-eof", func(t *testing.T) {
		// The bound is how long Close waits before it kills, not an
		// assertion about how long anything takes.
		c := startAgent(t, acpclient.Options{CloseTimeout: 200 * time.Millisecond}, "-profile", "ignores-eof")
		session(t, c)
		if code, err := c.Close(); !errors.Is(err, acpclient.ErrKilled) || code != -1 {
			t.Errorf("Close = %d, %v; want -1, ErrKilled", code, err)
		}
	})
	t.Run("sigterm", func(t *testing.T) {
		c := startAgent(t, acpclient.Options{}, "-profile", "ignores-eof")
		session(t, c)
		if err := syscall.Kill(-c.Pid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := c.Wait(t.Context()); code != 0 || err != nil {
			t.Errorf("Wait = %d, %v; want 0 (ctx ended)", code, err)
		}
	})
}

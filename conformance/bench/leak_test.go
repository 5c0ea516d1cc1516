package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine a test started outlives it: every
// goroutine has an owner that waits for it (STYLE.md), and a leaked one is a
// bug.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

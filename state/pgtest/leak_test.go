package pgtest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine pgtest started outlives the test
// that started it: the reader of a server's log, the proxy's accept loop and
// its copiers each end with what owns them (Stop, Kill, the test's cleanup).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package agenthost

import (
	"testing"

	"go.uber.org/goleak"
)

// An Agent starts goroutines of its own (the initialize of a restarted
// agent, the watch on its shutdown) and runs a relay's: each must have
// ended by the time Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package switchboard

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// slot is one configured agent, running or not. It is the Egress of each
// relay the agent runs behind.
type slot struct {
	sw      *Switchboard
	name    string
	command []string
	start   sync.Mutex // one start or stop at a time
	// elsewhere counts the sessions bound to other agents: while it is 0,
	// none of this agent's frames can be a late one (Switchboard.late).
	elsewhere atomic.Int32

	// Guarded by Switchboard.mu.
	b    *Backend
	init json.RawMessage // its initialize result, once known
	used time.Time       // the last time a frame went to it or a session left it
}

var _ proxy.Egress = (*slot)(nil)

// Egress is the switchboard's part in what an agent's relay writes to the
// client (proxy.Egress): it runs on the relay's goroutines, for the
// agent's frames after its chain, the frames its recorder holds and
// releases or writes of its own, and the answers it gives. Most frames are
// message chunks, and a chunk costs a few compares and one load unless a
// session runs on another agent, then one lock-free map look-up.
func (sl *slot) Egress(_ context.Context, f *proxy.Frame) []byte {
	// The switchboard's own context: what a frame starts here (an agent
	// started to learn its capabilities) lives as long as the switchboard,
	// not as the relay that wrote the frame.
	return sl.sw.agentFrame(sl.sw.ctx, sl, f)
}

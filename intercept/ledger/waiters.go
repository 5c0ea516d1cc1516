package ledger

// A Waiter is one client request held until its session is ready. Waiters
// leave in arrival order: each goes on only after the one before it (Prev),
// so the record sees them in the order the client sent them.
type Waiter struct {
	ID      []byte
	Session string
	Prompt  bool
	// Rebuild: a stale session is rebuilt before the request goes on;
	// else the request waits only for the agent and for running rebuilds.
	Rebuild bool
	// MinLife: the request waits for an agent of at least this life (one
	// whose predecessor never received it).
	MinLife uint64
	// Cancel is closed by a session/cancel for this waiting prompt.
	Cancel chan struct{}
	// Prev is closed when the waiter before this one has gone; Done when
	// this one has (its owner closes it).
	Prev <-chan struct{}
	Done chan struct{}
}

// Enter puts a held request at the end of the queue.
func (f *Flight) Enter(w *Waiter) {
	w.Cancel, w.Done, w.Prev = make(chan struct{}), make(chan struct{}), f.last
	if w.Prev == nil {
		closed := make(chan struct{})
		close(closed)
		w.Prev = closed
	}
	f.waiters = append(f.waiters, w)
	f.last = w.Done
}

// Leave takes a waiter out of the queue.
func (f *Flight) Leave(w *Waiter) {
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return
		}
	}
}

// CancelPrompts cancels the waiting prompts of sid and reports whether
// there were any.
func (f *Flight) CancelPrompts(sid string) bool {
	found := false
	for _, w := range f.waiters {
		if w.Prompt && w.Session == sid {
			select {
			case <-w.Cancel:
			default:
				close(w.Cancel)
			}
			found = true
		}
	}
	return found
}

package ledger

// Waiters are the client requests held until their session is ready, in
// arrival order.
type Waiters struct {
	queue []*Waiter
	last  <-chan struct{} // the done of the newest waiter
}

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
func (b *Waiters) Enter(w *Waiter) {
	w.Cancel, w.Done, w.Prev = make(chan struct{}), make(chan struct{}), b.last
	if w.Prev == nil {
		closed := make(chan struct{})
		close(closed)
		w.Prev = closed
	}
	b.queue = append(b.queue, w)
	b.last = w.Done
}

// Leave takes a waiter out of the queue.
func (b *Waiters) Leave(w *Waiter) {
	for i, x := range b.queue {
		if x == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return
		}
	}
}

// CancelPrompts cancels the waiting prompts of sid and reports whether
// there were any.
func (b *Waiters) CancelPrompts(sid string) bool {
	found := false
	for _, w := range b.queue {
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

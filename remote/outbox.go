package remote

import "sync"

// Retention bounds what a connection keeps of its output for streams that
// resume: the newest Messages messages, at most Bytes bytes of them.
type Retention struct {
	Messages int
	Bytes    int
}

// DefaultRetention keeps enough for a long turn of a chatty agent.
var DefaultRetention = Retention{Messages: 10000, Bytes: 64 << 20}

// An entry is one server message: its cursor, the stream it belongs to
// ("" for the connection's own, else a session id) and its JSON text.
type entry struct {
	cursor uint64
	route  string
	msg    []byte
}

// outbox is a connection's output: every server message, numbered from 1
// in the order the host wrote it, kept within a Retention so a stream can
// resume after any cursor it still holds. Writing never waits for a
// reader: a client that stops reading loses the oldest messages, and a
// resume from before them is refused, never silently short.
type outbox struct {
	keep Retention

	mu      sync.Mutex
	entries []entry // oldest first; entries[0].cursor == first
	first   uint64  // cursor of the oldest kept message; next when none is kept
	next    uint64  // cursor the next message gets
	bytes   int
	// taken is, per stream, the newest cursor a receiver of it was given;
	// lost, the newest cursor of it dropped before any receiver took it.
	taken map[string]uint64
	lost  map[string]uint64
	// readers counts the streams being read now, by route; all, the
	// readers of every route (a WebSocket). A message a reader has yet to
	// take is kept past the retention, up to hardFactor times it: a slow
	// reader that keeps reading loses nothing, a stalled one is cut off.
	readers map[string]int
	all     int
	// wake is closed at the next change and replaced, once a reader has
	// taken it (armed): a busy writer that nobody waits on makes no
	// channel per message.
	wake   chan struct{}
	armed  bool
	closed bool
}

func newOutbox(keep Retention) *outbox {
	if keep.Messages <= 0 {
		keep.Messages = DefaultRetention.Messages
	}
	if keep.Bytes <= 0 {
		keep.Bytes = DefaultRetention.Bytes
	}
	return &outbox{keep: keep, first: 1, next: 1, taken: map[string]uint64{}, lost: map[string]uint64{}, readers: map[string]int{}, wake: make(chan struct{})}
}

// add keeps msg as the next message of route and wakes its readers.
func (o *outbox) add(route string, msg []byte) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.next
	o.next++
	o.entries = append(o.entries, entry{cursor: c, route: route, msg: msg})
	o.bytes += len(msg)
	for len(o.entries) > 1 && o.over(1) {
		e := o.entries[0]
		if e.cursor > o.taken[e.route] && (o.all > 0 || o.readers[e.route] > 0) && !o.over(hardFactor) {
			break
		}
		if e.cursor > o.taken[e.route] {
			o.lost[e.route] = e.cursor
		}
		o.bytes -= len(e.msg)
		o.entries[0] = entry{}
		o.entries = o.entries[1:]
		o.first = o.entries[0].cursor
	}
	o.signal()
	return c
}

// hardFactor is how far past the retention a reader's untaken messages
// are kept.
const hardFactor = 4

// over says whether what is kept is past f times the retention; o.mu is
// held.
func (o *outbox) over(f int) bool {
	return len(o.entries) > f*o.keep.Messages || o.bytes > f*o.keep.Bytes
}

// attach notes a reader of route (of every route with all); the returned
// func notes its end.
func (o *outbox) attach(route string, all bool) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if all {
		o.all++
	} else {
		o.readers[route]++
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if all {
			o.all--
		} else if o.readers[route]--; o.readers[route] == 0 {
			delete(o.readers, route)
		}
	}
}

// signal wakes every reader; o.mu is held.
func (o *outbox) signal() {
	if !o.armed {
		return
	}
	close(o.wake)
	o.wake = make(chan struct{})
	o.armed = false
}

// waiter is the channel closed at the next change; o.mu is held.
func (o *outbox) waiter() <-chan struct{} {
	o.armed = true
	return o.wake
}

// close ends every reader once it has what was kept.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		o.signal()
	}
}

// A cursor position a reader starts from cannot be served: the messages
// after it were dropped.
type gapError struct{ after, first uint64 }

func (e *gapError) Error() string {
	return "the messages after that cursor are no longer kept"
}

// start is where a new reader of route begins: after the cursor it resumes
// from (resume true), or after what a reader of route was last given. It
// refuses a start that would skip a message the reader never had.
func (o *outbox) start(route string, all bool, resume bool, after uint64) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !resume {
		after = o.taken[route]
		if !all && o.lost[route] > after {
			return 0, &gapError{after: after, first: o.first}
		}
		if all && after+1 < o.first {
			return 0, &gapError{after: after, first: o.first}
		}
		return after, nil
	}
	if after >= o.next {
		return 0, &gapError{after: after, first: o.first}
	}
	if after+1 < o.first {
		return 0, &gapError{after: after, first: o.first}
	}
	return after, nil
}

// read returns the kept messages after cursor after (of route, or of every
// route when all is set), the channel that is closed at the next change,
// and whether the outbox is closed. It marks what it returns as taken. A
// reader that fell so far behind that messages it never had were dropped
// gets a gapError: it must not go on as if it had them.
func (o *outbox) read(route string, all bool, after uint64) ([]entry, <-chan struct{}, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if (all && after+1 < o.first) || (!all && o.lost[route] > after) {
		return nil, nil, false, &gapError{after: after, first: o.first}
	}
	var out []entry
	i := 0
	if after+1 > o.first {
		i = int(after + 1 - o.first)
	}
	for ; i < len(o.entries); i++ {
		e := o.entries[i]
		if all || e.route == route {
			out = append(out, e)
			if e.cursor > o.taken[e.route] {
				o.taken[e.route] = e.cursor
			}
		}
	}
	return out, o.waiter(), o.closed, nil
}

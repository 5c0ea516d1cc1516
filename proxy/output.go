package proxy

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// ErrClosed is returned when a frame is sent after its output has failed or
// the relay has stopped.
var ErrClosed = errors.New("relay output closed")

// sink is one writer with one lock: whatever writes to it, frames
// interleave only at line boundaries. Several outputs may share a sink (the
// client's stdout behind several relays, ClientPort); each keeps its own
// order and its own held places, and none waits behind another's.
//
// A long frame whose buffer the relay hands over (writeOwned) is written by a
// goroutine of its own while the relay reads the next one: reading and
// writing a multi-megabyte frame would otherwise take turns, and the relay
// would run at half the speed of a byte copy (DESIGN.md, "Speed"). One such
// write is in flight at a time, and everything else written waits for it, so
// order holds and memory stays bounded by two frames.
type sink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	err    error
	closer io.Closer

	busy  bool       // an owned frame is being written
	idle  *sync.Cond // on mu: broadcast when busy ends
	spare []byte     // the buffer of the last owned write, done with

	count *countingWriter // under w: the bytes the current writer took
}

// output is one ordered stream of frames into a sink. It can hold a place
// in its stream (see Relay.Hold). While any place is held, later frames
// wait behind it in a backlog, in order, and are written when every place
// before them has been released. With nothing held, frames go straight to
// the writer and cost no copy.
type output struct {
	s       *sink
	backlog []*entry // under s.mu; nil when nothing is held
}

// countingWriter counts the bytes its writer took, so the relay can tell
// which frames lie in what a dead agent left unread (unread.go).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// entry is one place in the backlog: frames ready to go, or a held place.
type entry struct {
	lines [][]byte
	held  bool
}

func newSink(w io.Writer) *sink {
	s := &sink{count: &countingWriter{w: w}}
	s.w = bufio.NewWriterSize(s.count, 64<<10)
	s.idle = sync.NewCond(&s.mu)
	if c, ok := w.(io.Closer); ok {
		s.closer = c
	}
	return s
}

// newOutput is the one output of a writer of its own.
func newOutput(w io.Writer) *output { return newSink(w).output() }

// output opens another ordered stream into s.
func (s *sink) output() *output { return &output{s: s} }

func (o *output) write(line []byte, flush bool) error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), line...)}})
		return nil
	}
	if err := s.writeLocked(line); err != nil {
		return err
	}
	if flush {
		return s.flushLocked()
	}
	return nil
}

// writeFlushed writes and flushes a line, and says where it ends in the
// bytes the current writer took; -1 when it waits behind a held place, and
// so is not written yet.
func (o *output) writeFlushed(line []byte) (end int64, err error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return -1, s.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), line...)}})
		return -1, nil
	}
	if err := s.writeLocked(line); err != nil {
		return -1, err
	}
	if err := s.flushLocked(); err != nil {
		return -1, err
	}
	return s.count.n, nil
}

// taken is how many bytes the current writer took.
func (o *output) taken() int64 {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitIdleLocked()
	return s.count.n
}

// writeNow writes and flushes a line ahead of anything waiting behind a
// held place: the sidecar's own requests must reach an agent whose other
// input is held until they are answered.
func (o *output) writeNow(line []byte) error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := s.writeLocked(line); err != nil {
		return err
	}
	return s.flushLocked()
}

// fail makes every later write fail with err until swap: the agent behind
// this output is gone, and a line written into its pipe while its process
// finishes dying would be lost without an error.
func (o *output) fail(err error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// swap points the output at a new writer (a restarted agent's stdin). What
// the old writer failed on is forgotten; what waits behind a held place
// stays and goes to the new one.
func (o *output) swap(w io.Writer) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitIdleLocked()
	if errors.Is(s.err, ErrClosed) {
		return
	}
	if s.closer != nil {
		s.closer.Close()
	}
	s.count = &countingWriter{w: w}
	s.w = bufio.NewWriterSize(s.count, 64<<10)
	s.closer, _ = w.(io.Closer)
	s.err = nil
}

// writeOwned writes buf, one frame with its '\n', which the output may keep
// until it is written. It returns at once, with the buffer of the previous
// owned write if that one is done, for the caller to reuse. Like write, it
// queues behind a held place; there the frame waits in buf, uncopied.
func (o *output) writeOwned(buf []byte) (spare []byte, err error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitIdleLocked()
	if s.err != nil {
		return buf, s.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{buf[:len(buf)-1]}})
		return nil, nil
	}
	if err := s.flushLocked(); err != nil {
		return buf, err
	}
	spare, s.spare = s.spare, nil
	s.busy = true
	go s.writeAsync(s.w, buf)
	return spare, nil
}

// writeAsync is the goroutine of one owned write. It ends when the write
// does; whatever waits for the sink (flush, close, the next frame) waits
// for it, so it never outlives the relay.
func (s *sink) writeAsync(w *bufio.Writer, buf []byte) {
	// The writer's buffer is empty and buf is longer than it, so this is
	// one write to the stream, with no copy.
	_, err := w.Write(buf)
	if err == nil {
		err = w.Flush()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.err == nil && s.w == w { // not an agent swapped out meanwhile
		s.err = err
	}
	s.busy = false
	s.spare = buf[:0]
	s.idle.Broadcast()
}

// waitIdleLocked waits, with s.mu held, until no owned write is in flight.
func (s *sink) waitIdleLocked() {
	for s.busy {
		s.idle.Wait()
	}
}

func (s *sink) writeLocked(line []byte) error {
	s.waitIdleLocked()
	if _, err := s.w.Write(line); err != nil {
		s.err = err
		return err
	}
	if err := s.w.WriteByte('\n'); err != nil {
		s.err = err
		return err
	}
	return nil
}

func (s *sink) flushLocked() error {
	s.waitIdleLocked()
	if err := s.w.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// hold reserves the current place in the stream and returns the function
// that fills it. Release writes its lines there, then everything that queued
// behind the place up to the next place still held. Release runs once; later
// calls do nothing.
func (o *output) hold() func(lines ...[]byte) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &entry{held: true}
	if o.backlog == nil {
		o.backlog = []*entry{}
	}
	o.backlog = append(o.backlog, e)
	var once sync.Once
	return func(lines ...[]byte) {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, l := range lines {
				e.lines = append(e.lines, append([]byte(nil), l...))
			}
			e.held = false
			o.drainLocked()
		})
	}
}

// drainLocked writes the backlog from its head up to the first held place.
// No owned write starts in this output while anything is held, and another
// output of the sink cannot start one while the sink is locked, so once the
// one in flight (if any) is done, the loop below never waits.
func (o *output) drainLocked() {
	s := o.s
	s.waitIdleLocked()
	i := 0
	for ; i < len(o.backlog) && !o.backlog[i].held; i++ {
		for _, l := range o.backlog[i].lines {
			if s.err == nil {
				s.writeLocked(l)
			}
		}
	}
	o.backlog = o.backlog[i:]
	if len(o.backlog) == 0 {
		o.backlog = nil
	}
	if s.err == nil {
		s.flushLocked()
	}
}

func (o *output) flush() error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitIdleLocked()
	if s.err != nil {
		return s.err
	}
	return s.flushLocked()
}

// close flushes and closes the underlying writer; later writes fail with
// ErrClosed. Frames still waiting behind a held place are written first.
// Only the one output of a writer of its own is closed: a shared sink stays
// open for its other outputs.
func (o *output) close() error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitIdleLocked()
	for _, e := range o.backlog {
		e.held = false
	}
	o.drainLocked()
	if s.err == nil {
		s.err = s.w.Flush()
	}
	if errors.Is(s.err, ErrClosed) {
		return nil
	}
	var cerr error
	if s.closer != nil {
		cerr = s.closer.Close()
	}
	err := errors.Join(s.err, cerr)
	s.err = ErrClosed
	return err
}

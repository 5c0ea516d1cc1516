package proxy

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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
// goroutine of the sink's while the relay reads the next one: reading and
// writing a multi-megabyte frame would otherwise take turns, and the relay
// would run at half the speed of a byte copy (DESIGN.md, "Speed"). One long
// frame is in line at a time, so memory stays bounded by two frames.
//
// Small frames that pass unchanged are not copied either: a run of them is
// kept as the span of the reader's buffer they lie in (pass), and written
// in one piece when the burst ends, when anything else is written, or, in
// line with the owned writes, when the reader needs its buffer back
// (settle). Copying each frame into the writer, and writing each burst on
// the reading goroutine, cost the relay half of a byte copy's speed on
// small frames.
//
// Owned writes go out in order, a few at most in line (maxOwned), and
// everything else written waits until the line is empty, so order holds.
type sink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	err    error
	closer io.Closer

	// owned are the owned writes in line, written in order by the
	// goroutine of drainOwned, which runs while busy. While any is in
	// line, the writer's buffer is empty: whatever writes to it waits
	// until busy ends.
	owned      []ownedWrite
	busy       bool
	idle       *sync.Cond // on mu: broadcast when an owned write is done
	spare      []byte     // the buffer of the last owned long frame, done with
	spareReads [][]byte   // readers' buffers whose runs are written

	// The run is runBuf[runFrom:runTo]: frames with their '\n', written
	// after everything before them and before anything after them. runBuf
	// is a reader's buffer, which the reader does not overwrite until
	// settle; nil for no run.
	runBuf         []byte
	runFrom, runTo int

	count *countingWriter // under w: the bytes the current writer took
}

// maxOwned is how many owned writes may be in line. A reader hands over
// a run and reads on; with room for only one, it would wait for each run's
// write while the client drained its pipe, and the two would take turns.
// A few buffers of room let each side go at its own speed.
const maxOwned = 4

// ownedWrite is one owned write: data, which lies in whole, a reader's
// buffer or, for a long frame, the frame's own.
type ownedWrite struct {
	data, whole []byte
	long        bool
}

// output is one ordered stream of frames into a sink. It can hold a place
// in its stream (see Relay.Hold). While any place is held, later frames
// wait behind it in a backlog, in order, and are written when every place
// before them has been released. With nothing held, frames go straight to
// the writer and cost no copy.
type output struct {
	s       *sink
	backlog []*entry // under s.mu; nil when nothing is held
	// held says backlog is not nil, for the reading goroutine, which looks
	// without the lock.
	held atomic.Bool

	// The local run is lbuf[lfrom:lend]: frames the reading goroutine
	// passed (passLocal) that are not in the sink yet; lend is -1 for none.
	// A lock per small frame cost as much as the rest of its write, so the
	// reading goroutine grows the run with a compare-and-swap of lend
	// alone. Whoever writes to the output next takes the run into the sink
	// first (takeLocalLocked, under s.mu) by swapping -1 in, so what it
	// writes follows the frames passed before it; the reading goroutine
	// sets lbuf and lfrom only while lend is -1.
	lbuf  []byte
	lfrom int
	lend  atomic.Int64
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
func (s *sink) output() *output {
	o := &output{s: s}
	o.lend.Store(-1)
	return o
}

// passLocal is pass without the lock, for the goroutine that reads buf:
// it adds buf[from:to] to the output's local run and reports whether it
// did. It does not when a place is held, or when the frames do not follow
// the local run; pass then takes them.
func (o *output) passLocal(buf []byte, from, to int) bool {
	if o.held.Load() {
		return false
	}
	if end := o.lend.Load(); end >= 0 {
		return &o.lbuf[0] == &buf[0] && int(end) == from && o.lend.CompareAndSwap(end, int64(to))
	}
	o.lbuf, o.lfrom = buf, from
	o.lend.Store(int64(to))
	if o.held.Load() {
		// A place was held meanwhile, and may not have seen this run:
		// the frames belong behind it.
		o.s.mu.Lock()
		o.takeLocalLocked()
		o.s.mu.Unlock()
	}
	return true
}

// takeLocalLocked moves the local run into the sink, with s.mu held, so
// that what is written next follows it.
func (o *output) takeLocalLocked() {
	s := o.s
	for {
		end := o.lend.Load()
		if end < 0 {
			return
		}
		buf, from := o.lbuf, o.lfrom
		// Placing the run may mean writing the sink's run first, which
		// waits for owned writes and lets go of the lock. The wait comes
		// before the run is taken, so a taken run is placed at once: a
		// run out of both the output and the sink would let the reader
		// have its buffer back under it.
		if s.busy && o.backlog == nil && s.err == nil && s.runBuf != nil && (&s.runBuf[0] != &buf[0] || s.runTo != from) {
			s.waitIdleLocked()
			continue
		}
		if o.lend.CompareAndSwap(end, -1) {
			o.placeLocked(buf, from, int(end))
			return
		}
	}
}

// dropLocal forgets the local run, as a swap forgets what the old writer
// was to be given.
func (o *output) dropLocal() {
	for end := o.lend.Load(); end >= 0 && !o.lend.CompareAndSwap(end, -1); end = o.lend.Load() {
	}
}

// placeLocked puts buf[from:to], frames with their '\n', where they go
// next, with s.mu held: behind a held place, or at the end of the sink's
// run, writing the run before it first if they do not follow it. It waits
// only when that write does.
func (o *output) placeLocked(buf []byte, from, to int) {
	s := o.s
	if s.err != nil {
		return // failed: nothing more is written
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), buf[from:to-1]...)}})
		return
	}
	if s.runBuf != nil && (&s.runBuf[0] != &buf[0] || s.runTo != from) {
		if s.writeRunLocked() != nil {
			return // the failure is s.err
		}
	}
	if s.runBuf == nil {
		s.runBuf, s.runFrom = buf, from
	}
	s.runTo = to
}

// pass writes buf[from:to], frames with their '\n' that lie in a reader's
// buffer, which the output may keep until the reader calls settle. It
// extends the run in the sink when the frames follow it in the same buffer.
func (o *output) pass(buf []byte, from, to int, flush bool) error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	o.takeLocalLocked()
	// Writing another run may wait for an owned write, and so let go of
	// the lock: whatever was checked before is checked again after.
	for {
		if s.err != nil {
			return s.err
		}
		if o.backlog != nil {
			o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), buf[from:to-1]...)}})
			return nil
		}
		if s.runBuf == nil || &s.runBuf[0] == &buf[0] && s.runTo == from {
			break
		}
		s.writeRunLocked() // a failure is s.err, seen at the top
	}
	if s.runBuf == nil {
		s.runBuf, s.runFrom = buf, from
	}
	s.runTo = to
	if flush {
		return s.flushLocked()
	}
	return nil
}

// settle gives a reader its buffer back before it reads into buf again.
// A run of buf still unwritten goes in line for the owned-write goroutine,
// which writes it straight from buf while the reader reads on into the
// buffer settle returns: one whose run is written, or a new one. With
// nothing of buf unwritten, buf is the reader's again.
func (o *output) settle(buf []byte) []byte {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	o.takeLocalLocked()
	if s.runBuf == nil || &s.runBuf[0] != &buf[0] {
		return buf
	}
	// Waiting for room lets go of the lock, and someone else may write
	// the run meanwhile: it is looked at again after the wait.
	for len(s.owned) >= maxOwned {
		s.idle.Wait()
	}
	if s.runBuf == nil || &s.runBuf[0] != &buf[0] {
		return buf
	}
	if s.err == nil && s.w.Buffered() > 0 {
		// Frames written before the run; no owned write is in line then.
		if err := s.w.Flush(); err != nil {
			s.err = err
		}
	}
	run := buf[s.runFrom:s.runTo]
	s.runBuf = nil
	if s.err != nil {
		return buf // nothing more is written
	}
	var next []byte
	if k := len(s.spareReads) - 1; k >= 0 {
		next, s.spareReads = s.spareReads[k], s.spareReads[:k]
	}
	if len(next) != len(buf) {
		next = make([]byte, len(buf))
	}
	s.ownLocked(ownedWrite{data: run, whole: buf})
	return next
}

// writeRunLocked writes the run, with s.mu held, into the writer's
// buffer, so that what comes after it follows it. It waits for an owned
// write first, since that lets go of the lock: the run it writes is the
// one there after the wait, and it stays marked in its reader's buffer
// until it is written, so settle never gives the buffer back under it.
func (s *sink) writeRunLocked() error {
	s.waitIdleLocked()
	if s.runBuf == nil {
		return s.err
	}
	run := s.runBuf[s.runFrom:s.runTo]
	s.runBuf = nil
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(run); err != nil {
		s.err = err
	}
	return s.err
}

// readyLocked readies o for line, with s.mu held: it waits for the owned
// writes first (waiting lets go of the lock) and takes the local run, so
// line follows everything passed before it. It reports false when line
// need not be written now: it waits behind a held place, or the sink has
// failed (err).
func (o *output) readyLocked(line []byte) (now bool, err error) {
	s := o.s
	s.waitIdleLocked()
	o.takeLocalLocked()
	if s.err != nil {
		return false, s.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), line...)}})
		return false, nil
	}
	return true, nil
}

func (o *output) write(line []byte, flush bool) error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if now, err := o.readyLocked(line); !now {
		return err
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
	if now, err := o.readyLocked(line); !now {
		return -1, err
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
	s.waitIdleLocked() // first: waiting lets go of the lock
	o.takeLocalLocked()
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
	o.dropLocal()
	s.runBuf = nil // the old writer's, as what its buffer held
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
	o.takeLocalLocked()
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
	s.ownLocked(ownedWrite{data: buf, whole: buf, long: true})
	return spare, nil
}

// ownLocked puts w in line, and starts the goroutine that writes the line
// if it is not running.
func (s *sink) ownLocked(w ownedWrite) {
	s.owned = append(s.owned, w)
	if !s.busy {
		s.busy = true
		go s.drainOwned(s.count)
	}
}

// drainOwned is the goroutine of the owned writes: it writes them in order
// to cw, keeps each one's buffer for reuse, and ends when the line is
// empty. Whatever waits for the sink (flush, close, the next frame) waits
// for it, so it never outlives the relay.
func (s *sink) drainOwned(cw *countingWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.owned) > 0 {
		w := s.owned[0]
		var err error
		if s.err == nil {
			// The writer's buffer is empty while owned writes are in line,
			// so data goes to the stream as it is, in one write, no copy.
			s.mu.Unlock()
			_, err = cw.Write(w.data)
			s.mu.Lock()
		}
		n := copy(s.owned, s.owned[1:])
		s.owned[n] = ownedWrite{}
		s.owned = s.owned[:n]
		if err != nil && s.err == nil && s.count == cw { // not an agent swapped out meanwhile
			s.err = err
		}
		if w.long {
			s.spare = w.whole[:0]
		} else if len(s.spareReads) < maxOwned {
			s.spareReads = append(s.spareReads, w.whole)
		}
		s.idle.Broadcast()
	}
	s.busy = false
	s.idle.Broadcast()
}

// waitIdleLocked waits, with s.mu held, until no owned write is in line.
func (s *sink) waitIdleLocked() {
	for s.busy {
		s.idle.Wait()
	}
}

func (s *sink) writeLocked(line []byte) error {
	if err := s.writeRunLocked(); err != nil {
		return err
	}
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

// flushLocked writes the run and whatever the writer buffers. A run with
// nothing buffered before it is written as it lies in the reader's buffer,
// with no copy.
func (s *sink) flushLocked() error {
	s.waitIdleLocked()
	if s.runBuf != nil && s.err == nil && s.w.Buffered() == 0 {
		run := s.runBuf[s.runFrom:s.runTo]
		s.runBuf = nil
		if _, err := s.count.Write(run); err != nil {
			s.err = err
		}
		return s.err
	}
	if err := s.writeRunLocked(); err != nil {
		return err
	}
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
	// Held first: a local run begun after this is seen by its reader
	// (passLocal) and brought behind the place; one begun before is
	// taken here, and goes before it.
	o.held.Store(true)
	o.takeLocalLocked()
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
		o.held.Store(false)
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
	o.takeLocalLocked()
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
	o.takeLocalLocked()
	for _, e := range o.backlog {
		e.held = false
	}
	o.drainLocked()
	if s.err == nil {
		s.flushLocked()
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

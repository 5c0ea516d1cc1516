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

// output is one writer with one lock: frames from the relay goroutine and the
// sidecar's own frames interleave only at line boundaries.
//
// An output can hold a place in its stream (see Relay.Hold). While any place
// is held, later frames wait behind it in a backlog, in order, and are written
// when every place before them has been released. With nothing held, frames
// go straight to the writer and cost no copy.
//
// A long frame whose buffer the relay hands over (writeOwned) is written by a
// goroutine of its own while the relay reads the next one: reading and
// writing a multi-megabyte frame would otherwise take turns, and the relay
// would run at half the speed of a byte copy (DESIGN.md, "Speed"). One such
// write is in flight at a time, and everything else written waits for it, so
// order holds and memory stays bounded by two frames.
type output struct {
	mu      sync.Mutex
	w       *bufio.Writer
	err     error
	closer  io.Closer
	backlog []*entry // nil when nothing is held

	busy  bool       // an owned frame is being written
	idle  *sync.Cond // on mu: broadcast when busy ends
	spare []byte     // the buffer of the last owned write, done with

	sink *countingWriter // under w: the bytes the current writer took
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

func newOutput(w io.Writer) *output {
	o := &output{sink: &countingWriter{w: w}}
	o.w = bufio.NewWriterSize(o.sink, 64<<10)
	o.idle = sync.NewCond(&o.mu)
	if c, ok := w.(io.Closer); ok {
		o.closer = c
	}
	return o
}

func (o *output) write(line []byte, flush bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), line...)}})
		return nil
	}
	if err := o.writeLocked(line); err != nil {
		return err
	}
	if flush {
		return o.flushLocked()
	}
	return nil
}

// writeFlushed writes and flushes a line, and says where it ends in the
// bytes the current writer took; -1 when it waits behind a held place, and
// so is not written yet.
func (o *output) writeFlushed(line []byte) (end int64, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return -1, o.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{append([]byte(nil), line...)}})
		return -1, nil
	}
	if err := o.writeLocked(line); err != nil {
		return -1, err
	}
	if err := o.flushLocked(); err != nil {
		return -1, err
	}
	return o.sink.n, nil
}

// taken is how many bytes the current writer took.
func (o *output) taken() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitIdleLocked()
	return o.sink.n
}

// writeNow writes and flushes a line ahead of anything waiting behind a
// held place: the sidecar's own requests must reach an agent whose other
// input is held until they are answered.
func (o *output) writeNow(line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if err := o.writeLocked(line); err != nil {
		return err
	}
	return o.flushLocked()
}

// fail makes every later write fail with err until swap: the agent behind
// this output is gone, and a line written into its pipe while its process
// finishes dying would be lost without an error.
func (o *output) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = err
	}
}

// swap points the output at a new writer (a restarted agent's stdin). What
// the old writer failed on is forgotten; what waits behind a held place
// stays and goes to the new one.
func (o *output) swap(w io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitIdleLocked()
	if errors.Is(o.err, ErrClosed) {
		return
	}
	if o.closer != nil {
		o.closer.Close()
	}
	o.sink = &countingWriter{w: w}
	o.w = bufio.NewWriterSize(o.sink, 64<<10)
	o.closer, _ = w.(io.Closer)
	o.err = nil
}

// writeOwned writes buf, one frame with its '\n', which the output may keep
// until it is written. It returns at once, with the buffer of the previous
// owned write if that one is done, for the caller to reuse. Like write, it
// queues behind a held place; there the frame waits in buf, uncopied.
func (o *output) writeOwned(buf []byte) (spare []byte, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitIdleLocked()
	if o.err != nil {
		return buf, o.err
	}
	if o.backlog != nil {
		o.backlog = append(o.backlog, &entry{lines: [][]byte{buf[:len(buf)-1]}})
		return nil, nil
	}
	if err := o.flushLocked(); err != nil {
		return buf, err
	}
	spare, o.spare = o.spare, nil
	o.busy = true
	go o.writeAsync(o.w, buf)
	return spare, nil
}

// writeAsync is the goroutine of one owned write. It ends when the write
// does; whatever waits for the output (flush, close, the next frame) waits
// for it, so it never outlives the relay.
func (o *output) writeAsync(w *bufio.Writer, buf []byte) {
	// The writer's buffer is empty and buf is longer than it, so this is
	// one write to the stream, with no copy.
	_, err := w.Write(buf)
	if err == nil {
		err = w.Flush()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil && o.err == nil && o.w == w { // not an agent swapped out meanwhile
		o.err = err
	}
	o.busy = false
	o.spare = buf[:0]
	o.idle.Broadcast()
}

// waitIdleLocked waits, with o.mu held, until no owned write is in flight.
func (o *output) waitIdleLocked() {
	for o.busy {
		o.idle.Wait()
	}
}

func (o *output) writeLocked(line []byte) error {
	o.waitIdleLocked()
	if _, err := o.w.Write(line); err != nil {
		o.err = err
		return err
	}
	if err := o.w.WriteByte('\n'); err != nil {
		o.err = err
		return err
	}
	return nil
}

func (o *output) flushLocked() error {
	o.waitIdleLocked()
	if err := o.w.Flush(); err != nil {
		o.err = err
	}
	return o.err
}

// hold reserves the current place in the stream and returns the function
// that fills it. Release writes its lines there, then everything that queued
// behind the place up to the next place still held. Release runs once; later
// calls do nothing.
func (o *output) hold() func(lines ...[]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := &entry{held: true}
	if o.backlog == nil {
		o.backlog = []*entry{}
	}
	o.backlog = append(o.backlog, e)
	var once sync.Once
	return func(lines ...[]byte) {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, l := range lines {
				e.lines = append(e.lines, append([]byte(nil), l...))
			}
			e.held = false
			o.drainLocked()
		})
	}
}

// drainLocked writes the backlog from its head up to the first held place.
// No owned write starts while anything is held, so once the one in flight
// (if any) is done, the loop below never waits.
func (o *output) drainLocked() {
	o.waitIdleLocked()
	i := 0
	for ; i < len(o.backlog) && !o.backlog[i].held; i++ {
		for _, l := range o.backlog[i].lines {
			if o.err == nil {
				o.writeLocked(l)
			}
		}
	}
	o.backlog = o.backlog[i:]
	if len(o.backlog) == 0 {
		o.backlog = nil
	}
	if o.err == nil {
		o.flushLocked()
	}
}

func (o *output) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitIdleLocked()
	if o.err != nil {
		return o.err
	}
	return o.flushLocked()
}

// close flushes and closes the underlying writer; later writes fail with
// ErrClosed. Frames still waiting behind a held place are written first.
func (o *output) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitIdleLocked()
	for _, e := range o.backlog {
		e.held = false
	}
	o.drainLocked()
	if o.err == nil {
		o.err = o.w.Flush()
	}
	if errors.Is(o.err, ErrClosed) {
		return nil
	}
	var cerr error
	if o.closer != nil {
		cerr = o.closer.Close()
	}
	err := errors.Join(o.err, cerr)
	o.err = ErrClosed
	return err
}

package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// DefaultMaxFrame is the default limit on one line. Frames of 10 MiB and more
// are ordinary (base64 images), so the limit is far above bufio.Scanner's
// 64 KiB trap and the acp-go-sdk connection's 10 MB.
const DefaultMaxFrame = 256 << 20

// keepLong is the largest long-line buffer kept between frames.
const keepLong = 16 << 20

// headSize is how much of an oversized line is kept, to find its id.
const headSize = 64 << 10

// A TooLargeError reports a line longer than the limit. The line has been read
// and thrown away; Head holds its first bytes so the caller can still find the
// id and answer the sender.
type TooLargeError struct {
	Size  int
	Limit int
	Head  []byte
	// Tail holds the line's last bytes: an id written last is found there.
	Tail []byte
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// ReadBufSize is the read buffer's size: what one read(2) of a full pipe
// gives, the agent's pipe grown past it (AgentPipeSize).
const ReadBufSize = 128 << 10

// LineReader reads newline-delimited frames of any length up to a limit.
//
// It reads into a buffer of its own, and a frame it returns lies in that
// buffer with its '\n' after it (unless it is longer than the buffer), so a
// run of frames passed on unchanged can be written from the buffer itself,
// in one write and with no copy (output.pass). Before a read overwrites the
// buffer, lend gets it back from whoever holds runs of it, and says which
// buffer to read into next.
type LineReader struct {
	src   io.Reader
	buf   []byte
	r, w  int   // buf[r:w] is read and not yet returned
	seen  int   // buf[r:seen] holds no '\n'
	err   error // the read error after buf[r:w]
	limit int
	long  []byte // reused for lines longer than the buffer
	// inLong says the last frame returned lies in long, which ends with the
	// frame's '\n' when it had one.
	inLong bool
	// lend, when set, is called before buf is read into again, while the
	// frames returned from it may still be referenced; it returns the
	// buffer to use from then on: buf itself once nothing references it,
	// or another of the same size.
	lend func(buf []byte) []byte
	// ahead, once readAhead started it, is the goroutine that reads the
	// next buffer while frames of this one are decided.
	ahead *readAhead
	// longHint is the length of the last long line, the room a new long
	// buffer is made with: a stream of long frames is most often of one
	// size, and growing to it by doubling copies each frame twice more.
	longHint int
	// kept, when set, is told each change in the bytes this reader's long
	// lines may keep live (keptLong), and keptBytes is what it was told.
	kept      func(delta int64)
	keptBytes int64
}

// keptLong is how many buffers of its largest long line a reader's frames
// may keep live: the one it reads into, the one its output is writing
// (output.writeOwned), and one more of the garbage a line makes while its
// buffer grows. A soft memory limit under them would leave the live heap
// at the limit, and the GC would run on every allocation: on a stream of
// 5 MiB frames under the sidecar's 24 MiB limit, a fifth of the relay's
// time went to it.
const keptLong = 3

// noteLong tells kept when the buffer of the long line just read is the
// largest yet. A buffer past keepLong is dropped after its frame, so it
// counts only up to there.
func (lr *LineReader) noteLong() {
	if lr.kept == nil {
		return
	}
	if want := keptLong * int64(min(cap(lr.long), keepLong+ReadBufSize)); want > lr.keptBytes {
		lr.kept(want - lr.keptBytes)
		lr.keptBytes = want
	}
}

// releaseLong tells kept that the reader is done and keeps nothing more.
func (lr *LineReader) releaseLong() {
	if lr.kept != nil && lr.keptBytes > 0 {
		lr.kept(-lr.keptBytes)
		lr.keptBytes = 0
	}
}

// aheadRoom is the room before the data of each buffer read ahead, where
// the start of a frame cut by the end of the buffer before is put back, so
// the frame lies in one piece. A longer start goes the way of a long line.
const aheadRoom = 16 << 10

// readAhead is a goroutine of the reader's that reads into free buffers
// and hands them over, in order, as full.
//
// A line longer than a buffer is read by the caller itself, straight into
// the line's own buffer (LineReader.longLine): copied there from buffers
// read ahead, a 5 MiB frame cost a third of the relay's time. For that the
// caller stops giving buffers (hold), takes back those not yet read into,
// and reads the source once every buffer given is back (out == 0): the
// goroutine then waits for a buffer and touches nothing.
type readAhead struct {
	full chan aheadChunk // closed after the chunk with the read error
	free chan []byte
	err  error // the read error, once full is closed

	// The caller's: how many buffers were given and have not come back
	// (full or taken back), and while a long line is read, the buffers
	// kept back.
	out  int
	hold bool
	kept [][]byte
	// ended says free is closed: the caller's own read failed, and the
	// goroutine, given no more buffers, has ended or is ending.
	ended bool
	// parked says the goroutine is given no buffers because the source
	// is not streaming: the caller reads itself once every buffer is back
	// (LineReader.fillSelf), and hands reading back to the goroutine when
	// a read finds a stream again (streamingRead).
	parked bool

	// pipe, when the source is one, is grown the first time a read finds
	// it full, by whoever reads it then.
	pipe *os.File
	grow bool
}

// aheadChunk is one read: buf[aheadRoom:n], then err.
type aheadChunk struct {
	buf []byte
	n   int
	err error
}

// readAhead makes the reader read on while the caller decides frames: a
// goroutine of its own reads the next buffer meanwhile, so the read(2),
// a fifth of the relay's time on a stream of small frames, leaves the
// caller's goroutine. The goroutine ends once the source fails or ends,
// which the caller learns from Next, so it ends before the caller's loop
// does. Call it before the first Next.
//
// It reads the agent's stdout, the one source that streams, so when that
// is a pipe and a read finds it full, the pipe is grown (GrowPipe) and the
// agent writes on while this reader catches up. Only a pipe that fills is
// grown: a pipe's size counts against its user's pipe-user-pages-soft, and
// past that every new pipe of the user's gets two pages, so an
// orchestrator's hundred quietly chatting agents must not take it all.
//
// Handing each read over costs a wake-up of the caller's goroutine, which
// was most of what the relay added to a request's round trip. So until a
// read finds the agent streaming (streamingRead), and again once a read of
// the goroutine's finds it quiet, the goroutine is parked and the caller
// reads for itself: a lone response is read and decided on one goroutine,
// as a byte copy would.
func (lr *LineReader) readAhead() {
	a := &readAhead{full: make(chan aheadChunk, 1), free: make(chan []byte, 4), parked: true}
	a.pipe, a.grow = lr.src.(*os.File)
	size := aheadRoom + ReadBufSize
	a.kept = [][]byte{make([]byte, size), make([]byte, size)}
	lr.buf = make([]byte, size)
	lr.r, lr.seen, lr.w = aheadRoom, aheadRoom, aheadRoom
	lr.ahead = a
	go a.run(lr.src)
}

func (a *readAhead) run(src io.Reader) {
	defer close(a.full)
	for buf := range a.free {
		c := aheadChunk{buf: buf, n: aheadRoom}
		c.n, c.err = readSome(src, buf, aheadRoom)
		a.grown(c.n - aheadRoom)
		a.full <- c
		if c.err != nil {
			return
		}
	}
}

// grown grows the pipe after a read of n bytes that found it full.
func (a *readAhead) grown(n int) {
	if a.grow && n >= defaultPipeSize {
		// Refused, the pipe keeps its size: it is speed, not function.
		_ = GrowPipe(a.pipe)
		a.grow = false
	}
}

// streamingRead is the size of a read that says the source streams: a
// full pipe of the default size holds as much. What is read ahead then
// waits for the caller more often than the caller waits for it.
const streamingRead = defaultPipeSize

// give hands buf to the goroutine to read into, or, while a long line is
// read or the goroutine is parked, keeps it back.
func (a *readAhead) give(buf []byte) {
	if a.hold || a.parked || a.ended {
		if len(a.kept) < cap(a.free) {
			a.kept = append(a.kept, buf)
		}
		return
	}
	select {
	case a.free <- buf:
		a.out++
	default: // enough buffers circulate; this one is let go
	}
}

// stop stops giving buffers, takes back those the goroutine has not
// begun to read into, and says whether every buffer is back.
func (a *readAhead) stop() bool {
	a.hold = true
	return a.takeBack()
}

// takeBack takes back the buffers the goroutine has not begun to read
// into, and says whether every buffer is back.
func (a *readAhead) takeBack() bool {
	for a.out > 0 {
		select {
		case buf := <-a.free:
			a.out--
			a.kept = append(a.kept, buf)
		default:
			return false
		}
	}
	return true
}

// resume gives the kept buffers back to the goroutine, unless it is
// parked.
func (a *readAhead) resume() {
	a.hold = false
	if !a.parked {
		a.giveKept()
	}
}

// giveKept gives the goroutine the buffers kept back.
func (a *readAhead) giveKept() {
	kept := a.kept
	a.kept = nil
	for _, buf := range kept {
		a.give(buf)
	}
}

// fail ends the goroutine after the caller's own read failed with err:
// it is given no more buffers, and Next then gets err as from a read of
// its own.
func (a *readAhead) fail(err error) {
	if a.ended {
		return
	}
	a.err, a.ended = err, true
	close(a.free)
}

// park stops giving the goroutine buffers after a read of n bytes that
// found the source quiet, or unparks it after one that found it streaming.
func (a *readAhead) park(n int) {
	switch quiet := n < streamingRead; {
	case quiet && !a.parked:
		a.parked = true
		a.takeBack()
	case !quiet && a.parked:
		a.parked = false
		if !a.hold {
			a.giveKept()
		}
	}
}

// spare is a buffer for the caller's own read: one kept back, or a new one.
func (a *readAhead) spare() []byte {
	if n := len(a.kept); n > 0 {
		buf := a.kept[n-1]
		a.kept = a.kept[:n-1]
		return buf
	}
	return make([]byte, aheadRoom+ReadBufSize)
}

// readSome reads into buf[from:] and returns where the data ends. As
// bufio does, a reader that keeps giving nothing is broken.
func readSome(src io.Reader, buf []byte, from int) (int, error) {
	for range 100 {
		n, err := src.Read(buf[from:])
		from += n
		if err != nil || n > 0 {
			return from, err
		}
	}
	return from, io.ErrNoProgress
}

// fillAhead takes the next buffer read ahead, with the cut frame at the
// end of this one put back before its data, and gives this one back.
func (lr *LineReader) fillAhead() {
	a := lr.ahead
	if a.out == 0 && a.parked {
		lr.fillSelf()
		return
	}
	c, ok := <-a.full
	if !ok {
		lr.err = a.err
		return
	}
	a.out--
	if c.err != nil {
		a.err = c.err
	} else {
		a.park(c.n - aheadRoom)
	}
	lr.next(c.buf, c.n, c.err)
}

// fillSelf reads the next buffer on the caller's goroutine, the read-ahead
// goroutine parked with no buffer of its own.
func (lr *LineReader) fillSelf() {
	a := lr.ahead
	if a.ended {
		lr.err = a.err
		return
	}
	buf := a.spare()
	n, err := readSome(lr.src, buf, aheadRoom)
	a.grown(n - aheadRoom)
	if err != nil {
		a.fail(err)
	} else {
		a.park(n - aheadRoom)
	}
	lr.next(buf, n, err)
}

// next makes buf, read into up to n with err after it, the read buffer,
// with the cut frame at the end of the current one put back before its
// data, and gives the current one back.
func (lr *LineReader) next(buf []byte, n int, err error) {
	tail := lr.buf[lr.r:lr.w] // no longer than aheadRoom (readSlice)
	at := aheadRoom - len(tail)
	copy(buf[at:], tail)
	old := lr.buf
	lr.buf, lr.r, lr.seen, lr.w = buf, at, aheadRoom, n
	if err != nil {
		lr.err = err
	}
	if lr.lend != nil {
		old = lr.lend(old)
	}
	lr.ahead.give(old)
}

// drained says whether nothing more is ready without waiting for the
// source: the burst has been read, and the relay flushes.
func (lr *LineReader) drained() bool {
	return lr.w == lr.r && (lr.ahead == nil || len(lr.ahead.full) == 0)
}

// NewLineReader reads frames from r; a limit of 0 or less means DefaultMaxFrame.
func NewLineReader(r io.Reader, limit int) *LineReader {
	if limit <= 0 {
		limit = DefaultMaxFrame
	}
	return &LineReader{src: r, buf: make([]byte, ReadBufSize), limit: limit}
}

// Buffered reports how many bytes of the buffer are ready without another
// read, so a caller can flush what it wrote once a burst has been drained.
func (lr *LineReader) Buffered() int { return lr.w - lr.r }

// errBufferFull says a fragment fills the whole buffer and holds no '\n'.
var errBufferFull = errors.New("line longer than the read buffer")

// readSlice is bufio.Reader.ReadSlice('\n') on the reader's own buffer: the
// next line with its '\n', or, with errBufferFull, the full buffer of a line
// longer than it, or, with the read error, what came before the error.
func (lr *LineReader) readSlice() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.seen:lr.w], '\n'); i >= 0 {
			end := lr.seen + i + 1
			line := lr.buf[lr.r:end]
			lr.r, lr.seen = end, end
			return line, nil
		}
		lr.seen = lr.w
		if lr.err != nil {
			line, err := lr.buf[lr.r:lr.w], lr.err
			lr.r, lr.err = lr.w, nil
			return line, err
		}
		if lr.w-lr.r == len(lr.buf) || lr.ahead != nil && (lr.w-lr.r > aheadRoom || lr.ahead.hold && lr.ahead.out == 0) {
			line := lr.buf[lr.r:lr.w]
			lr.r = lr.w
			return line, errBufferFull
		}
		if lr.ahead != nil {
			lr.fillAhead()
			continue
		}
		lr.fill()
	}
}

// fill reads once more into the buffer, after what is still unread.
func (lr *LineReader) fill() {
	if lr.r > 0 || lr.w == len(lr.buf) {
		next := lr.buf
		if lr.lend != nil {
			next = lr.lend(lr.buf)
		}
		n := copy(next, lr.buf[lr.r:lr.w])
		lr.buf, lr.r, lr.seen, lr.w = next, 0, n, n
	}
	lr.w, lr.err = readSome(lr.src, lr.buf, lr.w)
}

// inBuffer says whether line, the frame Next just returned, lies in the
// read buffer with its '\n' right after it, as buf[from:to].
func (lr *LineReader) inBuffer(line []byte) (buf []byte, from, to int, ok bool) {
	if lr.inLong || len(line) == 0 || lr.r == 0 || lr.buf[lr.r-1] != '\n' {
		return nil, 0, 0, false
	}
	from = lr.r - 1 - len(line)
	if from < 0 || &lr.buf[from] != &line[0] {
		return nil, 0, 0, false
	}
	return lr.buf, from, lr.r, true
}

// nextScanned returns the next frame, with its envelope in env, when the
// stream scanner can read it whole by its tail (streamScanner.byTail) and a
// '\n' ends it: a chunk after a chunk is then found by the end of its
// text, not searched for its '\n' first. The frame holds no '\n' before
// its end, as neither the kept start and tail (from earlier lines) nor a
// valid string can. Otherwise it returns false, and the caller reads the
// frame with Next.
func (lr *LineReader) nextScanned(ss *streamScanner, env *Envelope) ([]byte, bool) {
	b := lr.buf[lr.r:lr.w]
	n, ok := ss.byTail(b, true, env)
	if !ok || n > lr.limit {
		return nil, false
	}
	lr.r += n + 1
	lr.seen = max(lr.seen, lr.r)
	lr.inLong = false
	return b[:n], true
}

// nextFrame reads the next frame for a relay's loop, with its envelope in
// env: by the scanner's kept tail where it can (nextScanned), else with
// Next and the stream scan. bad says why a line is not valid JSON in
// UTF-8. err is a *TooLargeError for a line over the limit, io.EOF at the
// end of input (a closed input included), or the read's failure.
func (lr *LineReader) nextFrame(ss *streamScanner, env *Envelope) (line []byte, bad, err error) {
	if line, ok := lr.nextScanned(ss, env); ok {
		return line, nil, nil
	}
	if line, err = lr.Next(); err != nil {
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
		return nil, nil, err
	}
	return line, ss.scan(line, env), nil
}

// Next returns the next frame without its '\n'. A '\r' before it stays part of
// the frame (it is JSON white space, and bytes out equal bytes in). Lines of
// white space alone are skipped. The slice is valid until the next call.
//
// A line over the limit yields a *TooLargeError; the reader stays usable. A
// last line without '\n' at end of input is still a frame.
func (lr *LineReader) Next() ([]byte, error) {
	for {
		line, err := lr.line()
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			return nil, err
		}
		// Frames start with a brace, so the trim is for the rare blank line.
		if len(line) > 0 && line[0] > ' ' || len(bytes.TrimLeft(line, " \t\r")) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// takeLong hands over the buffer of the last frame returned, with the
// frame's '\n' at its end, when that frame was longer than the read buffer
// and no larger than keepLong; otherwise it returns nil and the frame stays
// valid only until the next call. The reader reads on into a buffer of its
// own, so the frame can be written while the next one is read.
func (lr *LineReader) takeLong() []byte {
	if !lr.inLong || len(lr.long) > keepLong {
		return nil
	}
	b := lr.long
	if b[len(b)-1] != '\n' { // the last line, cut by EOF
		b = append(b, '\n')
	}
	lr.long, lr.inLong = nil, false
	return b
}

// giveLong returns a buffer of an earlier takeLong for reuse.
func (lr *LineReader) giveLong(b []byte) {
	if lr.long == nil && cap(b) <= keepLong {
		lr.long = b[:0]
	}
}

func (lr *LineReader) line() ([]byte, error) {
	if cap(lr.long) > keepLong {
		lr.long = nil // one huge frame must not pin its buffer for the rest of the run
	}
	lr.long = lr.long[:0]
	lr.inLong = false
	frag, err := lr.readSlice()
	if err == nil || !errors.Is(err, errBufferFull) {
		if lineLen(frag, err) > lr.limit {
			return nil, lr.discard(len(frag), frag, err)
		}
		if err == nil {
			return frag[:len(frag)-1], nil
		}
		return frag, err
	}
	return lr.longLine(frag)
}

// longLine reads the rest of a line longer than the read buffer, whose
// start is frag, into long: what was read ahead already is copied there,
// the rest is read straight into it (readAhead).
func (lr *LineReader) longLine(frag []byte) ([]byte, error) {
	a := lr.ahead
	err := errBufferFull
	for {
		if len(lr.long)+lineLen(frag, err) > lr.limit {
			lr.resumeAhead()
			return nil, lr.discard(len(lr.long)+len(frag), frag, err)
		}
		lr.long = append(lr.long, frag...)
		if !errors.Is(err, errBufferFull) {
			break
		}
		if a == nil || a.stop() {
			var done bool
			if done, err = lr.readLong(); !done {
				err = errBufferFull
			}
			frag = nil
			continue
		}
		frag, err = lr.readSlice()
	}
	lr.resumeAhead()
	lr.inLong = true
	lr.longHint = min(len(lr.long), keepLong)
	lr.noteLong()
	if err == nil {
		return lr.long[:len(lr.long)-1], nil
	}
	return lr.long, err
}

// resumeAhead lets the read-ahead goroutine read on after a long line.
func (lr *LineReader) resumeAhead() {
	if lr.ahead != nil {
		lr.ahead.resume()
	}
}

// readLong reads once from the source straight into long, which nothing
// else reads meanwhile, and says whether the line ended: at a '\n', with
// what came after it put back in the read buffer, or at the read's error.
// One read takes at most a read buffer's worth, so what comes after the
// line fits there.
func (lr *LineReader) readLong() (done bool, err error) {
	if cap(lr.long)-len(lr.long) < ReadBufSize {
		grown := make([]byte, len(lr.long), lr.longRoom())
		copy(grown, lr.long)
		lr.long = grown
	}
	from := len(lr.long)
	end, err := readSome(lr.src, lr.long[:from+ReadBufSize], from)
	lr.long = lr.long[:end]
	if lr.ahead != nil {
		lr.ahead.grown(end - from)
	}
	if i := bytes.IndexByte(lr.long[from:], '\n'); i >= 0 {
		at := from + i + 1
		lr.putBack(lr.long[at:])
		lr.long = lr.long[:at]
		if err != nil {
			// Read again from the buffer after what was put back.
			lr.keepErr(err)
		}
		return true, nil
	}
	if err != nil {
		if lr.ahead != nil {
			lr.ahead.fail(err)
		}
		return true, err
	}
	return false, nil
}

// longRoom is the capacity long grows to: room for the last long line,
// else twice what it has, a quarter more past keepLong, where a frame is
// rare and memory counts; never more than the longest line the limit lets
// through, with a read's room after it.
func (lr *LineReader) longRoom() int {
	grow := cap(lr.long)
	if grow > keepLong {
		grow /= 4
	}
	size := max(cap(lr.long)+grow, lr.longHint) + ReadBufSize
	return min(size, lr.limit+ReadBufSize)
}

// putBack makes rest, read after a long line, the read buffer's content.
func (lr *LineReader) putBack(rest []byte) {
	buf := lr.buf
	if lr.lend != nil {
		buf = lr.lend(buf)
	}
	at := 0
	if lr.ahead != nil {
		at = aheadRoom
	}
	n := copy(buf[at:], rest)
	lr.buf, lr.r, lr.seen, lr.w = buf, at, at, at+n
}

// keepErr keeps err, which a read gave with the bytes now in the read
// buffer, to be returned after them.
func (lr *LineReader) keepErr(err error) {
	lr.err = err
	if lr.ahead != nil {
		lr.ahead.fail(err)
	}
}

// lineLen is the length of a fragment without its '\n'.
func lineLen(frag []byte, err error) int {
	if err == nil {
		return len(frag) - 1
	}
	return len(frag)
}

// keepTail appends frag to tail and keeps the last headSize bytes.
func keepTail(tail, frag []byte) []byte {
	tail = append(tail, frag...)
	if len(tail) > 2*headSize {
		tail = append(tail[:0], tail[len(tail)-headSize:]...)
	}
	return tail
}

// discard drops the rest of an oversized line, keeping its head.
func (lr *LineReader) discard(size int, frag []byte, err error) error {
	head := append([]byte(nil), lr.long[:min(len(lr.long), headSize)]...)
	if len(head) < headSize {
		head = append(head, frag[:min(len(frag), headSize-len(head))]...)
	}
	tail := keepTail(append([]byte(nil), lr.long...), frag)
	lr.long = lr.long[:0]
	for errors.Is(err, errBufferFull) {
		frag, err = lr.readSlice()
		size += len(frag)
		tail = keepTail(tail, frag)
	}
	if err == nil {
		size-- // the '\n'
	}
	tooLarge := &TooLargeError{Size: size, Limit: lr.limit, Head: head, Tail: bytes.TrimRight(tail, "\n")}
	if err != nil && !errors.Is(err, io.EOF) {
		return errors.Join(tooLarge, err)
	}
	return tooLarge
}

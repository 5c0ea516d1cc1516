package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadAheadReadsEveryFrame: a reader that reads ahead returns every
// frame in order, whatever the writes cut: frames whose start ends a
// buffer (put back before the next one's data, or, longer than the room
// for it, read as a long line), frames longer than a buffer, and a last
// frame without '\n'. A buffer it lent is never read into again until it
// is given back.
func TestReadAheadReadsEveryFrame(t *testing.T) {
	const n = 3000
	frame := func(i int) string {
		return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, testPad(i))
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		defer w.Close()
		var all strings.Builder
		for i := range n {
			all.WriteString(frame(i))
			if i < n-1 {
				all.WriteString("\n")
			}
		}
		writeCut(w, []byte(all.String()), 2*ReadBufSize)
	}()
	lr := NewLineReader(r, 0)
	var lends lendCheck
	lr.lend = lends.lend
	lr.readAhead()
	for i := range n {
		line, err := lr.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if string(line) != frame(i) {
			t.Fatalf("frame %d = %.60q, want %.60q", i, line, frame(i))
		}
	}
	if _, err := lr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	if lends.n < 10 {
		t.Fatalf("%d buffers lent; the stream should have taken more", lends.n)
	}
	lends.verify(t)
}

// lendCheck plays the relay's output for a LineReader's lend. It holds each
// buffer lent, as a run still being written would, with a copy of what it
// held, and gives it back for the reader to use again only after
// lendWindow more have been lent, once it has checked that the reader did
// not write to it meanwhile. A window, not the whole stream: a stream read
// in tiny pieces lends a buffer a read, and keeping every one took 9 GB
// under -race.
type lendCheck struct {
	held    []lent // lent, oldest first
	taken   []lent // long lines' buffers taken
	n       int    // buffers lent or taken so far
	written []int  // those written to while held, by number
}

// lendWindow is how many later lends a lent buffer is held for.
const lendWindow = 64

// lent is a buffer held, with a copy of what it held then.
type lent struct {
	k         int // which lend or take it was
	buf, copy []byte
}

func (c *lendCheck) lend(buf []byte) []byte {
	c.held = append(c.held, c.keep(buf))
	if len(c.held) <= lendWindow {
		return make([]byte, len(buf))
	}
	old := c.held[0]
	c.held = append(c.held[:0], c.held[1:]...)
	c.check(old)
	if len(old.buf) != len(buf) {
		return make([]byte, len(buf))
	}
	return old.buf
}

// hold keeps a long line's buffer taken to the end of the test: it is
// never written to again.
func (c *lendCheck) hold(buf []byte) { c.taken = append(c.taken, c.keep(buf)) }

func (c *lendCheck) keep(buf []byte) lent {
	c.n++
	return lent{c.n, buf, bytes.Clone(buf)}
}

func (c *lendCheck) check(l lent) {
	if !bytes.Equal(l.buf, l.copy) {
		c.written = append(c.written, l.k)
	}
}

// verify checks what is still held, and fails the test for every buffer
// written to after it was lent or taken.
func (c *lendCheck) verify(t *testing.T) {
	t.Helper()
	for _, l := range append(c.held, c.taken...) {
		c.check(l)
	}
	if len(c.written) > 0 {
		t.Fatalf("%d of %d buffers were written to after they were lent or taken, first of them %v", len(c.written), c.n, c.written[:min(10, len(c.written))])
	}
}

// FuzzNextScanned: frames read the relay's way (by the scanner's kept tail
// where it can, else Next and the stream scan) are the lines Next gives,
// with Scan's envelopes and errors, whatever the stream holds.
func FuzzNextScanned(f *testing.F) {
	chunk := func(text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
	}
	for _, seed := range []string{
		chunk("The first chunk of a turn.") + "\n" + chunk("and the one after it, longer") + "\n" + chunk("x") + "\n",
		chunk("The first chunk of a turn.") + "\n" + chunk("a raw\nnewline in the text, cut") + "\n",
		chunk("The first chunk of a turn.") + "\n" + chunk("then white space after it ") + " \r\n" + chunk("and the last one, unended"),
		chunk("The first chunk of a turn.") + "\n\n" + chunk(`an escape \" and \u00e9 in it`) + "\n" + chunk("bad \x01 control") + "\n",
		chunk("The first chunk of a turn.") + "\n" + chunk("a longer text, over the limit of the reader, which is small") + "\n",
	} {
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		const limit = 300
		type got struct {
			line string
			env  Envelope
			err  string
		}
		read := func(fast bool) []got {
			lr := NewLineReader(&slowReader{b: stream, n: int(cut) + 1}, limit)
			var ss streamScanner
			var out []got
			for {
				var g got
				line, ok := []byte(nil), false
				if fast {
					line, ok = lr.nextScanned(&ss, &g.env)
				}
				if !ok {
					var err error
					if line, err = lr.Next(); err != nil {
						if errors.Is(err, io.EOF) {
							return out
						}
						var tooLarge *TooLargeError
						if !errors.As(err, &tooLarge) {
							t.Fatalf("read: %v", err)
						}
						out = append(out, got{err: "too large"})
						continue
					}
					if fast {
						if err := ss.scan(line, &g.env); err != nil {
							g.err = "malformed"
						}
					} else if g.env, err = Scan(line); err != nil {
						g.err = "malformed"
					}
				}
				if g.err != "" {
					g.env = Envelope{}
				}
				g.line = string(line)
				out = append(out, g)
			}
		}
		want, have := read(false), read(true)
		if len(want) != len(have) {
			t.Fatalf("%d frames read the relay's way, %d by Next", len(have), len(want))
		}
		for i := range want {
			w, h := want[i], have[i]
			if w.line != h.line || w.err != h.err || w.env.Kind != h.env.Kind || !bytes.Equal(w.env.ID, h.env.ID) ||
				!bytes.Equal(w.env.Method, h.env.Method) || w.env.SessionID != h.env.SessionID ||
				!bytes.Equal(w.env.Update, h.env.Update) || w.env.Error != h.env.Error {
				t.Fatalf("frame %d: the relay's way %q %+v %s, Next and Scan %q %+v %s", i, h.line, h.env, h.err, w.line, w.env, w.err)
			}
		}
	})
}

// slowReader gives at most n bytes a read, so frames are cut anywhere.
type slowReader struct {
	b []byte
	n int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}

// TestTodaysChunksAreReadByTheirTail: chunks as claude-agent-acp 0.101 and
// codex-acp 2.6 write them (a short delta of text, then a messageId, the
// same for every chunk of a message, after the content) are read by their
// tail from the second one of each message on, with Scan's envelopes.
func TestTodaysChunksAreReadByTheirTail(t *testing.T) {
	chunk := func(msg, text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"4e1c2b7a-5d3f-4a9e-8c61-0f2d9b3e7a15","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
			text + `"},"messageId":"` + msg + `"}}}`
	}
	var stream strings.Builder
	var want []string
	for m, msg := range []string{"msg_01XFDUDYJgAACzvnptvVoYEL", "msg_01Hq7wT3sKLmN9pQrStUvWxY"} {
		for k, text := range []string{"Hello", " there", ", I", " read the file", " and", " `main.go` says \\\"hi\\\"."} {
			line := chunk(msg, fmt.Sprintf("%s %d.%d", text, m, k))
			want = append(want, line)
			stream.WriteString(line + "\n")
		}
	}
	lr := NewLineReader(strings.NewReader(stream.String()), 0)
	var ss streamScanner
	byTail := 0
	for i, w := range want {
		var env Envelope
		line, ok := lr.nextScanned(&ss, &env)
		if ok {
			byTail++
		} else {
			var err error
			if line, err = lr.Next(); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if err := ss.scan(line, &env); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
		scanned, err := Scan([]byte(w))
		if string(line) != w || err != nil || env.Kind != scanned.Kind || env.SessionID != scanned.SessionID ||
			string(env.Update) != string(scanned.Update) || string(env.Method) != string(scanned.Method) {
			t.Fatalf("frame %d = %q %+v, want %q %+v (%v)", i, line, env, w, scanned, err)
		}
	}
	// The first chunk of each message is scanned from the snapshot; every
	// other one is read by its tail.
	if byTail != len(want)-2 {
		t.Errorf("%d of %d chunks read by their tail, want %d", byTail, len(want), len(want)-2)
	}
}

// TestLongLinesReadStraight: lines longer than the read buffer, which the
// reader reads straight into their own buffer, come out as a plain split
// of the stream says, with and without reading ahead, however the reads
// cut it: with the frames after them that the same read brought, with a
// line over the limit among them, with a read error or the end of input
// in a long line or right after one. A lent read buffer is never read into
// again, and a long line's buffer taken is never written to again.
func TestLongLinesReadStraight(t *testing.T) {
	const limit = 900 << 10
	sizes := []int{ReadBufSize + 1, 3 * ReadBufSize, 10, 700 << 10, limit + 1, 2, limit, ReadBufSize - 1, 5, 2*ReadBufSize + 7, 1}
	var stream []byte
	var lines []int // each line's size, in order
	for k := range 3 * len(sizes) {
		size := sizes[k%len(sizes)]
		line := bytes.Repeat([]byte{byte('a' + k%26)}, size)
		stream = append(append(stream, line...), '\n')
		lines = append(lines, size)
	}
	failure := errors.New("the pipe broke")
	for _, tc := range []struct {
		name  string
		cut   int   // the length of the stream the source gives
		end   error // what the source gives after it
		ahead bool
	}{
		{"whole", len(stream), io.EOF, false},
		{"whole-ahead", len(stream), io.EOF, true},
		{"unended-long", len(stream) - 1, io.EOF, true},
		{"broken-in-long", len(stream) / 2, failure, true},
		{"broken-in-long-plain", len(stream) / 2, failure, false},
		{"broken-after-long", sizes[0] + 1 + sizes[1] + 1 + 3, failure, true},
		{"broken-after-long-plain", sizes[0] + 1 + sizes[1] + 1 + 3, failure, false},
	} {
		for _, most := range []int{97, 64 << 10, 3 * ReadBufSize} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, most), func(t *testing.T) {
				src := &cutReader{b: stream[:tc.cut], most: most, end: tc.end}
				lr := NewLineReader(src, limit)
				var lends lendCheck
				lr.lend = lends.lend
				if tc.ahead {
					lr.readAhead()
				}
				at := 0 // where the next line starts in the stream
				for k, size := range lines {
					ended := at+size < tc.cut // its '\n' was given
					if at >= tc.cut || !ended && tc.end != io.EOF {
						break
					}
					want := stream[at : at+min(size, tc.cut-at)]
					at += size + 1
					line, err := lr.Next()
					if size > limit {
						var tooLarge *TooLargeError
						if !errors.As(err, &tooLarge) || tooLarge.Size != len(want) {
							t.Fatalf("line %d of %d bytes: %v, want it too large", k, size, err)
						}
						continue
					}
					if err != nil && !(errors.Is(err, io.EOF) && !ended) {
						t.Fatalf("line %d of %d bytes: %v", k, size, err)
					}
					if !bytes.Equal(line, want) {
						t.Fatalf("line %d: got %d bytes of %.1q, want %d of %.1q", k, len(line), line, len(want), want)
					}
					if buf := lr.takeLong(); buf != nil {
						lends.hold(buf)
					}
				}
				if _, err := lr.Next(); !errors.Is(err, tc.end) {
					t.Fatalf("after the last line: %v, want %v", err, tc.end)
				}
				lends.verify(t)
			})
		}
	}
}

// cutReader gives b in reads of 1 to most bytes, the last of them with
// end, and io.EOF after that: an error is given once, as a broken pipe's
// is.
type cutReader struct {
	b    []byte
	most int
	k    int
	end  error
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	r.k++
	n := copy(p[:min(len(p), 1+(r.k*7919)%r.most)], r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 && r.end != nil {
		return n, r.end
	}
	return n, nil
}

// TestReadAheadParksOnAQuietSource: while the source gives a frame at a
// time, the caller reads it itself and no buffer is out with the
// read-ahead goroutine, so a lone response costs no hand-over; once a read
// finds the source streaming, the goroutine reads ahead while the caller
// is busy elsewhere; and once the stream is quiet again, it is parked
// again.
func TestReadAheadParksOnAQuietSource(t *testing.T) {
	src := &handedReader{chunks: make(chan []byte, 16), asked: make(chan struct{}, 64)}
	lr := NewLineReader(src, 0)
	lr.readAhead()
	small := func(i int) []byte { return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", i) }
	// next returns the next frame, and how many reads the source was
	// asked for meanwhile or since the last call.
	next := func() ([]byte, int) {
		t.Helper()
		line, err := lr.Next()
		if err != nil {
			t.Fatal(err)
		}
		return line, drainCount(src.asked)
	}

	for i := range 3 {
		src.chunks <- small(i)
		line, reads := next()
		if want := small(i); !bytes.Equal(line, want[:len(want)-1]) {
			t.Fatalf("quiet frame %d = %q", i, line)
		}
		if reads != 1 || lr.ahead.out != 0 {
			t.Fatalf("quiet frame %d: %d reads, %d buffers read ahead; want 1 read of the caller's and none ahead", i, reads, lr.ahead.out)
		}
	}

	stream := frames(streamingRead)
	src.chunks <- stream
	line, err := lr.Next()
	if err != nil || !bytes.Equal(line, stream[:bytes.IndexByte(stream, '\n')]) {
		t.Fatalf("the stream's first frame = %.60q, %v", line, err)
	}
	// The caller read the stream; it is not reading now, so only the
	// goroutine can ask for a second read.
	for range 2 {
		select {
		case <-src.asked:
		case <-time.After(time.Minute):
			t.Fatal("a streaming source was not read ahead")
		}
	}
	for range bytes.Count(stream, []byte("{\"jsonrpc\"")) - 1 {
		next()
	}

	for i := range 4 {
		src.chunks <- small(i)
		next()
	}
	if lr.ahead.out != 0 {
		t.Fatalf("after quiet reads again, %d buffers are read ahead; want none", lr.ahead.out)
	}
	src.chunks <- small(9)
	if _, reads := next(); reads != 1 || lr.ahead.out != 0 {
		t.Fatalf("quiet again: %d reads, %d buffers read ahead; want the caller's one", reads, lr.ahead.out)
	}
	close(src.chunks)
	if _, err := lr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want EOF", err)
	}
}

// handedReader gives each chunk the test hands it as one read, and says
// on asked each time it is read; it gives io.EOF once chunks is closed.
type handedReader struct {
	chunks chan []byte
	asked  chan struct{}
}

func (r *handedReader) Read(p []byte) (int, error) {
	r.asked <- struct{}{}
	c, ok := <-r.chunks
	if !ok {
		return 0, io.EOF
	}
	if len(c) > len(p) {
		panic(fmt.Sprintf("a chunk of %d bytes for a read of %d", len(c), len(p)))
	}
	return copy(p, c), nil
}

// drainCount takes what is in c and says how much it was.
func drainCount(c chan struct{}) int {
	n := 0
	for {
		select {
		case <-c:
			n++
		default:
			return n
		}
	}
}

// frames is lines of JSON, n bytes in all.
func frames(n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		line := `{"jsonrpc":"2.0","method":"m","params":{"text":"` + strings.Repeat("x", min(200, max(0, n-b.Len()-60))) + `"}}` + "\n"
		if b.Len()+len(line) > n {
			line = strings.Repeat(" ", n-b.Len()-1) + "\n" // a blank line, skipped
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

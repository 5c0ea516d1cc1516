package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
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
		pad := strings.Repeat("x", (i*53)%900)
		switch {
		case i%700 == 350:
			pad = strings.Repeat("y", readBufSize+i)
		case i%300 == 150:
			pad = strings.Repeat("z", aheadRoom+i)
		}
		return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, pad)
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
		b := []byte(all.String())
		for k := 0; len(b) > 0; k++ {
			m := min(len(b), 1+(k*7919)%(2*readBufSize))
			if _, err := w.Write(b[:m]); err != nil {
				return
			}
			b = b[m:]
		}
	}()
	lr := NewLineReader(r, 0)
	type lent struct{ buf, copy []byte }
	var kept []lent
	lr.lend = func(buf []byte) []byte {
		// Keep every buffer, as a run still being written would, and
		// remember what it held.
		kept = append(kept, lent{buf, bytes.Clone(buf)})
		return make([]byte, len(buf))
	}
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
	if len(kept) < 10 {
		t.Fatalf("%d buffers lent; the stream should have taken more", len(kept))
	}
	for k, l := range kept {
		if !bytes.Equal(l.buf, l.copy) {
			t.Fatalf("lent buffer %d was read into again", k)
		}
	}
}

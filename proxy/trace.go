package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Trace writes every frame as one JSON line: time, direction, who wrote it,
// and the frame itself. It is for debugging a session after the fact, so it
// holds conversation content; the CLI warns about that when it opens one.
type Trace struct {
	mu  sync.Mutex
	w   *bufio.Writer
	c   io.Closer
	err error
	now func() time.Time
}

// NewTrace writes to w, closing it (when it can be closed) on Close.
func NewTrace(w io.Writer) *Trace {
	t := &Trace{w: bufio.NewWriterSize(w, 256<<10), now: time.Now}
	if c, ok := w.(io.Closer); ok {
		t.c = c
	}
	return t
}

// record writes one entry. sidecar marks frames the sidecar wrote itself
// (rewrites, answers, its own calls). A frame that failed to parse is kept as
// a string, and an oversized one by its size alone. Nil-safe.
func (t *Trace) record(dir Direction, sidecar bool, frame []byte, ferr error) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	from := "peer"
	if sidecar {
		from = "sidecar"
	}
	w := t.w
	w.WriteString(`{"t":"`)
	w.WriteString(t.now().UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, `","dir":%q,"from":%q`, dir.String(), from)
	switch {
	case ferr != nil && frame == nil:
		e, _ := json.Marshal(ferr.Error())
		w.WriteString(`,"error":`)
		w.Write(e)
	case ferr != nil:
		e, _ := json.Marshal(ferr.Error())
		s, _ := json.Marshal(string(frame)) // invalid UTF-8 becomes U+FFFD here only
		w.WriteString(`,"error":`)
		w.Write(e)
		w.WriteString(`,"malformed":`)
		w.Write(s)
	default:
		w.WriteString(`,"frame":`)
		w.Write(frame)
	}
	if _, err := w.WriteString("}\n"); err != nil {
		t.err = err
	}
}

// Flush writes what is buffered.
func (t *Trace) Flush() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.err = t.w.Flush()
	return t.err
}

// Close flushes and closes the trace.
func (t *Trace) Close() error {
	if t == nil {
		return nil
	}
	err := t.Flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != nil {
		if cerr := t.c.Close(); err == nil {
			err = cerr
		}
	}
	t.err = io.ErrClosedPipe
	return err
}

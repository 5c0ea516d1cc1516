package remote

import (
	"bytes"
	"io"
	"sync"
)

// A Host is the stack behind a connection, on the far side of a pair of
// newline-delimited pipes: it reads the client's messages (Read) and writes
// the server's (Write), as a stdio host reads and writes its editor's. It
// belongs to the server, not to a connection: a new connection that loads
// a session a detached one holds takes its host over, with the native
// session and the agent as they are.
type Host struct {
	id string
	in *io.PipeReader
	// inW takes the client's lines, one whole line at a time (inMu).
	inW  *io.PipeWriter
	inMu sync.Mutex
	// partial is the host's unfinished line; only Write touches it, and
	// the host writes from one goroutine at a time (the relay's writer).
	partial []byte

	mu   sync.Mutex
	conn *Conn // whose streams the host's output goes to

	done chan struct{} // closed when Open returns
}

func newHost(id string, c *Conn) *Host {
	r, w := io.Pipe()
	return &Host{id: id, in: r, inW: w, conn: c, done: make(chan struct{})}
}

// ID names the host in logs: the id of the connection that started it.
func (h *Host) ID() string { return h.id }

// Read gives the host the client's messages, one per line.
func (h *Host) Read(p []byte) (int, error) { return h.in.Read(p) }

// Write takes the host's output: whole lines, each a server message. A
// line is never split across messages; an unfinished one waits for its
// end.
func (h *Host) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			h.partial = append(h.partial, p...)
			break
		}
		line := p[:i]
		if len(h.partial) > 0 {
			line = append(h.partial, line...)
			h.partial = nil
		} else {
			line = bytes.Clone(line)
		}
		p = p[i+1:]
		if len(bytes.TrimSpace(line)) > 0 {
			h.owner().fromHost(line)
		}
	}
	return n, nil
}

func (h *Host) owner() *Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn
}

// write hands the host one client message, a line of valid JSON.
func (h *Host) write(line []byte) error {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if _, err := h.inW.Write(append(line, '\n')); err != nil {
		return errGone
	}
	return nil
}

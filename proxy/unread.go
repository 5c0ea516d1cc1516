package proxy

import (
	"io"
	"sync"
	"syscall"
)

// A pipe keeps what its reader has not read yet. When the agent dies, the
// client requests still in its stdin pipe were never received, whatever the
// write said: a request written while a SIGKILL was still landing went into
// the pipe without an error. The relay remembers where its recent requests
// lie in the bytes the agent's stdin took, asks the pipe how many it still
// holds, and hands the requests in that tail back (UnsentHook).

// maxUnread bounds what a pipe can hold unread: Linux's largest pipe
// buffer (/proc/sys/fs/pipe-max-size). A request that ended further back
// than this was read.
const maxUnread = 1 << 20

// sentRequest is a client request written to the agent: its bytes as the
// client sent them, and where what was written of it ends.
type sentRequest struct {
	raw   []byte
	start int64
	end   int64
}

// sentLog is the client requests written to the current agent that it may
// not have read yet.
type sentLog struct {
	mu   sync.Mutex
	list []sentRequest
}

// maxKept bounds how many requests the log keeps: more requests than this
// waiting unread in one pipe is not a client, and the oldest count as read.
const maxKept = 256

// add notes a request that ended at end after n written bytes. A request
// longer than a pipe can hold is not kept: it cannot lie unread whole. The
// list is in write order, so what is surely read leaves from its head.
func (l *sentLog) add(orig []byte, n int, end int64) {
	if n > maxUnread {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	drop := 0
	if len(l.list) >= maxKept {
		drop = maxKept / 2 // in halves, so a long run of requests costs one move per half
	}
	for drop < len(l.list) && l.list[drop].end <= end-maxUnread {
		drop++
	}
	if drop > 0 {
		l.list = append(l.list[:0], l.list[drop:]...)
	}
	l.list = append(l.list, sentRequest{raw: append([]byte(nil), orig...), start: end - int64(n), end: end})
}

// unread empties the log and returns the requests that lie wholly in the
// last unread bytes of taken.
func (l *sentLog) unread(taken, unread int64) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]byte
	for _, s := range l.list {
		if s.start >= taken-unread {
			out = append(out, s.raw)
		}
	}
	l.list = nil
	return out
}

// pipeUnread says how many bytes the reader of w has not read, for a w that
// is a pipe this process writes; 0 when it cannot tell.
func pipeUnread(w io.Writer) int64 {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	// Control keeps the descriptor open while it is asked: the agent's
	// shutdown may close the pipe meanwhile (File.Fd would race with that
	// close, and would make the pipe blocking), and a closed pipe has
	// nothing left to count.
	var n int64
	if err := rc.Control(func(fd uintptr) { n = fdUnread(fd) }); err != nil {
		return 0
	}
	return n
}

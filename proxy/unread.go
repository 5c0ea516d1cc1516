package proxy

import (
	"io"
	"sync"
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

// add notes a request that ended at end after n written bytes. A request
// longer than a pipe can hold is not kept: it cannot lie unread whole.
func (l *sentLog) add(orig []byte, n int, end int64) {
	if n > maxUnread {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := 0
	for _, s := range l.list {
		if s.end > end-maxUnread {
			l.list[keep] = s
			keep++
		}
	}
	l.list = append(l.list[:keep], sentRequest{raw: append([]byte(nil), orig...), start: end - int64(n), end: end})
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
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	return fdUnread(f.Fd())
}

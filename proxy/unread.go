package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
)

// A pipe keeps what its reader has not read yet. When the agent dies, the
// client requests still in its stdin pipe were never received, whatever the
// write said: a request written while a SIGKILL was still landing went into
// the pipe without an error. The relay remembers where its recent requests
// lie in the bytes the agent's stdin took, asks the pipe how many it still
// holds, and hands the requests in that tail back (UnsentHook).

// unsent owns the client requests the current agent may never have
// received: it writes each request on its own, so a failed write tells
// which one did not reach the agent, notes where the written ones lie in
// what the agent's stdin took, and at the agent's end hands those left
// unread in the pipe back to the hook (UnsentHook), to keep for the next
// agent.
type unsent struct {
	w      *writer
	laters *laters // where a request handed back and kept by the hook is decided
	log    *slog.Logger
	hook   UnsentHook // nil when the relay's Hook is not one
	// restarts says an agent may follow the dead one (Config.OnAgentExit):
	// without one, no request is kept for a successor.
	restarts bool

	sent    sentLog
	agentIn atomic.Value // writerBox: the current agent's stdin, which says how much is still unread
}

// writerBox lets an atomic.Value hold writers of different types.
type writerBox struct{ w io.Writer }

// newAgent notes the stdin of the agent whose requests are written from
// now on.
func (u *unsent) newAgent(in io.Writer) { u.agentIn.Store(writerBox{in}) }

// write writes and flushes a client request to o. When the write fails
// because the agent is gone, the hook gets the request back as the client
// sent it (orig), to send again to the agent's successor.
func (u *unsent) write(ctx context.Context, o *output, line []byte, orig *Frame) {
	end, err := o.writeFlushed(line)
	if err == nil {
		if end >= 0 && u.restarts {
			u.sent.add(orig.Raw, len(line)+1, end)
		}
		return
	}
	if errors.Is(err, ErrClosed) {
		return
	}
	if u.hook != nil && u.restarts {
		if v := u.hook.Unsent(ctx, orig); v.Do == Hold || v.Do == Defer {
			u.log.Info("a client request did not reach the agent, which is gone; it is kept for the next agent", "method", string(orig.Env.Method))
			u.laters.start(ctx, orig, v)
			return
		}
	}
	u.w.logWrite(ClientToAgent, err)
}

// handBack gives the hook the client requests the dead agent left in its
// stdin pipe: they were written, but never read.
func (u *unsent) handBack(ctx context.Context) {
	unread := pipeUnread(u.agentIn.Load().(writerBox).w)
	lines := u.sent.unread(u.w.out[ClientToAgent].taken(), unread)
	if u.hook == nil {
		return
	}
	for _, raw := range lines {
		env, err := Scan(raw)
		if err != nil {
			continue // it was scanned once, on its way in
		}
		u.log.Info("a client request was left unread by the agent, which is gone; it is kept for the next agent", "method", string(env.Method))
		f := &Frame{Dir: ClientToAgent, Raw: raw, Env: env}
		if v := u.hook.Unsent(ctx, f); v.Do == Hold || v.Do == Defer {
			u.laters.start(ctx, f, v)
		}
	}
}

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

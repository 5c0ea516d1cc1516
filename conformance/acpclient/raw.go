package acpclient

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// RawClient drives a peer byte by byte, for tests that compare exact
// streams: it writes exactly what it is given and keeps exactly what the
// peer writes. It speaks no ACP itself.
type RawClient struct {
	opts       Options
	proc       *process
	in         *lockedWriter
	readerDone chan struct{}

	closeOnce sync.Once
	closeCode int
	closeErr  error

	b     board // guards lines and tail
	lines [][]byte
	tail  []byte // bytes after the last newline, once the output ended
}

// StartRaw runs argv as a subprocess, like Start, without an ACP
// connection.
func StartRaw(ctx context.Context, argv []string, opts Options) (*RawClient, error) {
	p, stdin, stdout, err := startProcess(ctx, argv, opts)
	if err != nil {
		return nil, err
	}
	c := &RawClient{opts: opts, proc: p, in: &lockedWriter{w: stdin}, readerDone: make(chan struct{}), b: newBoard()}
	go c.readPeer(stdout)
	return c, nil
}

// readPeer is the only reader of the peer's stdout; it exits at EOF.
func (c *RawClient) readPeer(r *os.File) {
	defer close(c.readerDone)
	defer r.Close()
	defer c.b.end()
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := readLine(br)
		if err != nil {
			if len(line) > 0 {
				c.b.update(func() { c.tail = line })
			}
			return
		}
		c.b.update(func() { c.lines = append(c.lines, line) })
	}
}

// Write writes b to the peer's stdin exactly as given.
func (c *RawClient) Write(b []byte) error {
	if _, err := c.in.Write(b); err != nil {
		return fmt.Errorf("write to peer: %w", err)
	}
	return nil
}

// WriteLine writes line and a newline.
func (c *RawClient) WriteLine(line string) error { return c.Write([]byte(line + "\n")) }

// Lines returns every complete line received, exactly, without newlines.
func (c *RawClient) Lines() [][]byte {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return append([][]byte(nil), c.lines...)
}

// Output returns every byte received so far, exactly.
func (c *RawClient) Output() []byte {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	var out bytes.Buffer
	for _, l := range c.lines {
		out.Write(l)
		out.WriteByte('\n')
	}
	out.Write(c.tail)
	return out.Bytes()
}

// WaitLine blocks until a line matching pred has arrived (checking earlier
// lines too) and returns the first such line.
func (c *RawClient) WaitLine(ctx context.Context, pred func([]byte) bool) ([]byte, error) {
	return c.b.waitLine(ctx, &c.lines, pred)
}

// WaitLines blocks until at least n lines have arrived and returns them.
func (c *RawClient) WaitLines(ctx context.Context, n int) ([][]byte, error) {
	var got [][]byte
	err := c.b.wait(ctx, fmt.Sprintf("%d lines", n), func() bool {
		got = append([][]byte(nil), c.lines...)
		return len(got) >= n
	})
	return got, err
}

// CloseStdin closes the peer's stdin without waiting.
func (c *RawClient) CloseStdin() error { return c.in.Close() }

// Wait waits for the peer to exit by itself.
func (c *RawClient) Wait(ctx context.Context) (int, error) { return c.proc.waitCtx(ctx) }

// Pid is the peer's pid, which is also its process group id.
func (c *RawClient) Pid() int { return c.proc.cmd.Process.Pid }

// Kill SIGKILLs the peer's process group.
func (c *RawClient) Kill() error { return c.proc.kill() }

// Close is Client.Close for a raw peer.
func (c *RawClient) Close() (int, error) {
	c.end(false)
	return c.closeCode, c.closeErr
}

// Terminate ends the peer as a user's quit does, for a peer whose way of
// ending nothing judges: its stdin is closed and it is told to terminate
// at once (SIGTERM; Windows has none, and it is Close there), and what it
// left in its process group is killed once it has exited. An agent that
// ignores EOF (claude-agent-acp, codex-acp) would make Close wait out its
// whole CloseTimeout. A peer that does not exit within it is killed, and
// the error is ErrKilled. After Close or Terminate, the other does
// nothing more and returns the same.
func (c *RawClient) Terminate() (int, error) {
	c.end(true)
	return c.closeCode, c.closeErr
}

// end is Close, or Terminate with terminate, once.
func (c *RawClient) end(terminate bool) {
	c.closeOnce.Do(func() {
		timeout := c.opts.closeTimeout()
		if terminate {
			c.closeCode, c.closeErr = c.proc.terminate(c.in, timeout)
		} else {
			c.closeCode, c.closeErr = c.proc.shutdown(c.in, timeout)
		}
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-c.readerDone:
		case <-timer.C:
			_ = c.proc.kill()
			c.closeErr = fmt.Errorf("close: peer output did not end: %w", io.ErrNoProgress)
		}
	})
}

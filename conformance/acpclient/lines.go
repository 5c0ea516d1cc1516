package acpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// board is state that one reader goroutine appends to and tests wait on. A
// waiter re-checks its condition each time changed is closed, so nothing
// polls or sleeps.
type board struct {
	mu      sync.Mutex
	changed chan struct{}
	ended   bool
}

func newBoard() board { return board{changed: make(chan struct{})} }

// update runs f under the lock and wakes every waiter.
func (b *board) update(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *board) end() { b.update(func() { b.ended = true }) }

// wait blocks until cond (run under the lock) holds, the reader has ended,
// or ctx ends.
func (b *board) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		b.mu.Lock()
		ok, ch, ended := cond(), b.changed, b.ended
		b.mu.Unlock()
		switch {
		case ok:
			return nil
		case ended:
			return fmt.Errorf("wait for %s: %w", what, ErrEnded)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
		}
	}
}

// readLine returns one line without its '\n', of any length, in a fresh
// slice. At the end of input it returns the unterminated rest, if any, with
// the error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if line == nil {
			line = []byte{}
		}
		return line, err
	}
}

// lockedWriter is the peer's stdin, shared by the SDK connection and raw
// writes. Every Write carries whole lines, so lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// peek is the envelope of one line.
type peek struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params json.RawMessage   `json:"params"`
	Result json.RawMessage   `json:"result"`
	Error  *acp.RequestError `json:"error"`
}

func (p peek) hasID() bool { return len(p.ID) > 0 && string(p.ID) != "null" }

// HasID matches a line whose JSON-RPC id is exactly the raw JSON id, e.g.
// HasID(`1`) or HasID(`"a"`), with no method: a response.
func HasID(id string) func(line []byte) bool {
	return func(line []byte) bool {
		var p peek
		return json.Unmarshal(line, &p) == nil && p.Method == "" && bytes.Equal(p.ID, []byte(id))
	}
}

// HasMethod matches a request or notification of the given method.
func HasMethod(method string) func(line []byte) bool {
	return func(line []byte) bool {
		var p peek
		return json.Unmarshal(line, &p) == nil && p.Method == method
	}
}

// Contains matches a line that contains s.
func Contains(s string) func(line []byte) bool {
	return func(line []byte) bool { return bytes.Contains(line, []byte(s)) }
}

// waitLine blocks until a line of *lines (which b guards) matches pred, and
// returns the first such line.
func (b *board) waitLine(ctx context.Context, lines *[][]byte, pred func([]byte) bool) ([]byte, error) {
	var found []byte
	err := b.wait(ctx, "a matching line", func() bool {
		for _, l := range *lines {
			if pred(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found, err
}

// AnsweredTwice lists the ids of the responses that occur more than once
// among lines: a request the peer answered twice, which a client must
// never see (DESIGN.md "Data flow" 2: exactly one answer per request).
func AnsweredTwice(lines [][]byte) []string {
	seen := map[string]bool{}
	var twice []string
	for _, l := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(l, &m) != nil || m.Method != "" || m.ID == nil || m.Result == nil && m.Error == nil {
			continue
		}
		if seen[string(m.ID)] {
			twice = append(twice, string(m.ID))
		}
		seen[string(m.ID)] = true
	}
	return twice
}

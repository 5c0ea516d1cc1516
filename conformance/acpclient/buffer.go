package acpclient

import (
	"bytes"
	"sync"
)

// Buffer collects what a peer writes on a stream the test reads while the
// peer runs, such as its stderr: exec copies into it on a goroutine of its
// own.
type Buffer struct {
	// Max, when set, keeps only the last Max bytes: a long run's stderr is
	// shown by its end, where the reason it failed is.
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Write(p)
	if over := b.b.Len() - b.Max; b.Max > 0 && over > 0 {
		b.b.Next(over)
	}
	return len(p), nil
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Bytes is a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

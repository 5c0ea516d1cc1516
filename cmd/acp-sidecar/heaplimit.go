package main

import "sync"

// heapLimit is the process's soft memory limit: base for the heap the
// sidecar keeps, plus what its relays keep live for long frames
// (proxy.Config.LongFrames). Under a fixed limit those buffers held the
// live heap at the limit, and the GC ran on every allocation: on 5 MiB
// frames it took a fifth of the relay's time, and without it the relay
// moved a quarter more. The two buffers a relay keeps after a 16 MiB frame
// are past the base on their own.
type heapLimit struct {
	set  func(int64) int64 // debug.SetMemoryLimit
	mu   sync.Mutex
	base int64
	long int64
}

func newHeapLimit(base int64, set func(int64) int64) *heapLimit {
	set(base)
	return &heapLimit{set: set, base: base}
}

// add changes the long frames' share by delta and sets the limit.
func (l *heapLimit) add(delta int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.long += delta
	l.set(l.base + l.long)
}

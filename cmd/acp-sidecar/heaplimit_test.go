package main

import "testing"

// The limit is the base plus what the relays say they keep for long frames,
// set again at each change, and back at the base once they keep nothing.
func TestHeapLimitFollowsLongFrames(t *testing.T) {
	var set []int64
	l := newHeapLimit(24<<20, func(n int64) int64 { set = append(set, n); return 0 })
	l.add(15 << 20) // one relay's agent streams 5 MiB frames
	l.add(3 << 20)  // the client sends a 1 MiB one
	l.add(-15 << 20)
	l.add(-3 << 20)
	want := []int64{24 << 20, 39 << 20, 42 << 20, 27 << 20, 24 << 20}
	if len(set) != len(want) {
		t.Fatalf("limits set: %v, want %v", set, want)
	}
	for i := range want {
		if set[i] != want[i] {
			t.Fatalf("limits set: %v, want %v", set, want)
		}
	}
}

package proxy

// stopIndex is the index of the first byte of b that a string scan must
// stop at (stringStop), or len(b) if there is none.
//
//go:noescape
func stopIndex(b []byte) int

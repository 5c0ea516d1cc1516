package proxy

import (
	"math/rand/v2"
	"testing"
)

// stopIndexByBytes is stopIndex by its definition.
func stopIndexByBytes(b []byte) int {
	for i, c := range b {
		if stringStop[c] {
			return i
		}
	}
	return len(b)
}

// TestStopIndex puts every byte value at every place of texts of up to 80
// bytes, alone and after another stop, and compares both versions with
// the definition. The texts start at many offsets of a buffer, so loads
// that cross a cache line are tried too.
func TestStopIndex(t *testing.T) {
	buf := make([]byte, 4096+96)
	for n := 0; n <= 80; n++ {
		for pos := 0; pos <= n; pos++ {
			for c := range 256 {
				off := (n*7 + pos + c) % 96
				b := buf[off : off+n]
				for i := range b {
					b[i] = 'a' + byte(i%26)
				}
				if pos < n {
					b[pos] = byte(c)
					if c%3 == 0 && pos+1 < n {
						b[pos+1] = '"'
					}
				}
				want := stopIndexByBytes(b)
				if got := stopIndex(b); got != want {
					t.Fatalf("stopIndex(%q) = %d, want %d", b, got, want)
				}
				if got := stopIndexWords(b); got != want {
					t.Fatalf("stopIndexWords(%q) = %d, want %d", b, got, want)
				}
			}
		}
	}
}

// FuzzStopIndex compares stopIndex with its definition on any bytes.
func FuzzStopIndex(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b := make([]byte, rng.IntN(200))
		for i := range b {
			b[i] = byte(rng.IntN(96) + 32)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := stopIndexByBytes(b)
		if got := stopIndex(b); got != want {
			t.Fatalf("stopIndex(%q) = %d, want %d", b, got, want)
		}
		if got := stopIndexWords(b); got != want {
			t.Fatalf("stopIndexWords(%q) = %d, want %d", b, got, want)
		}
	})
}

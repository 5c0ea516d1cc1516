package proxy

import (
	"encoding/binary"
	"math/bits"
)

// The string scan spends its time looking for the next byte it must stop
// at: a quote, a backslash, a control or a non-ASCII byte. Plain text runs
// for kilobytes in a tool's output and megabytes in a base64 image, so the
// look is stopIndex, which on amd64 checks 16 bytes an instruction
// (stop_amd64.s) and elsewhere a word at a time (stopIndexWords).

// stopIndexWords is stopIndex a word at a time (special8): the portable
// version, and the reference the assembly is tested against.
func stopIndexWords(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32]
		m0, m1 := special8(binary.LittleEndian.Uint64(w)), special8(binary.LittleEndian.Uint64(w[8:]))
		m2, m3 := special8(binary.LittleEndian.Uint64(w[16:])), special8(binary.LittleEndian.Uint64(w[24:]))
		if m0|m1|m2|m3 == 0 {
			continue
		}
		switch {
		case m0 != 0:
			return i + bits.TrailingZeros64(m0)>>3
		case m1 != 0:
			return i + 8 + bits.TrailingZeros64(m1)>>3
		case m2 != 0:
			return i + 16 + bits.TrailingZeros64(m2)>>3
		default:
			return i + 24 + bits.TrailingZeros64(m3)>>3
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b) && !stringStop[b[i]]; i++ {
	}
	return i
}

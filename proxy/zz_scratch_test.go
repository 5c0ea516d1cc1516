package proxy

import "testing"

func BenchmarkZScanSmallAbs(b *testing.B) {
	f := []byte(benchChunk)
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		Scan(f)
	}
}
func BenchmarkZScanLargeAbs(b *testing.B) {
	f := []byte(benchImage(5 << 20))
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		Scan(f)
	}
}

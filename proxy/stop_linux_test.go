package proxy

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestStopIndexReadsNoFurther puts texts at the very end of a page that a
// page nobody may read follows: a load past the text would fault.
func TestStopIndexReadsNoFurther(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	end := mem[:page]
	for i := range end {
		end[i] = 'x'
	}
	for n := 0; n <= 100; n++ {
		if got := stopIndex(end[page-n:]); got != n {
			t.Fatalf("stopIndex of %d plain bytes = %d", n, got)
		}
		if n > 0 {
			end[page-1] = '"'
			if got := stopIndex(end[page-n:]); got != n-1 {
				t.Fatalf("stopIndex of %d bytes ending in a quote = %d", n, got)
			}
			end[page-1] = 'x'
		}
	}
}

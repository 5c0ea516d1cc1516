package proxy

import (
	"errors"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity of the pipe f is an end of.
func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatalf("F_GETPIPE_SZ: %v", serr)
	}
	return n
}

// grownSize is what a pipe grown here holds: AgentPipeSize, or, where the
// kernel refuses that to this user, the size a new pipe has.
func grownSize(t *testing.T) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := GrowPipe(r); err != nil {
		t.Logf("this kernel or user cannot grow a pipe: %v", err)
		return pipeSize(t, w)
	}
	if got := pipeSize(t, w); got != AgentPipeSize {
		t.Fatalf("a grown pipe holds %d bytes, want %d", got, AgentPipeSize)
	}
	return AgentPipeSize
}

// readAll reads every frame of r ahead, as the relay reads an agent.
func readAll(r *os.File) error {
	lr := NewLineReader(r, 0)
	lr.readAhead()
	for {
		if _, err := lr.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestReadAheadGrowsAPipeThatFills fills an agent's pipe before the
// reader starts, so its first read finds it full: the pipe is grown, and
// what was written still comes through whole.
func TestReadAheadGrowsAPipeThatFills(t *testing.T) {
	want := grownSize(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := pipeSize(t, w); got != defaultPipeSize {
		t.Fatalf("a new pipe holds %d bytes, want %d", got, defaultPipeSize)
	}
	// The write fits the empty pipe exactly, so it is whole in it when
	// Write returns.
	if _, err := w.Write(frames(defaultPipeSize)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- readAll(r) }()
	if _, err := w.Write(frames(3 * defaultPipeSize)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pipeSize(t, r); got != want {
		t.Errorf("after a full read the pipe holds %d bytes, want %d", got, want)
	}
}

// TestReadAheadLeavesAQuietPipe: an agent that never fills its pipe
// keeps the size a new pipe has.
func TestReadAheadLeavesAQuietPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.Write(frames(4 << 10)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := readAll(r); err != nil {
		t.Fatal(err)
	}
	if got := pipeSize(t, r); got != defaultPipeSize {
		t.Errorf("a pipe never full holds %d bytes, want %d", got, defaultPipeSize)
	}
}

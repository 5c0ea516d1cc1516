package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// memoryLimit is the sidecar's soft heap limit, unless GOMEMLIMIT says
// otherwise: it runs for days beside every editor window, and its heap is a
// few memtables and the turns' text. Past the limit the GC works harder; it
// is not a cap that fails allocations. The buffers of frames in flight come
// on top (heapLimit).
const memoryLimit = 24 << 20

func main() {
	std := stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}
	if os.Getenv("GOMEMLIMIT") == "" {
		std.longFrames = newHeapLimit(memoryLimit, debug.SetMemoryLimit).add
	}
	// A write to a closed pipe must fail with EPIPE where it happens, and
	// neither kill the process (Go's default for fds 1 and 2) nor stop
	// anything else. Once SIGPIPE is notified, Go delivers it for every
	// fd, and the agent's stdin breaks each time the agent dies: a context
	// cancelled by SIGPIPE ended the restart and every rebuild with it.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	code := runMain(context.Background(), os.Args, std)
	signal.Stop(sigpipe)
	os.Exit(code)
}

// stdio are the process's streams, and the soft memory limit it owns,
// passed in so tests can run the CLI in process.
type stdio struct {
	in       *os.File
	out, err *os.File
	// longFrames, when set, is told what the relays keep live for long
	// frames (proxy.Config.LongFrames). Nil leaves the memory limit alone:
	// in a test it is the test binary's, or the user's GOMEMLIMIT.
	longFrames func(delta int64)
}

// exitError carries an exit status through urfave/cli's error path.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

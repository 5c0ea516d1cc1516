package proxy

import (
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

// TestAgentStdoutPipeIsGrown starts an agent as the sidecar does and finds
// its stdout pipe at AgentPipeSize. Where the kernel refuses that to this
// user (GrowPipe on a pipe of our own says so), the agent still starts, on
// a pipe of the default size.
func TestAgentStdoutPipeIsGrown(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	want := AgentPipeSize
	if err := GrowPipe(r); err != nil {
		t.Logf("this kernel or user cannot grow a pipe: %v", err)
		want = pipeSize(t, w)
	} else if got := pipeSize(t, w); got != AgentPipeSize {
		t.Fatalf("a grown pipe holds %d bytes, want %d", got, AgentPipeSize)
	}

	p, err := StartAgent(AgentSpec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	if got := pipeSize(t, p.Stdout); got != want {
		t.Errorf("the agent's stdout pipe holds %d bytes, want %d", got, want)
	}
	if got := pipeSize(t, p.Stdin); got == AgentPipeSize {
		t.Errorf("the agent's stdin pipe was grown too; only its stdout streams")
	}
}

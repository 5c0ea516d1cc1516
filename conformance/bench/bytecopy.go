package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// copyBufSize is the relay's read buffer (proxy.ReadBufSize), so the
// baseline moves bytes in the same chunks.
const copyBufSize = proxy.ReadBufSize

// byteCopyMain runs `bench bytecopy -- AGENT [ARGS...]`: the baseline relay.
// It starts the agent the way the sidecar does (two os.Pipe pairs, the
// stdout one grown with proxy.GrowPipe, stderr passed through), copies
// bytes both ways without looking at them, and exits with the agent's
// status. Only the relay code differs from the sidecar's.
func byteCopyMain(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: acp-sidecar bench bytecopy -- AGENT [ARGS...]")
		return 2
	}
	code, err := byteCopy(args, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench bytecopy: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func byteCopy(argv []string, stdin *os.File, stdout, stderr io.Writer) (int, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return 1, fmt.Errorf("agent stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return 1, fmt.Errorf("agent stdout pipe: %w", err)
	}
	// The sidecar grows the pipe the first time a read finds it full,
	// which under the generator is its first read; refused, the pipe
	// keeps its size, as the sidecar's does then.
	_ = proxy.GrowPipe(outR)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return 127, fmt.Errorf("start agent %q: %w", argv[0], err)
	}

	// The client-to-agent copier is owned here: it ends at the client's EOF,
	// or when clientIn is closed below once the agent is gone.
	clientIn := pollable(stdin)
	clientDone := make(chan error, 1)
	go func() { clientDone <- copyClientToAgent(inW, clientIn) }()

	_, aerr := copyPlain(stdout, outR)
	if aerr != nil {
		aerr = fmt.Errorf("copy agent to client: %w", aerr)
	}
	outR.Close()
	werr := cmd.Wait()
	clientIn.Close()
	cerr := <-clientDone
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		werr = nil // the status is the result, as the sidecar reports it
	} else if werr != nil {
		werr = fmt.Errorf("wait for agent: %w", werr)
	}
	code := 1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return code, errors.Join(aerr, werr, cerr)
}

// copyClientToAgent copies until the client's input ends, then closes the
// agent's stdin as the sidecar does.
func copyClientToAgent(agentIn io.WriteCloser, clientIn io.Reader) error {
	_, err := copyPlain(agentIn, clientIn)
	if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
		err = nil // we closed our stdin, or the agent is gone
	}
	if cerr := agentIn.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy client to agent: %w", err)
	}
	return nil
}

// copyPlain is io.CopyBuffer with the relay's buffer size. The wrappers hide
// ReadFrom and WriteTo: between pipes os.File falls back to this same
// read/write loop anyway (its splice and sendfile paths need a socket), and
// hiding them keeps the baseline that loop on every platform.
func copyPlain(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, copyBufSize)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

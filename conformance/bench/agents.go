package bench

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// The handshake of a throughput run. The generator announces itself once it
// is running, and the driver starts the clock when it answers, so neither
// relay's start-up is part of the measured time.
const (
	readyLine = `{"jsonrpc":"2.0","method":"_bench/ready","params":{}}`
	startLine = `{"jsonrpc":"2.0","method":"_bench/start","params":{}}`
)

// genBlockBytes is about how much the generator hands to one write(2).
const genBlockBytes = 256 << 10

// genMain runs `bench gen`: an agent that writes frames as fast as a pipe
// takes them. It writes readyLine, waits for one line on stdin, writes -n
// frames of -size bytes and then reads stdin until it ends, so the relay
// stays up (and its peak RSS readable) until the driver is done with it.
func genMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "frames to write")
	size := fs.Int("size", 229, "bytes per frame, without the '\\n'")
	kind := fs.String("kind", kindChunk, "frame kind: "+kindChunk+" (agent_message_chunk) or "+kindImage+" (tool_call_update with base64 data)")
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	if err := gen(stdin, stdout, *n, *size, *kind); err != nil {
		fmt.Fprintf(stderr, "bench gen: %v\n", err)
		return 1
	}
	return 0
}

// genBlock is what the generator writes over and over, the last time cut
// short: count frames of the kind, so a write(2) takes about genBlockBytes.
func genBlock(kind string, n, size int) ([]byte, error) {
	count := 1
	if kind == kindChunk {
		count = max(1, min(n, genBlockBytes/(size+1)))
	}
	return frameBlock(kind, size, count)
}

func gen(stdin io.Reader, stdout io.Writer, n, size int, kind string) error {
	block, err := genBlock(kind, n, size)
	if err != nil {
		return err
	}
	count := len(block) / (size + 1)
	if _, err := io.WriteString(stdout, readyLine+"\n"); err != nil {
		return fmt.Errorf("write ready line: %w", err)
	}
	in := bufio.NewReader(stdin)
	if _, err := in.ReadSlice('\n'); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // the driver gave up before starting
		}
		return fmt.Errorf("wait for the start line: %w", err)
	}
	for left := n; left > 0; left -= count {
		part := block[:min(left, count)*(size+1)]
		if _, err := stdout.Write(part); err != nil {
			return fmt.Errorf("write frames (%d left): %w", left, err)
		}
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return fmt.Errorf("drain stdin: %w", err)
	}
	return nil
}

// echoMain runs `bench echo`: an agent that answers every request at once
// with an empty result, the cheapest agent a round trip can have.
func echoMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	if err := echo(stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "bench echo: %v\n", err)
		return 1
	}
	return 0
}

func echo(stdin io.Reader, stdout io.Writer) error {
	return answerRequests(stdin, stdout, func(*bufio.Writer, *proxy.Envelope) (string, error) { return `{}`, nil })
}

// answerRequests is the loop of the bench's agents: it reads requests and
// answers each with the result answer gives, which may first write frames
// of its own to w. It flushes when a burst of input has been answered.
func answerRequests(stdin io.Reader, stdout io.Writer, answer func(w *bufio.Writer, env *proxy.Envelope) (string, error)) error {
	lr := proxy.NewLineReader(stdin, 0)
	w := bufio.NewWriterSize(stdout, 64<<10)
	var reply []byte
	for {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return w.Flush()
		}
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		env, err := proxy.Scan(line)
		if err != nil || env.Kind != proxy.KindRequest {
			continue
		}
		result, err := answer(w, &env)
		if err != nil {
			return err
		}
		reply = append(reply[:0], `{"jsonrpc":"2.0","id":`...)
		reply = append(reply, env.ID...)
		reply = append(reply, `,"result":`...)
		reply = append(reply, result...)
		reply = append(reply, "}\n"...)
		if _, err := w.Write(reply); err != nil {
			return fmt.Errorf("write response: %w", err)
		}
		if lr.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return fmt.Errorf("write response: %w", err)
			}
		}
	}
}

// usageStatus is the exit status for a flag parse error: 0 for -h.
func usageStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// benchSession is the session id the turn agent hands out; the generator's
// chunk frames carry the same one.
const benchSession = "sess_5f3a9c2e81d047b6"

// turnsMain runs `bench turns`: an agent that speaks enough ACP for the
// sidecar to record a turn. It answers initialize and session/new (with
// benchSession), and answers each session/prompt with -n
// agent_message_chunk updates of -size bytes for that session, then
// {"stopReason":"end_turn"}. Other requests get an empty result.
func turnsMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench turns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "chunks per prompt")
	size := fs.Int("size", 229, "bytes per chunk frame, without the '\\n'")
	if err := fs.Parse(args); err != nil {
		return usageStatus(err)
	}
	if err := turns(stdin, stdout, *n, *size); err != nil {
		fmt.Fprintf(stderr, "bench turns: %v\n", err)
		return 1
	}
	return 0
}

func turns(stdin io.Reader, stdout io.Writer, n, size int) error {
	count := max(1, min(n, genBlockBytes/(size+1)))
	block, err := frameBlock(kindChunk, size, count)
	if err != nil {
		return err
	}
	return answerRequests(stdin, stdout, func(w *bufio.Writer, env *proxy.Envelope) (string, error) {
		switch string(env.Method) {
		case "initialize":
			return `{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}`, nil
		case "session/new":
			return `{"sessionId":"` + benchSession + `"}`, nil
		case "session/prompt":
			for left := n; left > 0; left -= count {
				if _, err := w.Write(block[:min(left, count)*(size+1)]); err != nil {
					return "", fmt.Errorf("write chunks: %w", err)
				}
			}
			return `{"stopReason":"end_turn"}`, nil
		}
		return `{}`, nil
	})
}

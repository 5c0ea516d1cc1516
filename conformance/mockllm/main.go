package mockllm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Main runs the mock as a program, for the CLI (acp-sidecar mockllm) and for
// scripts that launch an agent by hand. It serves on -addr (default
// 127.0.0.1:0, loopback only), prints the base URL on one line to stdout
// once it is listening, so a caller can read it as a readiness signal, and
// serves until ctx is done. With -log FILE every request is appended to FILE
// as a JSON line. Diagnostics go to stderr. It returns the exit status:
// 0 after ctx ends, 1 on a runtime error, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "loopback `host:port` to listen on")
	logPath := fs.String("log", "", "append every request as a JSON line to `FILE`")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mockllm [-addr host:port] [-log FILE]\n\n"+
			"Serves a mock Anthropic Messages API and OpenAI Responses API\n"+
			"and prints its base URL.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mockllm: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := runMain(ctx, *addr, *logPath, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func runMain(ctx context.Context, addr, logPath string, stdout, stderr io.Writer) (err error) {
	opts := Options{Logf: func(format string, args ...any) {
		fmt.Fprintf(stderr, format+"\n", args...)
	}}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("mockllm: open log: %w", err)
		}
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("mockllm: close log: %w", cerr)
			}
		}()
		opts.Log = f
	}
	s, url, err := listenAndServe(ctx, addr, opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if _, err := fmt.Fprintln(stdout, url); err != nil {
		return fmt.Errorf("mockllm: print url: %w", err)
	}
	<-ctx.Done()
	return nil
}

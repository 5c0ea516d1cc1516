//go:build linux

// Package remotetest runs `acp-sidecar serve` for tests, and clients of it
// whose wire is the ACP SDK's own HTTP and WebSocket transport
// (sdkclient.mjs, beside this file). conformance/remote tests serve and
// connect with it; conformance/e2e runs the real agents through serve.
package remotetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// Bound is how long any one wait of these tests may take: generous, since
// nothing here waits on time, only on an event.
const Bound = 2 * time.Minute

// Server is one `acp-sidecar serve` process.
type Server struct {
	URL      string
	Token    string
	StateDir string
	Stderr   *Lines
	cmd      *exec.Cmd
	done     chan struct{}
}

// Lines keeps a process's stderr, line by line, for waits and failures.
type Lines struct {
	mu      sync.Mutex
	all     []string
	changed chan struct{}
}

func newLines() *Lines { return &Lines{changed: make(chan struct{})} }

func (l *Lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// Wait returns the first line re matches, waiting for it until ctx ends.
func (l *Lines) Wait(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if m := re.FindStringSubmatch(s); m != nil {
				l.mu.Unlock()
				return m, nil
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("no line matching %s: %w", re, ctx.Err())
		}
	}
}

var servingRE = regexp.MustCompile(`serving ACP on (\S+)`)

// Options are a server's for Start.
type Options struct {
	Bin   string // the acp-sidecar binary
	Token string
	// Env is the environment of the server and its agents; nil is the
	// test's own.
	Env   []string
	Flags []string
	// StateDir is the server's --state-dir; "" is a fresh one.
	StateDir string
	// Argv is the agent's command line; nil is Bin's fake agent.
	Argv []string
}

// Start runs `serve` on a free loopback port with a token file, as o says,
// and stops it at the test's end.
func Start(t *testing.T, o Options) *Server {
	t.Helper()
	dir := t.TempDir()
	bin, token, env, flags, argv := o.Bin, o.Token, o.Env, o.Flags, o.Argv
	if env == nil {
		env = os.Environ()
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join(dir, "state")
	}
	srv := &Server{Token: token, StateDir: o.StateDir, Stderr: newLines(), done: make(chan struct{})}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(srv.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(argv) == 0 {
		argv = []string{bin, "fakeagent"}
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--state-dir", srv.StateDir}, flags...)
	args = append(append(args, "--"), argv...)
	srv.cmd = exec.Command(bin, args...)
	srv.cmd.Env = append(env, "ACP_SIDECAR_STRICT_ANSWERS=1")
	srv.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errPipe, err := srv.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(srv.done)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			srv.Stderr.add(sc.Text())
		}
		_ = srv.cmd.Wait() // the exit is what done reports; its status is checked by stop
	}()
	t.Cleanup(func() {
		srv.Stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(srv.StateDir, "sidecar.log")) // only for the failure's message
			t.Logf("serve's log:\n%s", b)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), Bound)
	defer cancel()
	m, err := srv.Stderr.Wait(ctx, servingRE)
	if err != nil {
		t.Fatalf("serve did not say where it listens: %v\nstderr:\n%s", err, srv.Stderr)
	}
	srv.URL = m[1]
	return srv
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill ends the server and its process group with SIGKILL, as a host that
// dies does, and waits for it.
func (s *Server) Kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill serve: %v", err)
	}
	<-s.done
}

// Stop ends the server with SIGTERM, as a service manager does, and checks
// that it and its agents are gone.
func (s *Server) Stop(t *testing.T) {
	t.Helper()
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // it may have exited on its own; done says
	select {
	case <-s.done:
	case <-time.After(Bound):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // the test fails below; this only cleans up
		<-s.done
		t.Errorf("serve did not end on SIGTERM\nstderr:\n%s", s.Stderr)
	}
}

// SDKDir is where scripts/e2e-setup.sh sdk put the ACP SDK's clients.
func SDKDir(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".cache", "e2e", "sdk-client")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		testbin.Missing(t, fmt.Sprintf("the ACP SDK's clients are not installed (%v); run: %s sdk", err, filepath.Join(root, "scripts", "e2e-setup.sh")))
	}
	if _, err := exec.LookPath("node"); err != nil {
		testbin.Missing(t, "node is not on PATH: "+err.Error())
	}
	return dir
}

// SDKClientArgv is the command line of a process that speaks ACP on its
// stdio and, through the SDK's transport client (transport "http" or
// "ws"), to url; env is what it needs added to its environment.
func SDKClientArgv(t *testing.T, transport, url, token string) (argv, env []string) {
	t.Helper()
	dir := SDKDir(t)
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if transport == "ws" {
		url = "ws" + strings.TrimPrefix(url, "http")
	}
	script := filepath.Join(root, "conformance", "remotetest", "sdkclient.mjs")
	return []string{"node", script, transport, url}, []string{"ACP_SDK_DIR=" + dir, "ACP_TOKEN=" + token}
}

// SDKClient is an ACP client whose wire is the SDK's own transport client
// (transport "http" or "ws") to url.
func SDKClient(t *testing.T, transport, url, token string, opts acpclient.Options) *acpclient.Client {
	t.Helper()
	argv, env := SDKClientArgv(t, transport, url, token)
	opts.Env = append(opts.Env, env...)
	stderr := &acpclient.Buffer{}
	if opts.Stderr == nil {
		opts.Stderr = stderr
	}
	c, err := acpclient.Start(context.Background(), argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.Close(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("the SDK client's close: %v (stderr: %s)", err, stderr)
		}
	})
	return c
}

// Ctx is a context that ends at the test's end or after Bound.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Bound)
	t.Cleanup(cancel)
	return ctx
}

//go:build linux

package remote

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

// bound is how long any one wait of these tests may take: generous, since
// nothing here waits on time, only on an event.
const bound = 2 * time.Minute

// server is one `acp-sidecar serve` process.
type server struct {
	url      string
	token    string
	stateDir string
	cmd      *exec.Cmd
	stderr   *lines
	done     chan struct{}
}

// lines keeps a process's stderr, line by line, for waits and failures.
type lines struct {
	mu      sync.Mutex
	all     []string
	changed chan struct{}
}

func newLines() *lines { return &lines{changed: make(chan struct{})} }

func (l *lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// wait returns the first line re matches, waiting for it until ctx ends.
func (l *lines) wait(ctx context.Context, re *regexp.Regexp) ([]string, error) {
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

// startServe runs `acp-sidecar serve` on a free loopback port with a token
// file, in front of argv (the fake agent when argv is empty), and stops it
// at the test's end.
func startServe(t *testing.T, flags []string, argv ...string) *server {
	t.Helper()
	return startServeWithToken(t, "test-token-"+strings.ReplaceAll(t.Name(), "/", "-"), flags, argv...)
}

// startServeWithToken is startServe with the token given.
func startServeWithToken(t *testing.T, token string, flags []string, argv ...string) *server {
	t.Helper()
	bin := sidecar.Path(t)
	dir := t.TempDir()
	srv := &server{token: token, stateDir: filepath.Join(dir, "state"), stderr: newLines(), done: make(chan struct{})}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(srv.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(argv) == 0 {
		argv = []string{bin, "fakeagent"}
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--state-dir", srv.stateDir}, flags...)
	args = append(append(args, "--"), argv...)
	srv.cmd = exec.Command(bin, args...)
	srv.cmd.Env = append(os.Environ(), "ACP_SIDECAR_STRICT_ANSWERS=1")
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
			srv.stderr.add(sc.Text())
		}
		_ = srv.cmd.Wait() // the exit is what done reports; its status is checked by stop
	}()
	t.Cleanup(func() { srv.stop(t) })
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	m, err := srv.stderr.wait(ctx, servingRE)
	if err != nil {
		t.Fatalf("serve did not say where it listens: %v\nstderr:\n%s", err, srv.stderr)
	}
	srv.url = m[1]
	return srv
}

// stop ends the server with SIGTERM, as a service manager does, and checks
// that it and its agents are gone.
func (s *server) stop(t *testing.T) {
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
	case <-time.After(bound):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // the test fails below; this only cleans up
		<-s.done
		t.Errorf("serve did not end on SIGTERM\nstderr:\n%s", s.stderr)
	}
}

// sdkDir is where scripts/e2e-setup.sh sdk put the ACP SDK's clients.
func sdkDir(t *testing.T) string {
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

// sdkClient is an ACP client whose wire is the SDK's own transport client
// (transport "http" or "ws") to url.
func sdkClient(t *testing.T, transport, url, token string, opts acpclient.Options) *acpclient.Client {
	t.Helper()
	dir := sdkDir(t)
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if transport == "ws" {
		url = "ws" + strings.TrimPrefix(url, "http")
	}
	script := filepath.Join(root, "conformance", "remote", "testdata", "sdkclient.mjs")
	opts.Env = append(opts.Env, "ACP_SDK_DIR="+dir, "ACP_TOKEN="+token)
	stderr := &acpclient.Buffer{}
	if opts.Stderr == nil {
		opts.Stderr = stderr
	}
	c, err := acpclient.Start(context.Background(), []string{"node", script, transport, url}, opts)
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

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

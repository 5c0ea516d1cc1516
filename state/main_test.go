package state

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"go.uber.org/goleak"
)

// TestMain doubles as the helper process of the multi-process tests: with
// helperEnv set, the test binary runs helperMain instead of the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helperMain(role))
	}
	goleak.VerifyTestMain(withPostgres{m})
}

// withPostgres runs the tests, then stops the PostgreSQL server they
// started (if any) before goleak looks for what was left running.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int {
	code := w.m.Run()
	if pg.srv != nil {
		if err := pg.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the test PostgreSQL:", err)
			code = 1
		}
	}
	return code
}

// pg is the test binary's one PostgreSQL server, started by the first test
// that needs it; each test gets a database of its own (postgresDSN).
var pg struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
	n    atomic.Int64
}

// postgresDSN starts the binary's PostgreSQL server if it does not run yet
// and returns the DSN of a new, empty database on it.
func postgresDSN(t *testing.T) string {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = pgtest.Start(context.Background(), pgtest.Options{}) })
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	dsn, err := pg.srv.CreateDB(t.Context(), fmt.Sprintf("t%d", pg.n.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// openPostgresT opens the fleet's store on a new database for t, closed
// when t ends.
func openPostgresT(t *testing.T, opts PostgresOptions) *pgStore {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	p, err := openPostgres(t.Context(), postgresDSN(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, p) })
	return p
}

const helperEnv = "ACP_STATE_TEST_HELPER"

// testLogger logs to the test's output until the test ends, then drops lines
// (a late line from a background goroutine must not fail the run).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func openShared(t *testing.T, dir string) *Shared {
	t.Helper()
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, s) })
	return s
}

// helper is a re-executed test binary running helperMain.
type helper struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startHelper(t *testing.T, role, dir string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+role, "ACP_STATE_TEST_DIR="+dir)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// send writes one command line to the helper.
func (h *helper) send(cmd string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.stdin, cmd); err != nil {
		h.t.Fatalf("helper %d: send %q: %v", h.cmd.Process.Pid, cmd, err)
	}
}

// expect reads the helper's next line, which must start with want.
func (h *helper) expect(want string) string {
	h.t.Helper()
	if !h.out.Scan() {
		h.t.Fatalf("helper %d: no line (want %q): %v", h.cmd.Process.Pid, want, h.out.Err())
	}
	if got := h.out.Text(); !strings.HasPrefix(got, want) {
		h.t.Fatalf("helper %d: got %q, want %q", h.cmd.Process.Pid, got, want)
	}
	return h.out.Text()
}

func (h *helper) kill() {
	h.t.Helper()
	if err := h.cmd.Process.Kill(); err != nil { // SIGKILL
		h.t.Fatal(err)
	}
	h.cmd.Wait()
}

// helperMain runs in a child process. It opens the store in
// ACP_STATE_TEST_DIR and then, by role:
//
//	durability: writes session "k" with ACP_STATE_TEST_N completed turns,
//	            flushes, prints "ready" and waits to be killed.
//	delete:     writes sessions early-0..39 and a marked session "secret"
//	            with a large turn (delete_test.go), then deletes it, and
//	            exits with status 3 at the delete's step
//	            ACP_STATE_TEST_STEP (os.Exit, as good as a SIGKILL there);
//	            prints "deleted" if it never got there.
//	writer:     prints "ready owner=BOOL", then obeys stdin lines
//	            "write PREFIX FROM TO" (sessions PREFIX-i with 3 turns each, then
//	            Flush; prints "ok owner=BOOL") and "exit" (Close; prints "closed").
func helperMain(role string) int {
	ctx := context.Background()
	dir := os.Getenv("ACP_STATE_TEST_DIR")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := Open(ctx, dir, Options{Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper open:", err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	switch role {
	case "durability":
		n, _ := strconv.Atoi(os.Getenv("ACP_STATE_TEST_N"))
		if err := s.PutSession(ctx, sampleSession("k")); err != nil {
			return fail(err)
		}
		for i := 1; i <= n; i++ {
			if err := s.PutTurn(ctx, "k", sampleTurn(i, TurnCompleted)); err != nil {
				return fail(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // until killed
		return 0
	case "delete":
		if err := putOthers(ctx, s, "early", 0, 40); err != nil {
			return fail(err)
		}
		if err := putSecret(ctx, s, "secret", true); err != nil {
			return fail(err)
		}
		if err := s.Flush(ctx); err != nil {
			return fail(err)
		}
		step := os.Getenv("ACP_STATE_TEST_STEP")
		testHook = func(at string) {
			if at == step {
				os.Exit(3)
			}
		}
		if err := s.DeleteSession(ctx, "secret"); err != nil {
			return fail(err)
		}
		fmt.Println("deleted")
		return 0
	case "writer":
		fmt.Printf("ready owner=%v\n", s.Owner())
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			f := strings.Fields(in.Text())
			switch {
			case len(f) == 4 && f[0] == "write":
				from, _ := strconv.Atoi(f[2])
				to, _ := strconv.Atoi(f[3])
				for i := from; i < to; i++ {
					if err := writeSample(ctx, s, fmt.Sprintf("%s-%d", f[1], i)); err != nil {
						return fail(err)
					}
				}
				if err := s.Flush(ctx); err != nil {
					return fail(err)
				}
				fmt.Printf("ok owner=%v\n", s.Owner())
			case len(f) == 1 && f[0] == "exit":
				if err := s.Close(); err != nil {
					return fail(err)
				}
				fmt.Println("closed")
				return 0
			}
		}
		return 0
	}
	return fail(fmt.Errorf("unknown role %q", role))
}

// writeSample writes session id with three completed turns.
func writeSample(ctx context.Context, s Store, id string) error {
	sess := sampleSession(id)
	sess.Updated = time.Now()
	if err := s.PutSession(ctx, sess); err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := s.PutTurn(ctx, id, sampleTurn(i, TurnCompleted)); err != nil {
			return err
		}
	}
	return nil
}

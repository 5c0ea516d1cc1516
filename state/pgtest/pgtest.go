package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options tune Start. The zero value is what most tests want.
type Options struct {
	// Fsync keeps PostgreSQL's fsync on. It is off by default for speed:
	// a killed server loses nothing either way (the WAL is in the kernel's
	// page cache); only the machine's crash would.
	Fsync bool
	// Log gets the server's log lines (nil: discarded).
	Log io.Writer
	// TCP makes the server listen on a free port of 127.0.0.1 too, for the
	// tests that put something between a client and the server.
	TCP bool
	// TLS serves TLS on TCP (it implies TCP), with a certificate for
	// localhost and 127.0.0.1 from a CA of its own (CAFile), so that a
	// client can check both with sslmode=verify-full.
	TLS bool
}

// Server is one running PostgreSQL. Its superuser is "postgres", trusted
// on the socket, and only processes on this machine can reach it.
type Server struct {
	dir  string // the server's own temporary directory: data/ and the socket
	bin  string // the directory of initdb and postgres
	opts Options
	cred *credential // the postgres user's, when started as root

	port int // the TCP port, 0 without TCP

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Port is the server's TCP port on 127.0.0.1 (Options.TCP), else 0.
func (s *Server) Port() int { return s.port }

// CAFile is the CA that signed the server's certificate (Options.TLS).
func (s *Server) CAFile() string { return filepath.Join(s.dir, "ca.crt") }

// ReadyTimeout bounds how long Start and Restart wait for the server to
// accept connections. initdb and a first start take a second or two on an
// idle machine; a loaded CI machine takes longer.
const ReadyTimeout = 2 * time.Minute

// Start runs initdb in a new temporary directory and starts the server,
// returning once it accepts connections. Stop it when done.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if s.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	// Not a test's TempDir: its parents are root's 0700 directories, which
	// the postgres user cannot enter.
	if s.dir, err = os.MkdirTemp("", "acp-sidecar-pg-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(s.dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = toolAttr(s.cred)
	initdb.Dir = s.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	if opts.TLS {
		opts.TCP = true
		s.opts.TCP = true
		if err := writeCerts(s.dir, s.data(), s.cred); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if opts.TCP {
		if s.port, err = freePort(); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if err := s.start(ctx); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// freePort is a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// findBinaries finds initdb and postgres: on PATH, else in Debian's
// versioned directory.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // a bad pattern is the only error, and this one is good
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL's initdb and postgres are not installed; scripts/test installs them (apt install postgresql) on Debian")
}

// postgresUser is the credential of the "postgres" user, which Debian's
// package creates.
func postgresUser() (*credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs a postgres user to run the server as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: postgres user: %w", err)
	}
	return &credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Socket is the directory of the server's unix socket: libpq's and pgx's
// host for it.
func (s *Server) Socket() string { return s.dir }

// socketPort is the port the unix socket's name carries.
func (s *Server) socketPort() int {
	if s.port != 0 {
		return s.port
	}
	return 5432
}

// DSN is the connection string for database db as the superuser, on the
// unix socket.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.dir, s.socketPort(), db)
}

// URL is DSN as a postgres:// URL, the form --store takes.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, s.dir, s.socketPort())
}

// CreateDB creates an empty database and returns its DSN: each test gets
// its own, on the one server of its binary.
func (s *Server) CreateDB(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// start runs postgres and waits until its log says it accepts connections.
func (s *Server) start(ctx context.Context) error {
	fsync := "off"
	if s.opts.Fsync {
		fsync = "on"
	}
	// Not CommandContext: the server outlives the call that starts it.
	listen := ""
	if s.opts.TCP {
		listen = "127.0.0.1"
	}
	args := []string{"-D", s.data(), "-k", s.dir,
		"-c", "listen_addresses=" + listen, "-c", "fsync=" + fsync, "-c", "full_page_writes=" + fsync,
		"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "logging_collector=off"}
	if s.opts.TCP {
		// The socket's name carries the port too: DSN says so.
		args = append(args, "-p", fmt.Sprint(s.port))
	}
	if s.opts.TLS {
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file="+filepath.Join(s.data(), "server.crt"),
			"-c", "ssl_key_file="+filepath.Join(s.data(), "server.key"))
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.SysProcAttr = serverAttr(s.cred)
	cmd.Dir = s.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	var tail lastLines
	go func() {
		// Owned by the server's life: it ends when the server closes its
		// stderr, which is when it exits.
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			tail.add(line)
			if s.opts.Log != nil {
				fmt.Fprintln(s.opts.Log, line)
			}
			if strings.Contains(line, "database system is ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait() // its exit status says nothing the log did not
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	timer := time.NewTimer(ReadyTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("pgtest: postgres exited before it was ready:\n%s", tail.String())
	case <-ctx.Done():
		s.Kill()
		return fmt.Errorf("pgtest: wait for postgres: %w", ctx.Err())
	case <-timer.C:
		s.Kill()
		return fmt.Errorf("pgtest: postgres not ready after %s:\n%s", ReadyTimeout, tail.String())
	}
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it.
// Its backends notice the postmaster's death and exit by themselves.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill() // an exited process is the only error, and then it is dead already
	<-done
}

// Restart starts a killed or stopped server again on the same data.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
	default:
		return errors.New("pgtest: restart a server that still runs")
	}
	return s.start(ctx)
}

// Stop shuts the server down (fast shutdown: SIGINT) and removes its
// directory.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd != nil {
		select {
		case <-done:
		default:
			cmd.Process.Signal(syscall.SIGINT) // it may have just exited: then done is closed below
			<-done
		}
	}
	return os.RemoveAll(s.dir)
}

// lastLines keeps the last lines of the server's log for an error.
type lastLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lastLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 20 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *lastLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TB is what For needs of a test (testing.TB has it): pgtest does not
// import package testing, since bench uses it in the binary.
type TB interface {
	Helper()
	Context() context.Context
	Fatal(args ...any)
	Error(args ...any)
	Cleanup(func())
}

// For starts a server for test t alone, stopped when t ends: for the tests
// that kill it, restart it or put a network in front of it.
func For(t TB, opts Options) *Server {
	t.Helper()
	srv, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

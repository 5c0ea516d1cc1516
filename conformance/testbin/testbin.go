package testbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bin is one build of acp-sidecar in a temporary directory.
type Bin struct {
	dir  string
	path string
	err  error

	statOnce sync.Once
	statErr  error
}

// Build builds acp-sidecar into a new temporary directory named with
// prefix. A failure is kept and reported by Path, so only the tests that
// need the binary fail. Call it from TestMain, and Close after m.Run.
func Build(prefix string) *Bin {
	b := &Bin{}
	b.dir, b.err = os.MkdirTemp("", prefix)
	if b.err != nil {
		return b
	}
	root, err := RepoRoot()
	if err != nil {
		b.err = err
		return b
	}
	//lint:ignore SA1019 the toolchain that built this test should build the sidecar, and its bin may not be on PATH.
	goroot := runtime.GOROOT()
	goCmd := filepath.Join(goroot, "bin", "go")
	if _, err := os.Stat(goCmd); goroot == "" || err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			b.err = fmt.Errorf("no go command in GOROOT (%q) or on PATH: %w", goroot, err)
			return b
		}
	}
	path := filepath.Join(b.dir, "acp-sidecar")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", path, "github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.err = fmt.Errorf("%s build ./cmd/acp-sidecar: %w\n%s", goCmd, err, out.String())
		return b
	}
	b.path = path
	return b
}

// Path returns the binary, or fails t. The first call stats every source
// file the binary is built from: the build ran in a child process that go
// test's cache cannot see, and without this a changed source would leave a
// cached pass standing.
func (b *Bin) Path(t testing.TB) string {
	t.Helper()
	b.statOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			b.statErr = err
			return
		}
		b.statErr = statSources(root)
	})
	if b.statErr != nil {
		t.Fatalf("stat the sidecar's sources: %v", b.statErr)
	}
	if b.err != nil {
		t.Fatalf("acp-sidecar binary not built: %v", b.err)
	}
	return b.path
}

// Close removes the build.
func (b *Bin) Close() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func statSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
}

// RepoRoot is the directory of this module's go.mod, above the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/acp-sidecar/acp-sidecar\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/acp-sidecar/acp-sidecar above the working directory")
		}
		dir = parent
	}
}

// Missing stops a test that needs a part the repo's scripts install (an
// agent package, the SDK's schema) and does not find it, with msg, which
// says what is missing and what installs it: a skip on a developer's
// machine, and a failure in CI (CI=true), where a test that skips checks
// nothing.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

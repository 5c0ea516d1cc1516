package suite

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

// sidecarBin is the acp-sidecar binary TestMain built for this run, or ""
// with sidecarBuildErr saying why there is none.
var (
	sidecarBin      string
	sidecarBuildErr error

	statOnce sync.Once
	statErr  error
)

// TestMain builds acp-sidecar once per test run from the working tree, as
// conformance/e2e does: the suite runs the real binary as the sidecar, as
// `show` and as the fake agent.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-sidecar-suite-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "suite: temp dir for the sidecar binary: %v\n", err)
		os.Exit(2)
	}
	sidecarBin, sidecarBuildErr = buildSidecar(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildSidecar(dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	//lint:ignore SA1019 the toolchain that built this test should build the sidecar, and its bin may not be on PATH.
	goroot := runtime.GOROOT()
	goCmd := filepath.Join(goroot, "bin", "go")
	if _, err := os.Stat(goCmd); goroot == "" || err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("no go command in GOROOT (%q) or on PATH: %w", goroot, err)
		}
	}
	bin := filepath.Join(dir, "acp-sidecar")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s build ./cmd/acp-sidecar: %w\n%s", goCmd, err, out.String())
	}
	return bin, nil
}

func repoRoot() (string, error) {
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

// sidecarBinary returns the binary TestMain built. The first call stats
// every source file it is built from, so go test's cache notices a change
// to any of them (the build itself runs in a child process it cannot see).
func sidecarBinary(t testing.TB) string {
	t.Helper()
	statOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			statErr = err
			return
		}
		statErr = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
	})
	if statErr != nil {
		t.Fatalf("stat the sidecar's sources: %v", statErr)
	}
	if sidecarBuildErr != nil {
		t.Fatalf("acp-sidecar binary not built: %v", sidecarBuildErr)
	}
	return sidecarBin
}

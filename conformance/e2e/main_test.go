package e2e

import (
	"bytes"
	"context"
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

// buildTimeout bounds the one build of the sidecar.
const buildTimeout = 5 * time.Minute

// TestMain builds acp-sidecar once per test run, from the working tree, so
// the tests always exercise what proxy/, intercept/ and cmd/ hold now. A
// build failure does not stop the tests that run agents directly: only the
// tests that need the binary fail, with the build's output.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-sidecar-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: temp dir for the sidecar binary: %v\n", err)
		os.Exit(2)
	}
	sidecarBin, sidecarBuildErr = buildSidecar(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildSidecar runs `go build -o DIR/acp-sidecar .../cmd/acp-sidecar` in the
// repository root with the go command of the toolchain that built this test
// (GOROOT/bin/go), else the one on PATH.
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
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
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

// statSources stats go.mod, go.sum and every .go file of the module outside
// hidden directories (.git, .cache with its node_modules) and testdata.
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

// sidecarBinary returns the binary TestMain built, or fails the test with
// the reason there is none.
//
// go test caches a result by the files the test process opened while tests
// ran (m.Run; TestMain's own opens before it are not logged), and the build
// happens in a child process it cannot see. So the first call stats every
// file the binary can be built from: a change to any of them, or a file
// added or removed, reruns the tests instead of reporting a cached pass for
// an older sidecar.
func sidecarBinary(t testing.TB) string {
	t.Helper()
	statOnce.Do(func() {
		if root, err := repoRoot(); err == nil {
			statErr = statSources(root)
		} else {
			statErr = err
		}
	})
	if statErr != nil {
		t.Fatalf("stat the sidecar's sources: %v", statErr)
	}
	if sidecarBuildErr != nil {
		t.Fatalf("acp-sidecar binary not built: %v", sidecarBuildErr)
	}
	return sidecarBin
}

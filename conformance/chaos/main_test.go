package chaos

import (
	"bytes"
	"context"
	"flag"
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

var (
	fullFlag = flag.Bool("chaos.full", false, "run the full chaos profile (also ACP_SIDECAR_CHAOS=full)")
	seedFlag = flag.Uint64("chaos.seed", 0, "seed for the random choices (0: from the clock); printed by every test")
)

// profile is how much chaos a run gets.
type profile struct {
	name          string
	agentKills    int           // runs of the agent kill loop
	sidecarKills  int           // runs of the sidecar kill loop
	concurrentFor time.Duration // how long the four sidecars run
	floodChunks   int           // chunks of the turn that floods during a restore
}

var (
	ciProfile   = profile{name: "ci", agentKills: 15, sidecarKills: 8, concurrentFor: 15 * time.Second, floodChunks: 20000}
	fullProfile = profile{name: "full", agentKills: 200, sidecarKills: 50, concurrentFor: 2 * time.Minute, floodChunks: 100000}
)

func chaosProfile() profile {
	if *fullFlag || os.Getenv("ACP_SIDECAR_CHAOS") == "full" {
		return fullProfile
	}
	return ciProfile
}

// seed returns the seed for this run and prints how to replay it.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: profile %s, seed %d (replay with -chaos.seed %d)", chaosProfile().name, s, s)
	return s
}

// sidecarBin is the acp-sidecar binary TestMain built, or "" with
// buildErr saying why there is none.
var (
	sidecarBin string
	buildErr   error
	statOnce   sync.Once
	statErr    error
)

// TestMain builds acp-sidecar once from the working tree, as
// conformance/e2e does.
func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "acp-sidecar-chaos-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: temp dir for the sidecar binary: %v\n", err)
		os.Exit(2)
	}
	sidecarBin, buildErr = buildSidecar(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
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

// binary returns the built sidecar or fails the test. Its first call stats
// the module's sources so that go test's cache notices a change to any of
// them (the build runs in a child process it cannot see).
func binary(t testing.TB) string {
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
	if buildErr != nil {
		t.Fatalf("acp-sidecar binary not built: %v", buildErr)
	}
	return sidecarBin
}

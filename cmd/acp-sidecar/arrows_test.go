package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// arrows is DESIGN.md's "The house" as data: for each top directory of the
// module, the top directories its packages may import. A package may always
// import its own directory's packages (intercept/ may have subpackages).
// cmd/ sits at the top and may use everything.
var arrows = map[string][]string{
	"cmd":       {"agenthost", "remote", "intercept", "proxy", "state", "replay", "conformance"},
	"intercept": {"proxy", "state", "replay"},
	"replay":    {"state"},
	"proxy":     {},
	"state":     {},
	// The agent's process life, beside proxy/: it knows an agent process,
	// not ACP, and is told of the agent's life through an interface that
	// intercept/ satisfies (DESIGN.md "Processes").
	"agenthost": {"proxy"},
	// The network transport, beside proxy/: connections, cursors, the
	// stdio bridge. It knows framing and ids, as proxy/ does, and uses its
	// envelope peek; the stacks behind its connections are cmd/'s.
	"remote": {"proxy"},
	// The fake agent and the suite are the test oracle: they speak ACP from
	// the protocol's schema and their own code, so a wrong name or shape in
	// intercept/ is not also right in the oracle that judges it.
	"conformance": {"proxy", "state"},
}

// TestImportArrows holds every package of the module to the arrows. It
// lives here because the module root has no package and cmd/, which may
// import everything, is the one place the rules leave alone. Only the
// packages' own files count (Imports, not TestImports): intercept/'s tests,
// for one, drive it with conformance/'s client and fake agent.
func TestImportArrows(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testbin.Missing(t, "no go command on PATH to list the packages with: "+err.Error())
	}
	root := moduleRoot(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return string(out)
	}
	module := strings.TrimSpace(run("list", "-m"))
	list := run("list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")

	// top is the module's top directory that path is in: "." for the
	// module's root, "" for a path outside the module.
	top := func(path string) string {
		if path == module {
			return "."
		}
		rest, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			return ""
		}
		dir, _, _ := strings.Cut(rest, "/")
		return dir
	}
	rel := func(path string) string { return strings.TrimPrefix(path, module+"/") }
	checked := 0
	for line := range strings.Lines(list) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, imports := fields[0], fields[1:]
		from := top(pkg)
		may, known := arrows[from]
		if !known {
			t.Errorf("%s is in no directory of DESIGN.md's \"The house\": give %s/ its arrows", rel(pkg), from)
			continue
		}
		checked++
		for _, imp := range imports {
			to := top(imp)
			if to == "" || to == from || slices.Contains(may, to) {
				continue
			}
			t.Errorf("%s imports %s, but %s (DESIGN.md \"The house\")", rel(pkg), rel(imp), rule(from, may))
		}
	}
	if checked == 0 {
		t.Fatalf("go list found no packages of %s under %s", module, root)
	}

	// Inside intercept/, the owners import no stage (DESIGN.md "The
	// house"): intercept/ itself, where the stages are, and the
	// switchboard are out of their reach.
	for line := range strings.Lines(list) {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(rel(fields[0]), "intercept") {
			continue
		}
		pkg := rel(fields[0])
		may, known := interceptArrows[pkg]
		if !known {
			t.Errorf("%s is a package of intercept/ with no arrows: give it its place in interceptArrows", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if to := rel(imp); strings.HasPrefix(to, "intercept") && !slices.Contains(may, to) {
				t.Errorf("%s imports %s; of intercept/ it may import only %v", pkg, to, may)
			}
		}
	}
}

// testOnly are the packages of the module that are test code, though not
// in test files: the binary the user builds carries none of them
// (docs/flags.md, "What the binary holds").
var testOnly = []string{"state/pgtest", "conformance/testbin"}

// TestBinaryHoldsNoTestCode holds the release build to the product:
// `go list -deps ./cmd/acp-sidecar` names none of testOnly.
func TestBinaryHoldsNoTestCode(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testbin.Missing(t, "no go command on PATH to list the packages with: "+err.Error())
	}
	root := moduleRoot(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return string(out)
	}
	module := strings.TrimSpace(run("list", "-m"))
	deps := strings.Fields(run("list", "-deps", "./cmd/acp-sidecar"))
	if !slices.Contains(deps, module+"/cmd/acp-sidecar") {
		t.Fatalf("go list -deps ./cmd/acp-sidecar does not list the binary: %v", deps)
	}
	for _, p := range testOnly {
		if slices.Contains(deps, module+"/"+p) {
			t.Errorf("the binary carries %s, test code", p)
		}
	}
}

// interceptArrows is, for each package of intercept/, the packages of
// intercept/ it may import. The ledger and the agent's life own one kind
// of state each and import nothing of intercept/; wire/ is what frames
// look like; the record owns the sessions' records and reads the ledger
// and the life; the rebuilds work on the record, the ledger and the life
// and never on a stage; the stages and the session operations are
// intercept/ itself; the switchboard stands above one agent's intercept.
var interceptArrows = map[string][]string{
	"intercept/ledger":      {},
	"intercept/life":        {},
	"intercept/wire":        {},
	"intercept/record":      {"intercept/ledger", "intercept/life", "intercept/wire"},
	"intercept/rebuild":     {"intercept/ledger", "intercept/life", "intercept/record", "intercept/wire"},
	"intercept":             {"intercept/ledger", "intercept/life", "intercept/rebuild", "intercept/record", "intercept/wire"},
	"intercept/switchboard": {"intercept", "intercept/ledger", "intercept/rebuild", "intercept/wire"},
}

// rule says what from/ may import, for a failure message.
func rule(from string, may []string) string {
	if len(may) == 0 {
		return from + "/ imports nothing of ours"
	}
	return from + "/ imports only " + strings.Join(may, "/, ") + "/ and its own"
}

// moduleRoot is the directory of the go.mod above the test's working
// directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, err := os.Stat(filepath.Join(dir, "go.mod"))
		if err == nil {
			return dir
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

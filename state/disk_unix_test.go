//go:build unix

package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests here check unix's modes, variables and paths.

func TestDefaultDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, tt := range []struct{ xdg, want string }{
		{"/xdg/state", "/xdg/state/acp-sidecar"},
		{"", "/home/u/.local/state/acp-sidecar"},
		{"relative/ignored", "/home/u/.local/state/acp-sidecar"},
	} {
		t.Setenv("XDG_STATE_HOME", tt.xdg)
		if got, err := DefaultDir(); err != nil || got != tt.want {
			t.Errorf("DefaultDir() with XDG_STATE_HOME=%q = %q, %v, want %q", tt.xdg, got, err, tt.want)
		}
	}
}

func TestPermissions(t *testing.T) {
	old := umask(0o022)
	defer umask(old)
	dir := filepath.Join(t.TempDir(), "state")
	s := openShared(t, dir)
	if !s.Owner() {
		t.Fatal("not owner")
	}
	check := func(when string) {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: dir mode = %v, %v, want 0700", when, fi.Mode().Perm(), err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s mode = %v, want 0600", when, e.Name(), fi.Mode().Perm())
			}
		}
	}
	check("after open") // includes store.sock
	if sock := s.src.(*diskSource).sock; len(sock) < len(dir) || !strings.HasPrefix(sock, dir) {
		t.Errorf("socket %s not in %s", sock, dir)
	}
	for i := range 200 {
		writeSample(t.Context(), s, "s"+string(rune('a'+i%26))+strings.Repeat("x", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("after close")
}

// A state dir too deep for a unix socket path (about 108 bytes) gets its
// socket in a private temp directory, the same one for every process.
func TestSocketPathLongDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	p1, err := socketPath(long)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := socketPath(long)
	if p1 != p2 || len(p1) >= 100 || !strings.HasPrefix(p1, tmp) {
		t.Fatalf("socketPath(long) = %q, %q; want one short path under %s", p1, p2, tmp)
	}
	if fi, err := os.Stat(filepath.Dir(p1)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode = %v, %v, want 0700", fi.Mode().Perm(), err)
	}
	a := openShared(t, long)
	b := openShared(t, long)
	if !a.Owner() || b.Owner() {
		t.Fatalf("owner flags %v %v, want true false", a.Owner(), b.Owner())
	}
	writeAll(t, b, "l", 0, 2)
	checkSamples(t, a, "l", 0, 2)
}

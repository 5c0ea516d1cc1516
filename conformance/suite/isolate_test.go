package suite

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envValue is the last value of k in env, as exec gives the child.
func envValue(env []string, k string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if key, val, _ := strings.Cut(kv, "="); key == k {
			v, ok = val, true
		}
	}
	return v, ok
}

// TestWorlds: every run gets its own home, XDG dirs, temp dir and cwd, the
// user's values of them are gone unless kept, everything else of the
// user's environment stays, and the home template is copied into each
// home.
func TestWorlds(t *testing.T) {
	tmpl := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tmpl, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmpl, ".codex", "config.toml"), []byte("model_provider = \"mock\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("config.toml", filepath.Join(tmpl, ".codex", "link.toml")); err != nil {
		t.Fatal(err)
	}
	user := []string{"HOME=/home/user", "XDG_CONFIG_HOME=/home/user/.config", "TMPDIR=/tmp/user", "PATH=/usr/bin", "ANTHROPIC_BASE_URL=http://mock"}
	for _, keep := range [][]string{nil, {"HOME"}} {
		cfg := &config{env: baseEnv(user, keep), keepEnv: keep, homeTemplate: tmpl}
		root := t.TempDir()
		a, err := newWorld(cfg, filepath.Join(root, "direct"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := newWorld(cfg, filepath.Join(root, "sidecar-1"))
		if err != nil {
			t.Fatal(err)
		}
		if a.cwd == b.cwd {
			t.Errorf("two runs share the cwd %s", a.cwd)
		}
		for _, k := range isolatedVars {
			va, _ := envValue(append(slices.Clone(user), a.env...), k)
			vb, _ := envValue(append(slices.Clone(user), b.env...), k)
			switch {
			case slices.Contains(keep, k):
				if want, _ := envValue(user, k); va != want || vb != want {
					t.Errorf("--keep-env %s: %s and %s, want the user's %s", k, va, vb, want)
				}
			case va == vb || !strings.HasPrefix(va, a.root) || !strings.HasPrefix(vb, b.root):
				t.Errorf("%s: %q and %q, want a dir of each run's own", k, va, vb)
			}
		}
		for _, kv := range []string{"PATH=/usr/bin", "ANTHROPIC_BASE_URL=http://mock"} {
			if !slices.Contains(a.env, kv) {
				t.Errorf("the run lost the user's %s", kv)
			}
		}
		if keep != nil {
			continue
		}
		home, _ := envValue(a.env, "HOME")
		if data, err := os.ReadFile(filepath.Join(home, ".codex", "link.toml")); err != nil || string(data) != "model_provider = \"mock\"\n" {
			t.Errorf("the home template is not in the run's home: %q, %v", data, err)
		}
		if fi, err := os.Stat(filepath.Join(home, ".codex", "config.toml")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the template file's mode is not kept: %v, %v", fi, err)
		}
	}
	if err := checkKeepEnv([]string{"HOME", "TMPDIR"}); err != nil {
		t.Error(err)
	}
}

//go:build linux

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

// TestTemplateWorld: a run's world starts from a copy of the warmed
// template's home and XDG dirs, not of its cwd, temp or runtime dir; a link
// into the template points into the run's own world instead; and a write in
// the run's world never reaches the template.
func TestTemplateWorld(t *testing.T) {
	root := t.TempDir()
	cfg := &config{env: baseEnv([]string{"PATH=/usr/bin"}, nil)}
	tmpl, err := newWorld(cfg, filepath.Join(root, "template"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(tmpl.root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("home/.agent/config.json", "warm")
	write("xdg/cache/agent/node_modules/pkg/index.js", "package")
	write("xdg/config/agent/agent.json", "config")
	write("xdg/data/agent/db", "data")
	write("xdg/state/agent/state", "state")
	write("cwd/.agent/project.json", "the probe's project")
	write("tmp/scratch", "the probe's temp")
	write("xdg/runtime/agent.pid", "123")
	if err := os.Symlink(filepath.Join(tmpl.root, "xdg", "cache", "agent"), filepath.Join(tmpl.root, "home", ".agent", "cache")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin", filepath.Join(tmpl.root, "home", "bin")); err != nil {
		t.Fatal(err)
	}
	cfg.template = tmpl
	w, err := newWorld(cfg, filepath.Join(root, "check", "direct"))
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{
		"home/.agent/config.json": "warm", "xdg/cache/agent/node_modules/pkg/index.js": "package",
		"xdg/config/agent/agent.json": "config", "xdg/data/agent/db": "data", "xdg/state/agent/state": "state",
		"home/.agent/cache/node_modules/pkg/index.js": "package",
	} {
		if got, err := os.ReadFile(filepath.Join(w.root, rel)); err != nil || string(got) != want {
			t.Errorf("%s in the run's world: %q, %v; want the template's %q", rel, got, err, want)
		}
	}
	for _, rel := range []string{"cwd/.agent/project.json", "tmp/scratch", "xdg/runtime/agent.pid"} {
		if _, err := os.Stat(filepath.Join(w.root, rel)); err == nil {
			t.Errorf("%s is in the run's world: only home and the XDG config, data, state and cache dirs are copied", rel)
		}
	}
	if link, err := os.Readlink(filepath.Join(w.root, "home", ".agent", "cache")); err != nil || link != filepath.Join(w.root, "xdg", "cache", "agent") {
		t.Errorf("the link into the template points at %q (%v), want the run's own %s", link, err, filepath.Join(w.root, "xdg", "cache", "agent"))
	}
	if link, err := os.Readlink(filepath.Join(w.root, "home", "bin")); err != nil || link != "/usr/bin" {
		t.Errorf("a link out of the template points at %q (%v), want /usr/bin as it was", link, err)
	}
	// The agent rewrites its config in place in the run: the template, and
	// so every other run, must not see it.
	f, err := os.OpenFile(filepath.Join(w.root, "home", ".agent", "config.json"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("changed by a run"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(tmpl.root, "home", ".agent", "config.json")); err != nil || string(got) != "warm" {
		t.Errorf("the template's config after a run wrote its copy in place: %q, %v; want it untouched", got, err)
	}
	if home, _ := envValue(w.env, "HOME"); home != filepath.Join(w.root, "home") {
		t.Errorf("HOME %s, want the run's own", home)
	}
}

package suite

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Agents keep state on disk between runs: codex-acp 0.16.0 started a second
// run in the same home and cwd in the mode the first run chose, and the
// transparency check then compared two different sessions (issue 16). So
// every run of every check (the direct run and each sidecar) gets a world
// of its own: a fresh home, XDG directories, temp dir and cwd.

// isolatedVars are the variables that point a process at a place where it
// may keep state. Each run gets its own value for every one of them, unless
// --keep-env keeps the user's.
var isolatedVars = []string{
	"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
	"XDG_RUNTIME_DIR", "TMPDIR", "TMP", "TEMP", "PWD",
}

// baseEnv is environ minus the isolated variables that keep does not name:
// the environment every run starts from.
func baseEnv(environ, keep []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(isolatedVars, k) && !slices.Contains(keep, k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// checkKeepEnv rejects a --keep-env name that is not isolated: keeping it
// would do nothing, and a typo would go unnoticed.
func checkKeepEnv(keep []string) error {
	for _, k := range keep {
		if !slices.Contains(isolatedVars, k) {
			return fmt.Errorf("--keep-env %s: not one of the variables each run gets its own value for (%s)", k, strings.Join(isolatedVars, ", "))
		}
	}
	return nil
}

// world is one run's own piece of disk and the environment that points the
// agent (and the sidecar) at it.
type world struct {
	root string // holds everything below
	cwd  string
	env  []string
}

// The template world. A fresh world per run costs some agents a download
// per run: opencode installs about 95 MB of provider packages into every
// fresh home and config dir. So the suite warms one world first (the probe
// starts and stops the agent in it) and every run starts from a copy of
// it. The copy holds what the agent keeps for itself (home and the XDG
// config, data, state and cache dirs) and not the cwd, temp or runtime
// dir: the probe's cwd is in no run's, so what an agent keeps by cwd (its
// sessions, its project settings) never reaches a run, and the probe
// changes no config, so no choice of its carries either (issue 16's codex
// mode). --warm=false goes back to worlds made from --home-template alone.

// warmDirs are the dirs of a world, relative to its root, that a run's
// world copies from the template.
var warmDirs = []string{"home", "xdg/config", "xdg/data", "xdg/state", "xdg/cache"}

// newWorld makes a fresh world under dir: home, xdg/{config,data,state,
// cache,runtime}, tmp and cwd. The home and XDG dirs are a copy of
// cfg.template's when there is one, else home is a copy of --home-template.
func newWorld(cfg *config, dir string) (*world, error) {
	w := &world{root: dir, cwd: filepath.Join(dir, "cwd")}
	home := filepath.Join(dir, "home")
	tmp := filepath.Join(dir, "tmp")
	xdg := func(s string) string { return filepath.Join(dir, "xdg", s) }
	values := map[string]string{
		"HOME": home, "XDG_CONFIG_HOME": xdg("config"), "XDG_DATA_HOME": xdg("data"),
		"XDG_STATE_HOME": xdg("state"), "XDG_CACHE_HOME": xdg("cache"), "XDG_RUNTIME_DIR": xdg("runtime"),
		"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp, "PWD": w.cwd,
	}
	for _, d := range []string{w.cwd, home, tmp, xdg("config"), xdg("data"), xdg("state"), xdg("cache"), xdg("runtime")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make the run's dirs: %w", err)
		}
	}
	switch t := cfg.template; {
	case t != nil:
		for _, d := range warmDirs {
			if err := copyTree(filepath.Join(t.root, d), filepath.Join(dir, d), t.root, dir); err != nil {
				return nil, fmt.Errorf("copy the template world's %s: %w", d, err)
			}
		}
	case cfg.homeTemplate != "":
		if err := copyTree(cfg.homeTemplate, home, "", ""); err != nil {
			return nil, fmt.Errorf("copy --home-template %s: %w", cfg.homeTemplate, err)
		}
	}
	w.env = slices.Clone(cfg.env)
	for _, k := range isolatedVars {
		if !slices.Contains(cfg.keepEnv, k) {
			w.env = append(w.env, k+"="+values[k])
		}
	}
	return w, nil
}

// copyTree copies the files, directories and symlinks under src into dst,
// keeping their permission bits. A symlink whose absolute target is under
// from is pointed at the same place under to instead (from "" keeps every
// target): a link into the template world must not let a run write into
// the template, which every other run copies.
//
// Files are copied, never hard-linked: an agent may rewrite a file in
// place (a config, a lock, a cache index), and through a hard link that
// write would reach the template and every run. The copy is io.Copy
// between two files, which Linux does with copy_file_range: in the kernel,
// and as a reflink (shared blocks, copied on write) where the file system
// has them (Btrfs, XFS), so a large cache costs little more than its
// directory entries.
func copyTree(src, dst, from, to string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if from != "" && filepath.IsAbs(link) {
				if r, err := filepath.Rel(from, link); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
					link = filepath.Join(to, r)
				}
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, devices and pipes are not a home's config
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// makeDir creates dir 0700, and tightens it to 0700 if it exists: the store
// holds prompts and answers, which are nobody else's business.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	return nil
}

// tightenFiles sets every regular file directly in dir to 0600. badger creates
// its memtable, table and discard files through an mmap helper with mode 0666
// (less the umask), and the umask is process-wide, so it cannot be changed
// safely around badger's calls. The 0700 directory already keeps others out;
// this makes the files say so too.
func tightenFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if info.Mode().Perm() != 0o600 {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

package state

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// badger's flock is taken on a fresh descriptor per Open, so a second Open in
// the same process conflicts just as another process would. The in-process
// owner/client tests rely on it.
func TestLockConflictsInProcess(t *testing.T) {
	dir := t.TempDir()
	a, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, a)
	if _, err := openBadger(dir, testLogger(t)); !errors.Is(err, errLocked) {
		t.Fatalf("second openBadger err = %v, want errLocked", err)
	}
}

// lockHeld must see the lock an open store holds, or a table check that
// fails while the owner compacts is taken for damage (openBadger).
func TestLockHeldSeesAnOpenStore(t *testing.T) {
	dir := t.TempDir()
	a, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !lockHeld(dir) {
		t.Error("lockHeld = false while the store is open")
	}
	closeOK(t, a)
	if lockHeld(dir) {
		t.Error("lockHeld = true after the store closed")
	}
}

func TestNewerSchema(t *testing.T) {
	dir := t.TempDir()
	b, err := openBadger(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	err = b.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	})
	closeOK(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), dir, Options{Logger: testLogger(t)}); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open() err = %v, want ErrNewerSchema", err)
	}
}

// A damaged directory must give ErrCorrupt, never a panic, and Fallback must
// leave the files where they were.
func TestCorrupt(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"manifest garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest at all"))
		}},
		{"manifest truncated", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "MANIFEST"), 3); err != nil {
				t.Fatal(err)
			}
		}},
		{"table garbage", func(t *testing.T, dir string) {
			for _, f := range tables(t, dir) {
				writeFile(t, f, []byte(strings.Repeat("garbage!", 100)))
			}
		}},
		{"table truncated", func(t *testing.T, dir string) {
			for _, f := range tables(t, dir) {
				fi, _ := os.Stat(f)
				if err := os.Truncate(f, fi.Size()/2); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"table block flipped", func(t *testing.T, dir string) {
			for _, f := range tables(t, dir) {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for i := 20; i < 60 && i < len(b); i++ {
					b[i] ^= 0x5a
				}
				writeFile(t, f, b)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				writeSample(t.Context(), s, "s"+strings.Repeat("x", i))
			}
			closeOK(t, s)
			tt.damage(t, dir)
			before := listDir(t, dir)

			_, err = Open(t.Context(), dir, Options{Logger: testLogger(t)})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open() err = %v, want ErrCorrupt", err)
			}
			mem, msg := Fallback(dir, err)
			if !strings.Contains(msg, dir) {
				t.Errorf("Fallback notice %q does not say where the files are", msg)
			}
			if err := writeSample(t.Context(), mem, "new"); err != nil {
				t.Errorf("fallback store: %v", err)
			}
			if after := listDir(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("files changed: before %v, after %v", before, after)
			}
		})
	}
}

// tables lists the store's table files. Closing a store flushes its memtable
// to a table, so there is always one.
func tables(t *testing.T, dir string) []string {
	t.Helper()
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table written")
	}
	return ssts
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCheckTableBounds(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 0, 0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, {0x08, 0x00, 0, 0, 0, 2}} {
		if err := checkTable(b); err == nil {
			t.Errorf("checkTable(%x) = nil", b)
		}
	}
}

// TestOrphanTableIsNotDamage: a process killed while writing a table (a
// flush, a compaction) leaves a table the MANIFEST does not name. badger
// removes it at open; the store must open, with everything it had, and not
// be taken for damaged (the sidecar would record in memory and lose turns).
func TestOrphanTableIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSample(t.Context(), s, "kept"); err != nil {
		t.Fatal(err)
	}
	closeOK(t, s)
	writeFile(t, filepath.Join(dir, "999999.sst"), []byte(strings.Repeat("half a table", 50)))
	s, err = Open(t.Context(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open() with an orphan table: %v", err)
	}
	defer closeOK(t, s)
	if _, err := s.Session(t.Context(), "kept"); err != nil {
		t.Errorf("session after reopen: %v", err)
	}
}

// Turns recorded before agents had names hold the agent's argv under "agent".
// They must still read, with no agent name: Turn.Agent is stored under
// "agentName" so that the old key keeps its old type.
func TestTurnBeforeAgentNames(t *testing.T) {
	b, err := openBadger(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, b)
	old := `{"index":1,"promptText":"q1","status":"completed","agent":["fake","--flag"],"started":"2025-03-01T12:00:00Z"}`
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(turnKey("a", 1), []byte(old)) }); err != nil {
		t.Fatal(err)
	}
	turns, err := b.Turns(t.Context(), "a")
	if err != nil {
		t.Fatalf("Turns() of an older record: %v", err)
	}
	if len(turns) != 1 || turns[0].PromptText != "q1" || turns[0].Agent != "" {
		t.Errorf("Turns() = %+v, want turn 1 with no agent name", turns)
	}
}

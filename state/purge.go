package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// How a delete leaves the disk. DESIGN.md "A session's whole life": a
// deleted session leaves the store and the disk, and the sidecar keeps it
// nowhere. badger keeps a value in up to three kinds of file: the log of the
// memtable it was written to (.mem), the tables that memtable is flushed and
// compacted into (.sst) and, for a value of ValueThreshold (64 KiB) or more,
// the value log (.vlog). A prompt with a file attached is past that: the
// recorder keeps up to 1 MiB of prompt text and 1 MiB of prompt blocks. A
// plain badger delete only adds a tombstone; every older version stays until
// compaction gets to it, and a value log file until its garbage collection
// picks it, which is never for the file being written.
//
// badgerStore.DeleteSession therefore, alone on the store (b.rw):
//
//  1. writes the tombstone d/<id> and a note p/<id> of what it is about to
//     drop and of the other keys it must put back (a key with no terminator
//     is a prefix of longer ones: dropping l/ab also drops l/abc);
//  2. drops those prefixes with DB.DropPrefix, which flushes every memtable
//     (deleting its log) and compacts the prefixes out of every table at
//     every level (deleting the tables they were in), and puts the kept keys
//     back;
//  3. checks that no version of any dropped key is left in the tree (an
//     iterator over all versions) and that no memtable log from before is
//     left on disk, and drops again if something is;
//  4. searches the value log files for the dropped prefixes: the value log
//     holds each key verbatim. Where one is found the value log must go as
//     a whole, since badger rewrites no file on request: rewrite (rewrite.go)
//     copies every key to a file, empties the store with DB.DropAll, which
//     deletes every table, memtable log and value log file, and loads the
//     copy back;
//  5. removes the note.
//
// A process killed on the way finds the note at its next open and finishes
// the delete (finishDeletes), or the copy, and loads it (finishRewrite).
//
// What stays: the tombstone holds the id; the note's old versions hold ids
// and the other sessions' keys it put back, nothing of the deleted session
// but its ids; badger's MANIFEST, DISCARD and KEYREGISTRY files hold table
// numbers, sizes and (with no encryption) nothing else.

// deletion is the note p/<id>: what a delete drops and what it puts back.
type deletion struct {
	// Drop are the prefixes DropPrefix drops: the session's own keys, its
	// listing record and the native ids that map to it.
	Drop [][]byte `json:"drop"`
	// Keep are the other keys under Drop, with their values, put back after.
	Keep []kv `json:"keep,omitempty"`
}

type kv struct {
	K []byte `json:"k"`
	V []byte `json:"v"`
}

// testHook, when set, is called at each named step of a delete and of a
// rewrite; the tests of a kill on the way exit there.
var testHook func(step string)

func hook(step string) {
	if testHook != nil {
		testHook(step)
	}
}

// DeleteSession forgets session id and returns once no file of the state
// directory holds any of its values (see the steps above).
func (b *badgerStore) DeleteSession(ctx context.Context, id string) error {
	b.rw.Lock()
	defer b.rw.Unlock()
	d, err := b.planDelete(id)
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	err = b.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(deadKey(id), nil); err != nil {
			return err
		}
		note, err := encode(d)
		if err != nil {
			return err
		}
		return txn.Set(pendingKey(id), note)
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	hook("delete-noted")
	if err := b.purge(id, d); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	b.mu.Lock()
	delete(b.live, id)
	b.mu.Unlock()
	b.feed.publish(id)
	return nil
}

// planDelete finds what deleting id drops and keeps. It fails with
// ErrNotFound when the store has nothing of id, and errGone when that is
// because id was deleted before.
func (b *badgerStore) planDelete(id string) (*deletion, error) {
	d := &deletion{Drop: [][]byte{sessionPrefix(id), listKey(id)}}
	err := b.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(listKey(id))
		if err != nil && !errorsIsNotFound(err) {
			return err
		}
		found := err == nil || hasPrefix(txn, sessionPrefix(id))
		it := txn.NewIterator(badger.IteratorOptions{Prefix: nativePrefix(), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				if string(v) == id {
					d.Drop = append(d.Drop, it.Item().KeyCopy(nil))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if !found && len(d.Drop) == 2 {
			return missing(txn, id)
		}
		for _, p := range d.Drop[1:] {
			keep, err := longer(txn, p)
			if err != nil {
				return err
			}
			d.Keep = append(d.Keep, keep...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// hasPrefix says whether any key under p is there.
func hasPrefix(txn *badger.Txn, p []byte) bool {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
	defer it.Close()
	it.Rewind()
	return it.Valid()
}

// longer lists the keys under p other than p itself, with their values:
// dropping the prefix p drops them too, so they are put back.
func longer(txn *badger.Txn, p []byte) ([]kv, error) {
	var out []kv
	it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if bytes.Equal(item.Key(), p) {
			continue
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, kv{K: item.KeyCopy(nil), V: v})
	}
	return out, nil
}

// purgeAttempts bounds the drops of one delete. DropPrefix gives up on a
// level 0 compaction it cannot start with only a warning; the check after
// it finds what was left, and the drop is tried again.
const purgeAttempts = 3

// purge drops what d says, puts its kept keys back, checks that nothing of
// it is left, rewrites the value log when it holds any of it, and removes
// the note. It is safe to repeat: finishDeletes repeats it after a kill.
// b.rw is held for writing (or the store is still opening).
func (b *badgerStore) purge(id string, d *deletion) error {
	var left error
	for range purgeAttempts {
		mems, err := filepath.Glob(filepath.Join(b.dir, "*.mem"))
		if err != nil {
			return err
		}
		// DropPrefix skips a prefix with no live key, and with it the old
		// versions under it: give each one a live key first.
		if err := b.db.Update(func(txn *badger.Txn) error { return placeholders(txn, id, d.Drop) }); err != nil {
			return err
		}
		if err := b.db.DropPrefix(d.Drop...); err != nil {
			return fmt.Errorf("drop prefixes: %w", err)
		}
		hook("delete-dropped")
		if err := b.putBack(d.Keep); err != nil {
			return fmt.Errorf("put back keys under the dropped prefixes: %w", err)
		}
		if left = b.leftOver(d, mems); left == nil {
			break
		}
		b.log.Warn("a dropped session's keys are still in the store; dropping again", "session", id, "err", left)
	}
	if left != nil {
		return left
	}
	found, err := vlogHolds(b.dir, d.Drop)
	if err != nil {
		return fmt.Errorf("search the value log: %w", err)
	}
	if found {
		if err := b.rewrite(); err != nil {
			return err
		}
	}
	hook("delete-purged")
	return b.db.Update(func(txn *badger.Txn) error { return txn.Delete(pendingKey(id)) })
}

// placeholders writes a content-free live key under every prefix of drop
// that has none. The session's prefix gets a key of its own; a prefix that
// is a whole key (l/<id>, n/<native>) gets that key, with a value its
// readers accept.
func placeholders(txn *badger.Txn, id string, drop [][]byte) error {
	for _, p := range drop {
		if hasPrefix(txn, p) {
			continue
		}
		k, v := p, []byte("{}")
		switch {
		case bytes.Equal(p, sessionPrefix(id)):
			k, v = sessionKey(id, "deleting"), nil
		case bytes.HasPrefix(p, nativePrefix()):
			v = nil
		}
		if err := txn.Set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// putBack writes the kept keys again, in as many transactions as they need.
func (b *badgerStore) putBack(keep []kv) error {
	if len(keep) == 0 {
		return nil
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range keep {
		if err := wb.Set(e.K, e.V); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// leftOver reports any version of a dropped key still in the tree, and any
// of the memtable logs mems (those from before the drop) still on disk.
func (b *badgerStore) leftOver(d *deletion, mems []string) error {
	kept := map[string]bool{}
	for _, e := range d.Keep {
		kept[string(e.K)] = true
	}
	var left []string
	err := b.db.View(func(txn *badger.Txn) error {
		for _, p := range d.Drop {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p, AllVersions: true})
			for it.Rewind(); it.Valid(); it.Next() {
				if k := it.Item().Key(); !kept[string(k)] {
					left = append(left, fmt.Sprintf("%q@%d", k, it.Item().Version()))
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range mems {
		if _, err := os.Stat(m); err == nil {
			left = append(left, filepath.Base(m))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still on disk after the drop: %d versions or memtable logs, first %s", len(left), left[0])
	}
	return nil
}

// vlogHolds says whether any value log file in dir holds one of the byte
// strings pats. badger writes each entry's key verbatim into the value log
// (there is no encryption or compression there), so a value stored under a
// dropped prefix shows its key. Other bytes can match as well: that costs an
// unneeded rewrite, never a value left behind.
func vlogHolds(dir string, pats [][]byte) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return false, err
	}
	longest := 0
	for _, p := range pats {
		longest = max(longest, len(p))
	}
	buf := make([]byte, 1<<20+longest)
	for _, f := range files {
		found, err := fileHolds(f, pats, buf, longest)
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// fileHolds searches one file in pieces of buf, each piece starting with the
// last longest-1 bytes of the one before, so a match across two pieces is
// seen.
func fileHolds(path string, pats [][]byte, buf []byte, longest int) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // rotated away meanwhile
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	carry := 0
	for {
		n, err := io.ReadFull(f, buf[carry:])
		chunk := buf[:carry+n]
		if slices.ContainsFunc(pats, func(p []byte) bool { return bytes.Contains(chunk, p) }) {
			return true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		carry = min(longest-1, len(chunk))
		copy(buf, chunk[len(chunk)-carry:])
	}
}

// finishDeletes finishes every delete a killed process left noted. It runs
// while the store opens, before anyone reads it. A delete it cannot finish
// is logged and left noted for the next open: the store stays usable, and
// the tombstone already refuses the session's writes.
func (b *badgerStore) finishDeletes() error {
	notes := map[string]*deletion{}
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: pendingPrefix(), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id := string(bytes.TrimPrefix(it.Item().Key(), pendingPrefix()))
			var d deletion
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &d) }); err != nil {
				return fmt.Errorf("%w: note of the delete of %s: %w", ErrCorrupt, id, err)
			}
			notes[id] = &d
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, d := range notes {
		b.log.Info("finishing the delete of a session that a killed process began", "session", id)
		if err := b.purge(id, d); err != nil {
			if b.broken != nil {
				return err // a rewrite emptied the store: it cannot open
			}
			b.log.Error("cannot finish the delete of a session; the next open tries again", "session", id, "err", err)
		}
	}
	return nil
}

package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// A rewrite empties every file of the store and loads back what it held:
// the one way to take a value out of badger's value log at a time of our
// choosing (purge.go). It copies every live key to rewriteFile, empties the
// store with DB.DropAll, which deletes every table, memtable log and value
// log file, and loads the copy. Old versions, dropped keys and everything
// else the files held are gone with them.
//
// The copy is written as rewriteFile+".tmp", synced and renamed, so a
// rewriteFile that exists is whole. A process killed after the rename finds
// it at the next open and loads it again (finishRewrite); until the copy is
// loaded meta/schema reads schemaRewriting, which an older acp-sidecar
// refuses as a newer schema instead of taking a half-loaded store for the
// whole one.
const rewriteFile = "rewrite.kv"

const schemaRewriting = math.MaxUint32

// The copy's format: copyMagic, then for each key uvarint(len key), key,
// uvarint(len value), value; then uvarint(0) (no key is empty), the number of
// keys as a big-endian uint64 and a big-endian CRC-32C of everything before
// it.
const copyMagic = "acp-sidecar store copy 1\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rewrite copies the store, empties it and loads the copy back. b.rw is held
// for writing.
func (b *badgerStore) rewrite() error {
	final := filepath.Join(b.dir, rewriteFile)
	tmp := final + ".tmp"
	if err := b.saveCopy(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewrite store: copy: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewrite store: %w", err)
	}
	if err := syncDir(b.dir); err != nil {
		return fmt.Errorf("rewrite store: %w", err)
	}
	hook("rewrite-saved")
	return b.loadCopy(final)
}

// saveCopy writes every live key and its value to path, and syncs it.
func (b *badgerStore) saveCopy(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 256<<10)
	h := crc32.New(castagnoli)
	w := io.MultiWriter(bw, h)
	io.WriteString(w, copyMagic)
	var n uint64
	var hdr []byte
	err = b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			err := item.Value(func(v []byte) error {
				hdr = binary.AppendUvarint(hdr[:0], uint64(len(item.Key())))
				w.Write(hdr)
				w.Write(item.Key())
				hdr = binary.AppendUvarint(hdr[:0], uint64(len(v)))
				w.Write(hdr)
				_, err := w.Write(v)
				return err
			})
			if err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.Write(binary.BigEndian.AppendUint64(binary.AppendUvarint(nil, 0), n))
	bw.Write(binary.BigEndian.AppendUint32(nil, h.Sum32()))
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// readCopy calls f for each key of the copy at path; with f nil it only
// checks the whole copy.
func readCopy(path string, f func(k, v []byte) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 256<<10)
	r := &crcReader{r: br, h: crc32.New(castagnoli)}
	magic := make([]byte, len(copyMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != copyMagic {
		return fmt.Errorf("not a store copy (%v)", err)
	}
	var n uint64
	field := func() ([]byte, error) {
		l, err := binary.ReadUvarint(r)
		if err != nil || l == 0 {
			return nil, err
		}
		b := make([]byte, l)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for {
		k, err := field()
		if err != nil {
			return fmt.Errorf("key %d: %w", n, err)
		}
		if k == nil {
			break
		}
		v, err := field()
		if err != nil {
			return fmt.Errorf("value %d: %w", n, err)
		}
		n++
		if f != nil {
			if err := f(k, v); err != nil {
				return err
			}
		}
	}
	var count [8]byte
	if _, err := io.ReadFull(r, count[:]); err != nil {
		return fmt.Errorf("count: %w", err)
	}
	if c := binary.BigEndian.Uint64(count[:]); c != n {
		return fmt.Errorf("%d keys, the copy says %d", n, c)
	}
	sum := r.h.Sum32()
	var want [4]byte
	if _, err := io.ReadFull(br, want[:]); err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	if binary.BigEndian.Uint32(want[:]) != sum {
		return errors.New("checksum mismatch")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return errors.New("bytes after the checksum")
	}
	return nil
}

// crcReader sums what is read through it.
type crcReader struct {
	r *bufio.Reader
	h hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.h.Write([]byte{b})
	}
	return b, err
}

// loadCopy empties the store and loads the copy at path into it, then
// removes the copy. It checks the copy first: a damaged one leaves the store
// as it is and fails with ErrCorrupt.
func (b *badgerStore) loadCopy(path string) error {
	if err := readCopy(path, nil); err != nil {
		return fmt.Errorf("rewrite store: %w: copy %s: %w", ErrCorrupt, path, err)
	}
	if err := b.db.DropAll(); err != nil {
		return b.halfDone(path, fmt.Errorf("empty it: %w", err))
	}
	hook("rewrite-dropped")
	marker := binary.BigEndian.AppendUint32(nil, schemaRewriting)
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, marker) }); err != nil {
		return b.halfDone(path, err)
	}
	schema := binary.BigEndian.AppendUint32(nil, SchemaVersion)
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	err := readCopy(path, func(k, v []byte) error {
		if string(k) == string(keySchema) {
			schema = v
			return nil
		}
		return wb.Set(k, v)
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return b.halfDone(path, fmt.Errorf("load the copy: %w", err))
	}
	hook("rewrite-loaded")
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(keySchema, schema) }); err != nil {
		return b.halfDone(path, err)
	}
	if err := b.db.Sync(); err != nil {
		return b.halfDone(path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("rewrite store: %w", err)
	}
	return syncDir(b.dir)
}

// halfDone marks the store broken after a rewrite emptied it and could not
// load the copy back: nothing may read or write it until an open has loaded
// the copy (badgerStore.broken).
func (b *badgerStore) halfDone(path string, err error) error {
	b.broken = fmt.Errorf("%w: the store was emptied for a rewrite and not loaded back (%v); opening it again loads %s", errConn, err, path)
	return fmt.Errorf("rewrite store: %w", b.broken)
}

// finishRewrite loads the copy of a rewrite a killed process began, if there
// is one. It runs while the store opens, before anything reads it.
func (b *badgerStore) finishRewrite() error {
	final := filepath.Join(b.dir, rewriteFile)
	if err := os.Remove(final + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // the store was never emptied for a copy not renamed
	}
	if _, err := os.Stat(final); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	b.log.Warn("loading the copy of a rewrite of the store that a killed process began", "copy", final)
	return b.loadCopy(final)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

package state

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Key layout. Numbers are big-endian so that prefix scans return them in
// order; the session id is followed by a 0 byte so that no id is a prefix of
// another's keys.
//
//	meta/schema                  uint32 BE: SchemaVersion of the writer
//	s/<id>\x00session            Session JSON, without Original
//	s/<id>\x00original           Config JSON, written once
//	s/<id>\x00turn/<u32 BE>      Turn JSON
//	l/<id>                       listing record (summary) JSON, kept current by every write
//	n/<native id>                client id
//	a/<agent name>               AgentInfo JSON
//	d/<id>                       tombstone of a deleted session: empty, the key is all of it
//	p/<id>                       a delete not yet finished: deletion JSON (purge.go)
//
// Every prefix is its own first byte and no two share one (m, s, l, n, a, d,
// p), so no id or name can make a key of one kind read as another. d/ and p/
// came later without a new SchemaVersion: an older version never reads
// them, and everything it does read is laid out as before.
var keySchema = []byte("meta/schema")

func sessionKey(id, part string) []byte { return []byte("s/" + id + "\x00" + part) }
func turnPrefix(id string) []byte       { return sessionKey(id, "turn/") }
func turnKey(id string, i int) []byte {
	return binary.BigEndian.AppendUint32(turnPrefix(id), uint32(i))
}
func sessionPrefix(id string) []byte  { return sessionKey(id, "") }
func listKey(id string) []byte        { return []byte("l/" + id) }
func nativeKey(id string) []byte      { return []byte("n/" + id) }
func agentKey(name string) []byte     { return []byte("a/" + name) }
func deadKey(id string) []byte        { return []byte("d/" + id) }
func pendingKey(id string) []byte     { return []byte("p/" + id) }
func listPrefix() []byte              { return []byte("l/") }
func nativePrefix() []byte            { return []byte("n/") }
func pendingPrefix() []byte           { return []byte("p/") }
func errorsIsNotFound(err error) bool { return errors.Is(err, badger.ErrKeyNotFound) }

// isLockErr says whether badger failed to take its directory lock: a flock
// of the directory on unix, an exclusive open of dir/LOCK on Windows
// (badger's dir_unix.go and dir_windows.go word them differently).
func isLockErr(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot acquire directory lock") || strings.Contains(msg, "Cannot create lock file")
}

// listRec is what l/<id> holds: the summary without Live (which is about
// processes, not data), and whether the session record exists yet (a turn may
// land first).
type listRec struct {
	Summary
	HasSession bool `json:"hasSession,omitempty"`
}

// errLocked means another process owns the directory. It never leaves this
// package: Open turns it into "connect to the owner".
var errLocked = errors.New("state dir locked by another process")

// badgerStore is the store on disk. Each write is one transaction, which is in
// badger's memory-mapped log when Update returns and so survives a process kill
// (go-libs.md §4 "Crash safety"); Flush has nothing left to wait for.
type badgerStore struct {
	db  *badger.DB
	dir string
	log *slog.Logger

	// rw is held for reading by every call, and for writing by
	// DeleteSession and Close. badger deletes a table or a memtable log
	// only once no reader holds it, and DropAll is not safe against reads at
	// all, so a delete runs alone: when it returns, the files are gone.
	rw sync.RWMutex
	// broken is set, under rw, when a rewrite emptied the store and could
	// not load it back. It wraps errConn: the shared store then lets go of
	// this handle and opens the store again, and the open loads the copy.
	broken error

	mu   sync.Mutex
	live map[string]bool // sessions written through this handle

	// feed tells watchers which sessions changed (feed.go): every write
	// of the directory lands through this handle.
	feed feed

	stop chan struct{}
	wg   sync.WaitGroup
}

// badgerOptions is the small-footprint set measured in go-libs.md §4, with
// a smaller memtable and tables still: each memtable's arena sits in the Go heap (the
// default 64 MiB would raise the relay's GC target by as much), and a
// sidecar's record is kilobytes a turn. 2 MiB keeps the 64 KiB value
// threshold under badger's 15% bound and the peak RSS after 10,000 turns
// under 64 MiB.
func badgerOptions(dir string, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithMemTableSize(2 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithBaseTableSize(1 << 20).
		WithBaseLevelSize(4 << 20).
		WithValueLogFileSize(32 << 20).
		WithValueThreshold(64 << 10).
		WithCompression(options.None). // must precede BlockCacheSize(0), which panics with compression on
		WithBlockCacheSize(0).
		WithNumCompactors(2). // 1 is rejected, 0 stops compaction
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{log})
}

// openBadger opens (creating) the store in dir. It returns an error wrapping
// errLocked when another process holds the directory, ErrNewerSchema for a
// newer layout and ErrCorrupt for files badger cannot read.
func openBadger(dir string, log *slog.Logger) (_ *badgerStore, err error) {
	if err := makeDir(dir); err != nil {
		return nil, err
	}
	defer func() {
		// badger panics on some damage instead of returning an error; a damaged
		// store must not take the relay down with it.
		if r := recover(); r != nil {
			err = fmt.Errorf("open store %s: %w: panic: %v", dir, ErrCorrupt, r)
		}
	}()
	if err := checkTables(dir); err != nil {
		if lockHeld(dir) {
			// Another process owns the store and is rewriting its tables
			// (a takeover replays and compacts): what was read mid-change
			// is not damage. The caller reaches that owner instead.
			return nil, fmt.Errorf("open store %s: %w: tables changing under their owner: %v", dir, errLocked, err)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := checkRoom(dir); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	db, err := badger.Open(badgerOptions(dir, log))
	if err != nil {
		switch {
		case isNoSpace(err):
			return nil, fmt.Errorf("open store %s: %w: %w", dir, ErrNoSpace, err)
		case isLockErr(err):
			// badger wraps the flock error with %+v, not %w (go-libs.md §4), so
			// the text is all there is to match.
			return nil, fmt.Errorf("open store %s: %w: %v", dir, errLocked, err)
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		return nil, fmt.Errorf("open store %s: %w: %w", dir, ErrCorrupt, err)
	}
	b := &badgerStore{db: db, dir: dir, log: log, live: map[string]bool{}, stop: make(chan struct{})}
	// An interrupted rewrite is finished before anything reads the store:
	// until then it may be empty (rewrite.go).
	if err := b.finishRewrite(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := b.checkSchema(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := b.finishDeletes(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := tightenFiles(dir); err != nil {
		log.Warn("tighten state file permissions", "dir", dir, "err", err)
	}
	b.wg.Add(1)
	go b.tightenLoop(log)
	return b, nil
}

// minRoom is the free space the store needs before it opens: badger's two
// memtable logs and its value log are sparse files it fills through memory
// maps (go-libs.md §4: 16 MiB each and 64 MiB), with room to spare.
const minRoom = 128 << 20

// checkRoom refuses a disk too full for badger's memory-mapped files.
func checkRoom(dir string) error {
	free, err := freeSpace(dir)
	if err != nil {
		return nil // nothing to judge by: let badger try
	}
	if free < minRoom {
		return fmt.Errorf("%w: %d MiB free, %d MiB needed", ErrNoSpace, free>>20, minRoom>>20)
	}
	return nil
}

// tightenLoop re-applies 0600 to files badger creates while open (new memtables
// and tables); see tightenFiles. It exits on Close.
func (b *badgerStore) tightenLoop(log *slog.Logger) {
	defer b.wg.Done()
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if err := tightenFiles(b.dir); err != nil {
				log.Warn("tighten state file permissions", "dir", b.dir, "err", err)
			}
		}
	}
}

func (b *badgerStore) checkSchema() error {
	return b.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(keySchema)
		if errorsIsNotFound(err) {
			return txn.Set(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
		}
		if err != nil {
			return fmt.Errorf("%w: read schema version: %w", ErrCorrupt, err)
		}
		v, err := item.ValueCopy(nil)
		if err != nil || len(v) != 4 {
			return fmt.Errorf("%w: schema version %x: %v", ErrCorrupt, v, err)
		}
		if n := binary.BigEndian.Uint32(v); n == schemaRewriting {
			return fmt.Errorf("%w: a rewrite of the store was interrupted and its copy (%s) is gone", ErrCorrupt, rewriteFile)
		} else if n > SchemaVersion {
			return fmt.Errorf("%w: schema %d, this version reads up to %d", ErrNewerSchema, n, SchemaVersion)
		}
		return nil
	})
}

func getJSON(txn *badger.Txn, key []byte, v any) (bool, error) {
	item, err := txn.Get(key)
	if errorsIsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, item.Value(func(b []byte) error { return json.Unmarshal(b, v) })
}

// use takes b.rw for reading, unless a rewrite that failed half way left the
// store half loaded: then it fails, and the caller must not touch it.
func (b *badgerStore) use() error {
	b.rw.RLock()
	if b.broken != nil {
		b.rw.RUnlock()
		return b.broken
	}
	return nil
}

// refuseDeleted fails a write for a session that has a tombstone.
func refuseDeleted(txn *badger.Txn, id string) error {
	_, err := txn.Get(deadKey(id))
	if errorsIsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return ErrDeleted
}

// missing is the error for a session with no record: gone when it has a
// tombstone, else ErrNotFound.
func missing(txn *badger.Txn, id string) error {
	if err := refuseDeleted(txn, id); errors.Is(err, ErrDeleted) {
		return errGone
	} else if err != nil {
		return err
	}
	return ErrNotFound
}

func setJSON(txn *badger.Txn, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

// PutSession writes s and counts it live: this process has it open.
func (b *badgerStore) PutSession(ctx context.Context, s *Session) error {
	if err := b.putSession(s); err != nil {
		return err
	}
	b.claim(s.ClientID)
	return nil
}

// claim marks sessions live for this handle's listings.
func (b *badgerStore) claim(ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.live[id] = true
	}
}

// putSession writes s without claiming it: the server uses it for writes from
// other processes, whose liveness it tracks per connection.
func (b *badgerStore) putSession(s *Session) error {
	if err := b.use(); err != nil {
		return fmt.Errorf("put session %s: %w", s.ClientID, err)
	}
	defer b.rw.RUnlock()
	err := b.db.Update(func(txn *badger.Txn) error {
		if err := refuseDeleted(txn, s.ClientID); err != nil {
			return err
		}
		if s.Original != nil {
			var old Config
			ok, err := getJSON(txn, sessionKey(s.ClientID, "original"), &old)
			if err != nil {
				return err
			}
			if ok && !sameConfig(&old, clone(s.Original)) {
				return ErrOriginalExists
			}
			if !ok {
				if err := setJSON(txn, sessionKey(s.ClientID, "original"), s.Original); err != nil {
					return err
				}
			}
		}
		rec := *s
		rec.Original = nil
		if err := setJSON(txn, sessionKey(s.ClientID, "session"), &rec); err != nil {
			return err
		}
		for _, n := range nativeIDs(s) {
			if err := txn.Set(nativeKey(n), []byte(s.ClientID)); err != nil {
				return err
			}
		}
		var l listRec
		if _, err := getJSON(txn, listKey(s.ClientID), &l); err != nil {
			return err
		}
		l.ID, l.Agent, l.AgentName, l.Cwd, l.HasSession = s.ClientID, s.Agent, s.AgentName, s.Cwd, true
		l.Closed, l.Title = s.Closed != nil, s.Title
		l.LastActivity = later(l.LastActivity, s.Updated)
		return setJSON(txn, listKey(s.ClientID), &l)
	})
	if err != nil {
		return fmt.Errorf("put session %s: %w", s.ClientID, err)
	}
	b.feed.publish(s.ClientID)
	return nil
}

func (b *badgerStore) Session(ctx context.Context, id string) (*Session, error) {
	if err := b.use(); err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	defer b.rw.RUnlock()
	var s Session
	err := b.db.View(func(txn *badger.Txn) error {
		ok, err := getJSON(txn, sessionKey(id, "session"), &s)
		if err != nil {
			return err
		}
		if !ok {
			return missing(txn, id)
		}
		var o Config
		if ok, err = getJSON(txn, sessionKey(id, "original"), &o); ok {
			s.Original = &o
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	return &s, nil
}

func (b *badgerStore) Sessions(ctx context.Context) ([]Summary, error) {
	if err := b.use(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer b.rw.RUnlock()
	var out []Summary
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: listPrefix(), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var l listRec
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &l) }); err != nil {
				return err
			}
			if l.HasSession {
				out = append(out, l.Summary)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	b.mu.Lock()
	for i := range out {
		out[i].Live = b.live[out[i].ID] && !out[i].Closed
	}
	b.mu.Unlock()
	sortSummaries(out)
	return out, nil
}

func (b *badgerStore) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := checkTurn(sessionID, t); err != nil {
		return err
	}
	if err := b.use(); err != nil {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, err)
	}
	defer b.rw.RUnlock()
	err := b.db.Update(func(txn *badger.Txn) error {
		return b.putTurn(txn, sessionID, t)
	})
	if err != nil {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, err)
	}
	b.feed.publish(sessionID)
	return nil
}

// putTurn writes t and keeps the listing's kept-turn count and last activity
// current.
func (b *badgerStore) putTurn(txn *badger.Txn, sessionID string, t *Turn) error {
	if err := refuseDeleted(txn, sessionID); err != nil {
		return err
	}
	var old Turn
	had, err := getJSON(txn, turnKey(sessionID, t.Index), &old)
	if err != nil {
		return err
	}
	var l listRec
	if _, err := getJSON(txn, listKey(sessionID), &l); err != nil {
		return err
	}
	l.ID = sessionID
	if had && old.Status != TurnRolledBack {
		l.Turns--
	}
	if t.Status != TurnRolledBack {
		l.Turns++
	}
	l.LastActivity = later(l.LastActivity, t.activity())
	v, err := turnJSON(t)
	if err != nil {
		return err
	}
	if err := txn.Set(turnKey(sessionID, t.Index), v); err != nil {
		return err
	}
	return setJSON(txn, listKey(sessionID), &l)
}

func (b *badgerStore) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	if err := b.use(); err != nil {
		return nil, fmt.Errorf("list turns %s: %w", sessionID, err)
	}
	defer b.rw.RUnlock()
	return b.turns(sessionID)
}

func (b *badgerStore) turns(sessionID string) ([]Turn, error) {
	var out []Turn
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: turnPrefix(sessionID), PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var t Turn
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &t) }); err != nil {
				return err
			}
			out = append(out, t)
		}
		if len(out) == 0 {
			if err := missing(txn, sessionID); errors.Is(err, ErrDeleted) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list turns %s: %w", sessionID, err)
	}
	return out, nil
}

// RollBack rewrites the turns after keep one transaction each: a turn can be
// large, and a transaction is limited to 15% of the memtable (ErrTxnTooBig).
// Being interrupted halfway is fine; the call is idempotent.
func (b *badgerStore) RollBack(ctx context.Context, sessionID string, keep int) error {
	if err := b.use(); err != nil {
		return fmt.Errorf("roll back %s: %w", sessionID, err)
	}
	defer b.rw.RUnlock()
	turns, err := b.turns(sessionID)
	if errors.Is(err, ErrDeleted) {
		err = ErrDeleted // a write: refused, not "not found"
	}
	if err != nil {
		return fmt.Errorf("roll back %s: %w", sessionID, err)
	}
	for i := range turns {
		t := &turns[i]
		if t.Index <= keep || t.Status == TurnRolledBack {
			continue
		}
		t.Status = TurnRolledBack
		if err := b.db.Update(func(txn *badger.Txn) error { return b.putTurn(txn, sessionID, t) }); err != nil {
			return fmt.Errorf("roll back %s turn %d: %w", sessionID, t.Index, err)
		}
		b.feed.publish(sessionID)
	}
	return nil
}

func (b *badgerStore) ClientID(ctx context.Context, nativeID string) (string, error) {
	if err := b.use(); err != nil {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, err)
	}
	defer b.rw.RUnlock()
	var id string
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(nativeKey(nativeID))
		if errorsIsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		id = string(v)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, err)
	}
	return id, nil
}

func (b *badgerStore) PutAgent(ctx context.Context, a *AgentInfo) error {
	if err := checkAgent(a); err != nil {
		return err
	}
	if err := b.use(); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	defer b.rw.RUnlock()
	err := b.db.Update(func(txn *badger.Txn) error { return setJSON(txn, agentKey(a.Name), a) })
	if err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	return nil
}

func (b *badgerStore) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	if err := b.use(); err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	defer b.rw.RUnlock()
	var a AgentInfo
	err := b.db.View(func(txn *badger.Txn) error {
		ok, err := getJSON(txn, agentKey(name), &a)
		if err == nil && !ok {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, err)
	}
	return &a, nil
}

// Flush has nothing to wait for: every write is in badger's log on return.
func (b *badgerStore) Flush(ctx context.Context) error { return nil }

func (b *badgerStore) Close() error {
	close(b.stop)
	b.wg.Wait()
	b.rw.Lock() // a delete in progress finishes first
	defer b.rw.Unlock()
	err := b.db.Close()
	if terr := tightenFiles(b.dir); err == nil && terr != nil && !errors.Is(terr, fs.ErrNotExist) {
		err = terr
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", b.dir, err)
	}
	return nil
}

// badgerLogger routes badger's log to the sidecar's logger. badger's default
// logger writes to stderr, which editors show to the user (DESIGN.md
// "Processes"). Its Info and Debug chatter goes out at Debug level, so the
// usual Info-level handler keeps warnings and errors only.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) log(level slog.Level, format string, args []any) {
	b.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}
func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug-4, f, a) }

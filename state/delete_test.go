package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Marks in a deleted session's content. The tests look for them, byte for
// byte, in every file of the state directory. They need no JSON escaping,
// so the bytes on disk are the marks themselves.
const (
	promptMark = "PromptMark7f3a1"
	answerMark = "AnswerMark9c1e2"
	cwdMark    = "CwdMark51bd3"
	bigMark    = "BigMark0d2f4"
)

var marks = []string{promptMark, answerMark, cwdMark, bigMark}

// The recorder keeps up to 1 MiB of prompt text and 1 MiB of prompt blocks
// (intercept/record.go maxRecordedText), and an answer up to the largest
// handoff, 64 KiB.
const (
	maxPromptText = 1 << 20
	maxAnswer     = 64 << 10
)

// writeSecret writes session id with marked content: three small turns,
// the last rolled back, and with big one more turn as large as the
// recorder keeps, whose record goes to badger's value log.
func writeSecret(t *testing.T, s Store, id string, big bool) {
	t.Helper()
	if err := putSecret(t.Context(), s, id, big); err != nil {
		t.Fatal(err)
	}
}

func putSecret(ctx context.Context, s Store, id string, big bool) error {
	sess := sampleSession(id)
	sess.Cwd = "/home/u/" + cwdMark
	if err := s.PutSession(ctx, sess); err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		tr := sampleTurn(i, TurnCompleted)
		tr.PromptText = fmt.Sprintf("question %d %s", i, promptMark)
		tr.Prompt = json.RawMessage(fmt.Sprintf(`[{"type":"text","text":"question %d %s"}]`, i, promptMark))
		tr.Answer = fmt.Sprintf("answer %d %s", i, answerMark)
		if err := s.PutTurn(ctx, id, tr); err != nil {
			return err
		}
	}
	if err := s.RollBack(ctx, id, 2); err != nil {
		return err
	}
	if big {
		text := strings.Repeat(bigMark+" pasted file line\n", maxPromptText/(len(bigMark)+18))
		blocks, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
		tr := sampleTurn(4, TurnCompleted)
		tr.PromptText, tr.Prompt = text, blocks
		tr.Answer = strings.Repeat(answerMark+" ", maxAnswer/(len(answerMark)+1))
		if err := s.PutTurn(ctx, id, tr); err != nil {
			return err
		}
	}
	// A second version of the record.
	sess.Updated = sess.Updated.Add(time.Hour)
	return s.PutSession(ctx, sess)
}

// writeOthers writes sessions prefix-from..prefix-(to-1) with three turns
// of some 16 KiB each (some fifty sessions fill a few memtables, and push
// what came before down the tree); every 25th has a large turn too, so the
// value log holds what a rewrite must keep.
func writeOthers(t *testing.T, s Store, prefix string, from, to int) {
	t.Helper()
	if err := putOthers(t.Context(), s, prefix, from, to); err != nil {
		t.Fatal(err)
	}
}

func putOthers(ctx context.Context, s Store, prefix string, from, to int) error {
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if err := s.PutSession(ctx, sampleSession(id)); err != nil {
			return err
		}
		for j := 1; j <= 3; j++ {
			tr := sampleTurn(j, TurnCompleted)
			tr.Answer = strings.Repeat("other answer ", 1250)
			if err := s.PutTurn(ctx, id, tr); err != nil {
				return err
			}
		}
		if i%25 == 0 {
			tr := sampleTurn(4, TurnCompleted)
			tr.PromptText = bigOther(id)
			if err := s.PutTurn(ctx, id, tr); err != nil {
				return err
			}
		}
	}
	return nil
}

func bigOther(id string) string { return strings.Repeat("kept "+id+" ", 20<<10) }

// checkOthers checks what writeOthers wrote, the large turns included.
func checkOthers(t *testing.T, s Store, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		turns, err := s.Turns(t.Context(), id)
		want := 3
		if i%25 == 0 {
			want = 4
		}
		if err != nil || len(turns) != want {
			t.Errorf("Turns(%s) = %d turns, %v, want %d", id, len(turns), err, want)
			continue
		}
		if want == 4 && turns[3].PromptText != bigOther(id) {
			t.Errorf("Turns(%s): the large turn changed", id)
		}
		if _, err := s.Session(t.Context(), id); err != nil {
			t.Errorf("Session(%s): %v", id, err)
		}
	}
}

// filesHolding lists "file: mark" for every mark found in a regular file
// under dir, at any depth.
func filesHolding(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		for _, m := range marks {
			if bytes.Contains(b, []byte(m)) {
				rel, _ := filepath.Rel(dir, path)
				found = append(found, rel+": "+m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func checkNoTrace(t *testing.T, dir, when string) {
	t.Helper()
	if found := filesHolding(t, dir); len(found) > 0 {
		t.Errorf("%s: the deleted session is still on disk: %v", when, found)
	}
}

// pushDown moves everything in b's memtables and level 0 to the levels
// below: DropPrefix flushes the memtables and compacts level 0 down, here
// for a key of its own.
func pushDown(t *testing.T, b *badgerStore) {
	t.Helper()
	k := []byte("x/push-down")
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(k, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.db.DropPrefix(k); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteLeavesNoTrace: after DeleteSession returns, no file of the state
// directory holds any of the deleted session's text, whether it sat in a
// memtable log, in tables at several levels or in the value log; nor after
// the store is closed and opened again. Everything else is still there.
func TestDeleteLeavesNoTrace(t *testing.T) {
	for _, tt := range []struct {
		name string
		big  bool
		via  string
	}{
		{"small turns", false, "badger"},
		{"a large turn", true, "badger"},
		{"a large turn, shared owner", true, "owner"},
		{"a large turn, shared client", true, "client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var s Store
			var bs *badgerStore // the store on disk, under s
			var closeAll func()
			switch tt.via {
			case "badger":
				b, err := openBadger(dir, testLogger(t))
				if err != nil {
					t.Fatal(err)
				}
				s, bs, closeAll = b, b, func() { closeOK(t, b) }
			default:
				owner, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := owner.link.current()
				bs = b.(*owned).badgerStore
				s, closeAll = owner, func() { closeOK(t, owner) }
				if tt.via == "client" {
					client, err := Open(t.Context(), dir, Options{Logger: testLogger(t)})
					if err != nil {
						t.Fatal(err)
					}
					if client.Owner() {
						t.Fatal("second Open is the owner")
					}
					s, closeAll = client, func() { closeOK(t, client); closeOK(t, owner) }
				}
			}
			// The secret's first versions go down to the last level of the
			// tree, the next ones to level 0, the last to the memtable.
			writeOthers(t, s, "early", 0, 40)
			writeSecret(t, s, "secret", tt.big)
			writeOthers(t, s, "late", 0, 60)
			if err := s.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			pushDown(t, bs)
			writeOthers(t, s, "late", 60, 120)
			writeSecret(t, s, "secret", tt.big)
			writeOthers(t, s, "late", 120, 160)
			last := sampleSession("secret")
			last.Cwd = "/home/u/" + cwdMark
			mustPut(t, s, last)
			mustPut(t, s, sampleSession("secret2"))
			if err := s.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(filesHolding(t, dir)) == 0 {
				t.Fatal("no mark on disk before the delete: the test would prove nothing")
			}

			if err := s.DeleteSession(t.Context(), "secret"); err != nil {
				t.Fatalf("DeleteSession: %v", err)
			}
			checkNoTrace(t, dir, "on return")
			checkGone(t, s, "secret", "n-secret-1", "n-secret-2")
			checkOthers(t, s, "early", 0, 40)
			checkOthers(t, s, "late", 0, 160)
			closeAll()
			checkNoTrace(t, dir, "after Close")

			b, err := openBadger(dir, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer closeOK(t, b)
			checkNoTrace(t, dir, "after reopening")
			checkGone(t, b, "secret", "n-secret-1", "n-secret-2")
			checkOthers(t, b, "early", 0, 40)
			checkOthers(t, b, "late", 0, 160)
			if _, err := b.Session(t.Context(), "secret2"); err != nil {
				t.Errorf("Session(secret2), whose id the deleted one's is a prefix of: %v", err)
			}
			if err := b.PutSession(t.Context(), sampleSession("secret")); !errors.Is(err, ErrDeleted) {
				t.Errorf("PutSession(secret) after reopening = %v, want ErrDeleted", err)
			}
		})
	}
}

// BenchmarkDeleteSession measures a delete on a store of 200 sessions of
// three turns each, with the deleted session's turns small (the tree alone)
// or one of them large (in the value log, so the store is rewritten).
func BenchmarkDeleteSession(b *testing.B) {
	for _, big := range []bool{false, true} {
		b.Run(fmt.Sprintf("large=%v", big), func(b *testing.B) {
			dir := b.TempDir()
			st, err := openBadger(dir, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			for i := range 200 {
				if err := writeSample(ctx, st, fmt.Sprintf("s-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			for b.Loop() {
				b.StopTimer()
				n++
				id := fmt.Sprintf("victim-%d", n)
				if err := writeSample(ctx, st, id); err != nil {
					b.Fatal(err)
				}
				if big {
					tr := sampleTurn(4, TurnCompleted)
					tr.PromptText = strings.Repeat("x", 200<<10)
					if err := st.PutTurn(ctx, id, tr); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := st.DeleteSession(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDeleteKilled: a process killed at any step of a delete, a rewrite of
// the store included, leaves a store that the next open finishes: the
// session is gone from every file, and every other session is whole.
func TestDeleteKilled(t *testing.T) {
	for _, step := range []string{"delete-noted", "delete-dropped", "rewrite-saved", "rewrite-dropped", "rewrite-loaded", "delete-purged"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			h := startHelper(t, "delete", dir, "ACP_STATE_TEST_STEP="+step)
			if h.out.Scan() {
				t.Fatalf("helper: %q; the delete never reached step %s", h.out.Text(), step)
			}
			var ee *exec.ExitError
			if err := h.cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("helper exit: %v, want status 3 (killed at %s)", err, step)
			}
			b, err := openBadger(dir, testLogger(t))
			if err != nil {
				t.Fatalf("open after a kill at %s: %v", step, err)
			}
			defer closeOK(t, b)
			checkNoTrace(t, dir, "after the open that finished the delete")
			checkGone(t, b, "secret", "n-secret-1", "n-secret-2")
			checkOthers(t, b, "early", 0, 40)
			if err := b.PutTurn(t.Context(), "secret", sampleTurn(9, TurnCompleted)); !errors.Is(err, ErrDeleted) {
				t.Errorf("PutTurn(secret) = %v, want ErrDeleted", err)
			}
		})
	}
}

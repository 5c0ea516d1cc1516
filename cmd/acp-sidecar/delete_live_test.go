//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// filesHolding lists "file: mark" for every mark found in a regular file
// under dir, at any depth.
func filesHolding(t *testing.T, dir string, marks ...string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
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

// TestDeleteWhileSidecarRuns: a running sidecar owns the store and has the
// session open; `acp-sidecar delete` (the built binary) goes through its
// socket, and when it has printed "deleted", no file of the state dir holds
// the conversation, a large prompt (in badger's value log) included. The
// sidecar, which still runs the session, records nothing more of it, and the
// store opened afresh has no trace of it.
func TestDeleteWhileSidecarRuns(t *testing.T) {
	dir := t.TempDir()
	const mark, bigMark = "DeleteMark31f9", "BigDeleteMark77c0"
	marks := []string{mark, bigMark}
	r := startRecordPeer(t, dir, "del-")
	r.prompt("echo: tell me about " + mark)
	r.prompt("echo: " + strings.Repeat(bigMark+" a pasted file\n", 6000)) // some 130 KiB
	keep := startRecordPeer(t, dir, "keep-")
	keep.prompt("a kept conversation")
	// The large prompt's record is in badger's value log, the rest in a
	// memtable log: the delete has both to clear.
	found := filesHolding(t, dir, marks...)
	if !strings.Contains(strings.Join(found, ","), ".vlog: "+bigMark) || !strings.Contains(strings.Join(found, ","), ".mem: "+mark) {
		t.Fatalf("marks on disk before the delete: %v; want them in a value log and a memtable log, or the test proves little", found)
	}

	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(boundedCtx(t), "acp-sidecar", args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("acp-sidecar %v: %v", args, err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	out, errOut, code := run("delete", r.sid, "--state-dir", dir)
	if code != 0 || out != fmt.Sprintf("deleted %s\n", r.sid) {
		t.Fatalf("delete: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if found := filesHolding(t, dir, marks...); len(found) > 0 {
		t.Errorf("after delete returned, the conversation is still on disk: %v", found)
	}
	if _, errOut, code := run("delete", r.sid, "--state-dir", dir); code != 1 || !strings.Contains(errOut, "deleted before") {
		t.Errorf("a second delete: exit %d, stderr %q; want 1, deleted before", code, errOut)
	}
	if _, errOut, code := run("show", r.sid, "--state-dir", dir); code != 1 || !strings.Contains(errOut, "no session") {
		t.Errorf("show after the delete: exit %d, stderr %q", code, errOut)
	}

	// The sidecar still runs the session: its next turn is relayed, and
	// the store refuses to record it.
	const lateMark = "LateMark0be4"
	r.prompt("echo: written back? " + lateMark)
	r.finish()
	keep.finish()
	out, _, code = run("sessions", "--json", "--state-dir", dir) // opens badger itself now
	if code != 0 || strings.Contains(out, r.sid) || !strings.Contains(out, keep.sid) {
		t.Errorf("sessions after both sidecars exited: exit %d, %s; want %s alone", code, out, keep.sid)
	}
	if found := filesHolding(t, dir, append(marks, lateMark)...); len(found) > 0 {
		t.Errorf("after the sidecars exited, the conversation is on disk again: %v", found)
	}
	if turns := showTurns(t, dir, keep.sid); len(turns) != 1 || turns[0].Prompt != "a kept conversation" {
		t.Errorf("the kept session's turns: %+v", turns)
	}
}

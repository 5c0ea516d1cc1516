package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeleteCommand: what `delete` prints and its exit status, in process,
// on a closed store.
func TestDeleteCommand(t *testing.T) {
	dir := seededShowDir(t)
	out, errOut, code := runShowCLI(t, "delete", "s-orig", "--state-dir", dir)
	if code != 0 || out != "deleted s-orig\n" || errOut != "" {
		t.Fatalf("delete s-orig: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, _ = runShowCLI(t, "sessions", "--json", "--state-dir", dir)
	var list []struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].SessionID != "s-none" {
		t.Errorf("sessions after the delete: %s (%v); want s-none alone", out, err)
	}
	if _, errOut, code := runShowCLI(t, "show", "s-orig", "--state-dir", dir); code != 1 || !strings.Contains(errOut, `no session "s-orig"`) {
		t.Errorf("show s-orig after the delete: exit %d, stderr %q", code, errOut)
	}

	// Twice, an unknown id and a known one: each is reported, the known one
	// is deleted, and the status says something failed.
	out, errOut, code = runShowCLI(t, "--state-dir", dir, "delete", "s-orig", "nope", "s-none")
	if code != 1 || out != "deleted s-none\n" {
		t.Errorf("delete s-orig nope s-none: exit %d, stdout %q; want 1 and s-none deleted", code, out)
	}
	for _, want := range []string{`no session "s-orig"`, "deleted before", `no session "nope"`, "acp-sidecar sessions lists them"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}

	// No id is a usage error; a state dir that does not exist has no
	// sessions and is not created.
	if _, errOut, code := runShowCLI(t, "delete", "--state-dir", dir); code != 2 || !strings.Contains(errOut, "usage: acp-sidecar delete SESSION") {
		t.Errorf("delete with no id: exit %d, stderr %q; want 2 and the usage", code, errOut)
	}
	absent := filepath.Join(t.TempDir(), "absent")
	if _, errOut, code := runShowCLI(t, "delete", "x", "--state-dir", absent); code != 1 || !strings.Contains(errOut, `no session "x"`) {
		t.Errorf("delete in an absent dir: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(absent); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("delete created %s: %v", absent, err)
	}
}

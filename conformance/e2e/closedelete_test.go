//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCloseDelete: session/close, session/delete and `acp-sidecar delete` on
// a real agent (DESIGN.md "A session's whole life"). A closed session is
// closed in the record and reopens, on its config, with the editor's load;
// a deleted one leaves nothing of its conversation in any file of the state
// dir, whether the editor deleted it or the shell did.
func runCloseDelete(t *testing.T, la liveAgent) {
	s := la.start(t)
	s.prompt("A turn before the close.")

	step(t, s.a, "session/close", map[string]any{"sessionId": s.sid})
	if row := s.sessionRow(); !row.Closed || row.Live {
		t.Errorf("sessions after session/close: %+v, want closed and not live", row)
	}
	step(t, s.a, "session/load", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "mcpServers": []any{}})
	s.prompt("A turn after the reopen.")
	if req := s.turnRequest("A turn after the reopen."); req.Model != la.wireModel || req.Effort != la.effort {
		t.Errorf("the turn after the reopen ran on model %q effort %q, want %q %q", req.Model, req.Effort, la.wireModel, la.effort)
	}
	if row := s.sessionRow(); row.Closed {
		t.Errorf("sessions after the reopen: %+v, want it open again", row)
	}

	const editorSecret = "zebra-e2e-editor-5521"
	s.prompt("Remember " + editorSecret + ".")
	step(t, s.a, "session/delete", map[string]any{"sessionId": s.sid})
	if _, _, err := s.cli("show", s.sid); err == nil {
		t.Error("show succeeds after session/delete")
	}
	if held := holding(t, s.state, editorSecret); len(held) > 0 {
		t.Errorf("after session/delete the prompt is still in %v", held)
	}

	const shellSecret = "zebra-e2e-shell-7733"
	sid, _ := newSession(t, s.a, s.cwd)
	s.sid = sid
	s.prompt("Remember " + shellSecret + ".")
	s.closeClient()
	if out, errOut, err := s.cli("delete", sid); err != nil || !strings.Contains(out, "deleted "+sid) {
		t.Fatalf("acp-sidecar delete %s: %v\nstdout: %s\nstderr: %s", sid, err, out, errOut)
	}
	if held := holding(t, s.state, shellSecret); len(held) > 0 {
		t.Errorf("after acp-sidecar delete the prompt is still in %v", held)
	}
}

// sessionRow is the session's row in `sessions --json`.
func (s *sidecarSession) sessionRow() (row struct {
	SessionID    string `json:"sessionId"`
	Live, Closed bool
}) {
	s.t.Helper()
	out, errOut, err := s.cli("sessions", "--json")
	if err != nil {
		s.t.Fatalf("sessions --json: %v\n%s", err, errOut)
	}
	var rows []struct {
		SessionID string `json:"sessionId"`
		Live      bool   `json:"live"`
		Closed    bool   `json:"closed"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		s.t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	for _, r := range rows {
		if r.SessionID == s.sid {
			row.SessionID, row.Live, row.Closed = r.SessionID, r.Live, r.Closed
			return row
		}
	}
	s.t.Fatalf("sessions --json lacks %s:\n%s", s.sid, out)
	return row
}

// holding lists the files under dir that contain mark.
func holding(t *testing.T, dir, mark string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a file badger removed while we walked
		}
		if bytes.Contains(b, []byte(mark)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// runNativeFork: a fork of the whole conversation on an agent with
// session/fork is the agent's own (DESIGN.md "A session's whole life"): the
// fork's turn carries the parent's turns natively, with no handoff, on the
// parent's model, mode and effort.
func runNativeFork(t *testing.T, la liveAgent) {
	const (
		p1 = "The first turn names a heron."
		p2 = "The second turn names a pike."
		p3 = "On the fork, which birds?"
	)
	s := la.start(t)
	s.prompt(p1)
	s.prompt(p2)
	res := step(t, s.a, "_sidecar/fork", map[string]any{"sessionId": s.sid, "atTurn": 0})
	var fork struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res.Result, &fork); err != nil || fork.SessionID == "" {
		t.Fatalf("_sidecar/fork result %s: %v", res.Result, err)
	}
	s.sid = fork.SessionID
	s.prompt(p3)
	s.checkTurn(la, "on the agent's fork", p3, []string{p1, p2, p3}, nil, 0)
}

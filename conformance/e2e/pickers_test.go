//go:build linux

package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// TestCodexLegacyClientSwitchesModel: a client that reads only the legacy
// pickers and sends only session/set_model, as Emacs agent-shell does,
// switches codex-acp 2.6.0's model through the sidecar. The session/new
// result it sees has `models` with codex's models, the LLM is asked for the
// model it chose, and a /reset keeps it: the record has it.
func TestCodexLegacyClientSwitchesModel(t *testing.T) {
	t.Parallel()
	la := codexNow
	mock, url := startMock(t, mockllm.Options{Reply: quietReply})
	s, res := startSession(t, la.pkg.argv(t), la.env(t, url), mock)
	var legacy struct {
		Models *struct {
			Current   string `json:"currentModelId"`
			Available []struct {
				ID string `json:"modelId"`
			} `json:"availableModels"`
		} `json:"models"`
	}
	if err := json.Unmarshal(res, &legacy); err != nil || legacy.Models == nil {
		t.Fatalf("session/new result has no legacy models for a client that reads only them (%v): %s", err, res)
	}
	// codex-acp 2.6.0 names a legacy model with its effort ("gpt-6-luna[high]");
	// an agent without legacy models gets them from its model option, by
	// the option's values.
	var ids []string
	choice := ""
	for _, m := range legacy.Models.Available {
		ids = append(ids, m.ID)
		if m.ID == la.model || m.ID == la.model+"["+la.effort+"]" {
			choice = m.ID
		}
	}
	if choice == "" {
		t.Fatalf("legacy models %q offer no %s", ids, la.model)
	}
	t.Logf("legacy models: current %s, %d available; choosing %s", legacy.Models.Current, len(ids), choice)

	step(t, s.a, "session/set_model", map[string]any{"sessionId": s.sid, "modelId": choice})
	const p1 = "legacy-picker turn one"
	s.prompt(p1)
	if r := s.turnRequest(p1); r.Model != la.wireModel {
		t.Errorf("after session/set_model %s the LLM was asked for %q", choice, r.Model)
	}

	if text := agentText(t, s.prompt("/reset")); !strings.Contains(text, "reset done") {
		t.Fatalf("/reset answered %q", text)
	}
	const p2 = "legacy-picker turn after the reset"
	s.prompt(p2)
	if r := s.turnRequest(p2); r.Model != la.wireModel {
		t.Errorf("after /reset the LLM was asked for %q, want %s: the record lost the legacy client's choice", r.Model, la.wireModel)
	}
}

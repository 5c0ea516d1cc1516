//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// stepTimeout bounds each ACP request. It is there so a hung agent fails
// the test instead of stalling the suite, not to time anything: a step may
// hold a rebuild's own calls (sidecarBounds), and start-up of a few seconds
// alone (agents.md) grows many times on a CI machine running the other
// suites beside.
const stepTimeout = 4 * time.Minute

func step(t *testing.T, a *agent, method string, params any) frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	f, err := a.call(ctx, method, params)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, a.stderr.String())
	}
	return f
}

// configOption is the part of an ACP session config option the test reads.
type configOption struct {
	ID           string `json:"id"` // configId in ACP v2 (UnmarshalJSON)
	Name         string `json:"name"`
	Category     string `json:"category"`
	Type         string `json:"type"`
	CurrentValue string `json:"currentValue"`
	Options      []struct {
		Value string `json:"value"`
		Name  string `json:"name"`
	} `json:"options"`
}

// UnmarshalJSON reads an option of either version: v2 names its id
// configId. A boolean option's current value is kept as its JSON text.
func (o *configOption) UnmarshalJSON(b []byte) error {
	type plain configOption
	var v struct {
		plain
		ConfigID     string          `json:"configId"`
		CurrentValue json.RawMessage `json:"currentValue"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = configOption(v.plain)
	if o.ID == "" {
		o.ID = v.ConfigID
	}
	if json.Unmarshal(v.CurrentValue, &o.CurrentValue) != nil {
		o.CurrentValue = string(v.CurrentValue)
	}
	return nil
}

type sessionUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}

// agentText joins the agent_message_chunk texts among frames.
func agentText(t *testing.T, frames []frame) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		if f.Method != "session/update" {
			continue
		}
		var p struct {
			Update json.RawMessage `json:"update"`
		}
		if json.Unmarshal(f.Params, &p) == nil && updateKind(p.Update) != "agent_message_chunk" {
			continue // v2's whole messages carry their content as a list
		}
		var u sessionUpdate
		if err := json.Unmarshal(f.Params, &u); err != nil {
			t.Errorf("decode session/update %s: %v", f.Raw, err)
			continue
		}
		if u.Update.SessionUpdate == "agent_message_chunk" && u.Update.Content.Type == "text" {
			b.WriteString(u.Update.Content.Text)
		}
	}
	return b.String()
}

// TestClaudeAgentDirect runs a whole session against claude-agent-acp with no
// sidecar in between. It is the baseline the through-the-sidecar run will be
// compared with, and it pins the facts recorded in NOTES.md: the catalog the
// agent advertises, and that a model and mode chosen over ACP reach the LLM.
func TestClaudeAgentDirect(t *testing.T) {
	argv, env, mock := ClaudeAgentMock(t)
	a := startAgent(t, argv, env, t.TempDir())

	initializeAsEditor(t, a)

	cwd := t.TempDir()
	newRes := step(t, a, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var sess struct {
		SessionID     string         `json:"sessionId"`
		ConfigOptions []configOption `json:"configOptions"`
	}
	if err := json.Unmarshal(newRes.Result, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s: %v", newRes.Result, err)
	}

	// Model is found by category, never by id (DESIGN.md, "The state model").
	var model *configOption
	for i, o := range sess.ConfigOptions {
		if o.Category == "model" {
			model = &sess.ConfigOptions[i]
		}
	}
	if model == nil {
		t.Fatalf("session/new advertises no model-category option: %s", newRes.Result)
	}
	var values []string
	opus := ""
	for _, v := range model.Options {
		values = append(values, v.Value)
		if opus == "" && strings.Contains(strings.ToLower(v.Value+" "+v.Name), "opus") {
			opus = v.Value
		}
	}
	t.Logf("model option %q current %q values %q", model.ID, model.CurrentValue, values)
	if opus == "" {
		t.Fatalf("no opus value among model values %q", values)
	}
	// set_config_option answers with the whole option list (agents.md).
	setRes := step(t, a, "session/set_config_option", map[string]any{
		"sessionId": sess.SessionID, "configId": model.ID, "value": opus,
	})
	if got := currentValue(t, setRes.Result, model.ID); got != opus {
		t.Errorf("set_config_option result has %s = %q, want %q: %s", model.ID, got, opus, setRes.Result)
	}

	// set_mode answers {} and reports the change as a config_option_update
	// sent before the response.
	n := a.frameCount()
	modeRes := step(t, a, "session/set_mode", map[string]any{"sessionId": sess.SessionID, "modeId": "plan"})
	if string(modeRes.Result) != "{}" {
		t.Errorf("set_mode result %s, want {}", modeRes.Result)
	}
	if !slices.ContainsFunc(a.framesSince(n), func(f frame) bool {
		var u struct {
			Update json.RawMessage `json:"update"`
		}
		return json.Unmarshal(f.Params, &u) == nil && updateKind(u.Update) == "config_option_update" &&
			currentValue(t, u.Update, "mode") == "plan"
	}) {
		t.Errorf("set_mode sent no config_option_update with mode plan before its response")
	}

	before := len(mock.MessageRequests())
	prompt := func(text string) (stopReason, reply string) {
		t.Helper()
		n := a.frameCount()
		res := step(t, a, "session/prompt", map[string]any{
			"sessionId": sess.SessionID,
			"prompt":    []map[string]string{{"type": "text", "text": text}},
		})
		var pr struct {
			StopReason string `json:"stopReason"`
		}
		if err := json.Unmarshal(res.Result, &pr); err != nil {
			t.Fatalf("session/prompt result %s: %v", res.Result, err)
		}
		return pr.StopReason, agentText(t, a.framesSince(n))
	}

	for _, text := range []string{"hello", "second prompt"} {
		stop, reply := prompt(text)
		if stop != "end_turn" {
			t.Errorf("prompt %q: stopReason %q, want end_turn", text, stop)
		}
		if want := "last=" + text; !strings.Contains(reply, "mock-llm: model=") || !strings.Contains(reply, want) {
			t.Errorf("prompt %q: agent text %q, want the mock's reply containing %q", text, reply, want)
		}
	}

	// What reached the LLM: the chosen model, plan mode, and both prompts.
	reqs := mock.MessageRequests()[before:]
	var turns []int // indexes of requests that carry a prompt as last user text
	for i, r := range reqs {
		t.Logf("mock saw: model=%s stream=%v query=%q messages=%d last=%.80q system=%.80q",
			r.Model, r.Stream, r.Query, r.Messages(), r.LastUserText(), r.System())
		if l := r.LastUserText(); l == "hello" || l == "second prompt" {
			turns = append(turns, i)
		}
	}
	if len(turns) < 2 {
		t.Fatalf("mock saw %d requests, %d of them carrying a prompt; want both prompts", len(reqs), len(turns))
	}
	for _, i := range turns {
		r := reqs[i]
		// The [1m] of the option value is not in the model id: it becomes
		// an anthropic-beta flag.
		if r.Model != "claude-opus-4-6" {
			t.Errorf("turn request %d used model %q, want claude-opus-4-6 after choosing %q", i, r.Model, opus)
		}
		if strings.HasSuffix(opus, "[1m]") && !strings.Contains(r.Header.Get("Anthropic-Beta"), "context-1m") {
			t.Errorf("turn request %d anthropic-beta %q lacks context-1m for %q", i, r.Header.Get("Anthropic-Beta"), opus)
		}
		// Plan mode is not in the system prompt: claude code tells the model
		// in a <system-reminder> block of the user message.
		if !slices.ContainsFunc(r.UserTexts(), func(s string) bool {
			return strings.HasPrefix(s, "<system-reminder>\nPlan mode is active.")
		}) {
			t.Errorf("turn request %d carries no plan-mode reminder; user texts %q", i, r.UserTexts())
		}
		// A model switch is conversation text the LLM sees (agents.md).
		if want := "<command-args>" + opus + "</command-args>"; !slices.ContainsFunc(r.UserTexts(), func(s string) bool {
			return strings.Contains(s, want)
		}) {
			t.Errorf("turn request %d does not carry the /model %s command text", i, opus)
		}
	}
	if second := reqs[turns[len(turns)-1]]; !slices.Contains(second.UserTexts(), "hello") {
		t.Errorf("second turn does not resend the first prompt; user texts %q", second.UserTexts())
	}
}

// currentValue returns the currentValue of option id in a JSON object with a
// configOptions list (a set_config_option result or a config_option_update).
func currentValue(t *testing.T, raw json.RawMessage, id string) string {
	t.Helper()
	var v struct {
		ConfigOptions []configOption `json:"configOptions"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("decode configOptions from %s: %v", raw, err)
		return ""
	}
	for _, o := range v.ConfigOptions {
		if o.ID == id {
			return o.CurrentValue
		}
	}
	return ""
}

// updateKind returns the sessionUpdate discriminator of a session/update's
// update object, or "" if it has none.
func updateKind(raw json.RawMessage) string {
	var u struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(raw, &u) // not an update: ""
	return u.SessionUpdate
}

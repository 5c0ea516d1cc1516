package record

import (
	"encoding/json"
	"log/slog"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Subagent sessions are child sessions an agent opens inside a turn and
// announces with a subagent_update on the parent (the ACP subagents draft;
// codex-acp 2.x opens them once the client negotiates them). They are not
// the client's sessions (DESIGN.md "A session's whole life"): their frames
// pass through untouched, their tool calls are recorded under the parent's
// running turn, their messages stay out of the parent's answer, and they
// never get a record of their own, so nothing lists, loads, resumes or
// rebuilds them.

// updSubagent is the session update that announces (and then patches) a
// child session.
const updSubagent = "subagent_update"

// children maps the native ids of announced child sessions to their
// parent's native id. Guarded by the Recorder's mu; an entry lives as long
// as the process, as the parent may reuse a child in later turns.
type children map[string]string

// childOf reads the child a subagent_update announces, and its parent's
// native id. The record notes it on the relay's goroutine, before any frame
// of the child can be read (the agent must announce a child before it
// sends anything for it), so the child's first chunk already finds it.
func childOf(f *proxy.Frame, log *slog.Logger) (child, parent string, ok bool) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionID string `json:"sessionId"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(f.Raw, &n); err != nil || n.Params.Update.SessionID == "" {
		log.Warn("a subagent_update without a readable child session id", "err", err)
		return "", "", false
	}
	return n.Params.Update.SessionID, n.Params.SessionID, true
}

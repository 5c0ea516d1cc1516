package fakeagent

import (
	"context"
	"strconv"

	acp "github.com/coder/acp-go-sdk"
)

// The prompt "background" plays an agent whose work goes on after the
// turn's answer, as claude-agent-acp 0.101.0 ends a turn at its result
// while background subagents still run (../../../shared/acp/agents.md,
// "Observed 2026-12-06"). Right after the answer (in v2, after the idle
// state_update that ends the turn) the agent writes, for the session:
//
//	agent_message_chunk  BackgroundText(turn)
//	tool_call            fake-bg-TURN "Background check", pending
//	session/request_permission for it, awaited
//	tool_call_update     completed (allowed) or failed
//
// and in v2 it then begins a turn of its own, with no prompt, as v2 lets
// an agent "follow up on a completed background task":
//
//	state_update         running
//	agent_message_chunk  AgentTurnText(turn), under a message id of its own
//	state_update         requires_action
//	session/request_permission for "Apply the fix", awaited
//	state_update         running
//	state_update         idle, stopReason end_turn
//
// The turn's own reply says background=started.

// BackgroundText is the text of the "background" prompt's chunk after the
// answer of turn n.
func BackgroundText(n int) string {
	return "fake-agent background: the check of turn " + strconv.Itoa(n) + " is done\n"
}

// AgentTurnText is the text of the turn the agent begins itself after the
// background work of turn n (v2).
func AgentTurnText(n int) string {
	return "fake-agent: a turn of my own, after the background check of turn " + strconv.Itoa(n) + "\n"
}

// Titles of the tool calls the background work asks permission for.
const (
	BackgroundTitle = "Background check"
	AgentTurnTitle  = "Apply the fix"
)

// afterAnswer runs fn once the answer to the prompt of session sid in
// flight has been written (frameLine's done). The store's mu must be held.
func (s *session) afterAnswer(fn func()) { s.after = append(s.after, fn) }

// runBackground is the "background" prompt's work after the answer of
// turn n of session sid.
func (t *turnRunner) runBackground(sid acp.SessionId, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.crash.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateAgentMessageText(BackgroundText(n))}); err != nil {
		return // the agent is going; nobody reads the rest
	}
	toolID := acp.ToolCallId("fake-bg-" + strconv.Itoa(n))
	if !t.askFor(ctx, sid, toolID, BackgroundTitle) {
		return
	}
	if !t.v2.active() {
		return
	}
	own := uuidFrom("fake-agent own turn " + string(sid) + "/" + strconv.Itoa(n))
	t.w.writeRaw(stateLine(string(sid), "running", "", nil))
	t.w.writeRaw(updateLine(string(sid), `{"sessionUpdate":"agent_message_chunk","messageId":`+jsonString(own)+`,"content":{"type":"text","text":`+jsonString(AgentTurnText(n))+`}}`))
	t.w.writeRaw(stateLine(string(sid), "requires_action", "", nil))
	if !t.askFor(ctx, sid, acp.ToolCallId("fake-own-"+strconv.Itoa(n)), AgentTurnTitle) {
		return
	}
	t.w.writeRaw(stateLine(string(sid), "running", "", nil))
	t.w.writeRaw(stateLine(string(sid), "idle", "end_turn", nil))
}

// askFor announces tool call id titled title, asks the client's
// permission for it and reports its end, and says whether the agent is
// still there to go on.
func (t *turnRunner) askFor(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, title string) bool {
	if err := t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id, title, acp.WithStartStatus(acp.ToolCallStatusPending))}); err != nil {
		return false
	}
	resp, err := t.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: sid,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: id, Title: &title, Status: acp.Ptr(acp.ToolCallStatusPending)},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if ctx.Err() != nil {
		return false
	}
	status := acp.ToolCallStatusFailed
	if err == nil && resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == "allow" {
		status = acp.ToolCallStatusCompleted
	}
	return t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(id, acp.WithUpdateStatus(status))}) == nil
}

package fakeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	acp "github.com/coder/acp-go-sdk"
)

// SubagentPrefix starts the session id of every child session the
// "subagent" prompt opens: fake-sub-1, fake-sub-2, … in the order they are
// opened. The count goes on in a restarted agent with the same -state.
const SubagentPrefix = "fake-sub-"

// subagentsAdvertised reports whether initialize params carry
// clientCapabilities.subagents as an object ({}), which is how a Client
// opts in to child sessions in the ACP v1 draft (protocol/v1/draft/subagents:
// omitted or null means no). acp-go-sdk v0.13.0's ClientCapabilities has no
// such field, so the stdin reader reads it from the raw params.
func subagentsAdvertised(params json.RawMessage) bool {
	var p struct {
		ClientCapabilities struct {
			Subagents json.RawMessage `json:"subagents"`
		} `json:"clientCapabilities"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false // the SDK will answer the malformed initialize
	}
	s := p.ClientCapabilities.Subagents
	return len(s) > 0 && s[0] == '{'
}

// subagentState is a v1 draft StateUpdate: {"state":"running"} or
// {"state":"idle","stopReason":…}.
type subagentState struct {
	State      string `json:"state"`
	StopReason string `json:"stopReason,omitempty"`
}

// subagentUpdate is the v1 draft `subagent_update` session update, which
// the SDK has no type for. Only sessionId is required; the other fields are
// patches, left out when unchanged.
type subagentUpdate struct {
	SessionUpdate string         `json:"sessionUpdate"`
	SessionID     string         `json:"sessionId"`
	Title         string         `json:"title,omitempty"`
	Description   string         `json:"description,omitempty"`
	State         *subagentState `json:"state,omitempty"`
}

// subagentLine is the session/update on parent that carries u.
func subagentLine(parent string, u subagentUpdate) ([]byte, error) {
	u.SessionUpdate = "subagent_update"
	b, err := json.Marshal(struct {
		SessionID string         `json:"sessionId"`
		Update    subagentUpdate `json:"update"`
	}{parent, u})
	if err != nil {
		return nil, fmt.Errorf("marshal subagent_update: %w", err)
	}
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":`)
	line = append(line, b...)
	return append(line, "}\n"...), nil
}

// runSubagent is the "subagent" prompt under -subagents with a Client that
// advertised subagents. Inside the parent's turn it opens child session
// SubagentPrefix+N and writes, in this order:
//
//  1. on parent: subagent_update announcing the child (title, description,
//     state running), before any frame that names the child, as the draft
//     requires;
//  2. on the child: agent_message_chunk, tool_call (pending) and
//     tool_call_update (completed) of tool CHILD-tool-1;
//  3. session/request_permission on the child for tool CHILD-tool-2, and
//     waits for the answer;
//  4. on parent: subagent_update with state idle and stopReason end_turn
//     (cancelled if the turn was cancelled meanwhile).
//
// It returns the child id and the permission outcome in the form of the
// "ask permission" prompt (selected:ID|cancelled|error:CODE).
func (t *turnRunner) runSubagent(ctx context.Context, parent, cwd string) (child, perm string) {
	n := t.sessions.nextChild()
	child = SubagentPrefix + strconv.Itoa(n)
	t.writeSubagent(parent, subagentUpdate{SessionID: child, Title: "Subagent " + strconv.Itoa(n),
		Description: "fake-agent child session of " + parent, State: &subagentState{State: "running"}})

	csid := acp.SessionId(child)
	tool := acp.ToolCallId(child + "-tool-1")
	for _, u := range []acp.SessionUpdate{
		t.agentText(child, 1, "fake-subagent: child of "+parent+"\n"),
		acp.StartToolCall(tool, "List the workspace", acp.WithStartKind(acp.ToolKindSearch), acp.WithStartStatus(acp.ToolCallStatusPending)),
		acp.UpdateToolCall(tool, acp.WithUpdateStatus(acp.ToolCallStatusCompleted)),
	} {
		_ = t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: csid, Update: u}) // fails only once the turn is cancelled or the agent stopped
	}
	title := "Edit " + filepath.Join(cwd, "fake.txt")
	resp, err := t.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: csid,
		ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(child + "-tool-2"), Title: &title,
			Kind: acp.Ptr(acp.ToolKindEdit), Status: acp.Ptr(acp.ToolCallStatusPending)},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	switch {
	case err != nil:
		perm = "error:" + errCode(err)
	case resp.Outcome.Selected != nil:
		perm = "selected:" + string(resp.Outcome.Selected.OptionId)
	default:
		perm = "cancelled"
	}
	stop := acp.StopReasonEndTurn
	if ctx.Err() != nil {
		stop = acp.StopReasonCancelled
	}
	t.writeSubagent(parent, subagentUpdate{SessionID: child, State: &subagentState{State: "idle", StopReason: string(stop)}})
	return child, perm
}

func (t *turnRunner) writeSubagent(parent string, u subagentUpdate) {
	line, err := subagentLine(parent, u)
	if err != nil {
		fmt.Fprintf(t.stderr, "fakeagent: %v\n", err)
		return
	}
	t.w.writeRaw(line)
}

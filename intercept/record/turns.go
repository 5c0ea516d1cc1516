package record

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// A turn's work does not stop at its answer, and not every turn has a
// prompt. claude-agent-acp 0.101.0 ends a turn at its result while
// background subagents still run, and their updates and requests come
// after the prompt's response; an ACP v2 agent may begin foreground work
// of its own, with no prompt (state_update running or requires_action).
// The record follows both:
//   - what the agent sends for a session between its turns (no turn runs,
//     nothing opens the session: ledger.TurnStateOf) is the background
//     work of the turn before, and is kept under that turn: its text,
//     its tool calls, what it asked the user. The next turn's work begins
//     once that turn runs: a v1 prompt sent, a v2 prompt accepted;
//   - a v2 turn the agent began itself is a turn of its own
//     (state.OriginAgent), recorded like any other, with no prompt;
//   - what the agent asks the user (a permission request, an elicitation)
//     is kept on the turn it came in (state.Turn.Asked).
//
// A subagent's messages are its child session's, never a turn's of the
// parent (subagents.go).

// The record's own event kinds for what Intercept found of them.
const (
	// updBackground is a message chunk the agent sent between turns.
	updBackground = "agent_message_chunk (background)"
	// updAgentTurn begins a turn the agent began itself.
	updAgentTurn = "state_update (agent turn)"
	// updAsked is a request of the agent's that asks the user.
	updAsked = "asked"
)

// Agent requests that ask the user something.
const (
	methodPermission  = "session/request_permission"
	methodElicitation = "elicitation/create"
)

// asks says whether an agent request asks the user something the record
// keeps (Turn.Asked).
func asks(env *proxy.Envelope) bool {
	return env.Kind == proxy.KindRequest && (env.MethodIs(methodPermission) || env.MethodIs(methodElicitation))
}

// The bounds of Turn.Asked, as of a turn's notices: an agent that asks in
// a loop must not grow the record without end.
const (
	maxAsked   = 32
	askedBytes = 2 << 10
)

// askedOf is what an agent's request asks the user: for a permission, its
// title (v2), the title of the tool call it is about (v1's toolCall, v2's
// subject.toolCall) or the command (v2's subject.command); for an
// elicitation, its message; "" when it says nothing the record can keep.
func askedOf(log *slog.Logger, raw []byte) (sid, what string) {
	type toolCall struct {
		Title string `json:"title"`
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string   `json:"sessionId"`
			Message   string   `json:"message"`
			Title     string   `json:"title"`
			ToolCall  toolCall `json:"toolCall"`
			Subject   struct {
				ToolCall toolCall `json:"toolCall"`
				Command  string   `json:"command"`
			} `json:"subject"`
		} `json:"params"`
	}
	decoded(log, "a request of the agent's", raw, &m) // what could not be read stays empty
	p := m.Params
	what = p.Message
	if m.Method == methodPermission {
		what = cmp.Or(p.Title, p.ToolCall.Title, p.Subject.ToolCall.Title, p.Subject.Command, "a permission")
	}
	return p.SessionID, clip(what, askedBytes)
}

// ask keeps what on t, within the bounds.
func ask(t *state.Turn, what string) bool {
	if what == "" || len(t.Asked) >= maxAsked {
		return false
	}
	t.Asked = append(t.Asked, what)
	return true
}

// workTurn is the turn an update of s's agent belongs to: the running
// turn, else the last turn that ended, whose background work the update
// is (background true); nil when s has had no turn.
func (s *Session) workTurn() (t *state.Turn, background bool) {
	if s.Turn != nil {
		return s.Turn, false
	}
	if n := len(s.Turns); n > 0 {
		return &s.Turns[n-1], true
	}
	return nil, false
}

// keepWhole keeps a copy of t, a turn that has just ended, as it was
// written: the record keeps only a lighter copy of a turn in memory
// (Lighten), and the turn's background work rewrites it whole, prompt
// included.
func (s *Session) keepWhole(t *state.Turn) {
	w := *t
	w.ToolCalls, w.Notices, w.Asked = slices.Clone(t.ToolCalls), slices.Clone(t.Notices), slices.Clone(t.Asked)
	s.whole = &w
}

// wholeOf is the whole turn t, a lighter copy in Turns, for its
// background work to rewrite: the copy keepWhole kept, else, as after the
// sidecar's restart, the store's.
func (s *Session) wholeOf(ctx context.Context, store state.Store, log *slog.Logger, t *state.Turn) *state.Turn {
	if s.whole != nil && s.whole.Index == t.Index {
		return s.whole
	}
	turns, err := store.Turns(ctx, s.Rec.ClientID)
	if err != nil {
		log.Warn("read a turn for its background work; it is kept in memory only", "session", s.Rec.ClientID, "turn", t.Index, "err", err)
		return nil
	}
	for i := range turns {
		if turns[i].Index == t.Index {
			s.keepWhole(&turns[i])
			return s.whole
		}
	}
	return nil
}

// backgroundText is a background chunk's text, "" for one of no text.
func backgroundText(log *slog.Logger, raw []byte) (sid, text string) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Content struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	decoded(log, "a message chunk between turns", raw, &n) // what could not be read stays empty
	if n.Params.Update.Content.Type != "text" {
		return n.Params.SessionID, ""
	}
	return n.Params.SessionID, n.Params.Update.Content.Text
}

// agentTurn is the turn the agent began itself on s: no prompt, running.
func (s *Session) agentTurn(now state.Turn) *state.Turn {
	now.Index, now.Origin, now.NativeID, now.Status = len(s.Turns)+1, state.OriginAgent, s.Rec.NativeID, state.TurnRunning
	return s.beginTurn("", now)
}

// stateOf is the state a v2 state_update reports ("idle", "running",
// "requires_action"), "" when unreadable.
func stateOf(raw []byte) string {
	var st string
	if json.Unmarshal(wire.Member(raw, "params", "update", "state"), &st) != nil {
		return ""
	}
	return st
}

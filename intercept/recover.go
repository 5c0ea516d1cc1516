package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// parseCaps reads what the agent said it can do from its initialize result.
func parseCaps(result json.RawMessage) life.Caps {
	var r struct {
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage
		} `json:"agentCapabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return life.Caps{} // a result we cannot read promises nothing
	}
	has := func(k string) bool { v, ok := r.AgentCapabilities.SessionCapabilities[k]; return ok && !wire.IsNull(v) }
	return life.Caps{Load: r.AgentCapabilities.LoadSession, Resume: has("resume"), List: has("list"), Fork: has("fork"),
		Close: has("close"), Delete: has("delete")}
}

// interrupted is the record's half of the agent's death: a prompt in
// flight is recorded as interrupted (it stays among the kept turns), and
// what it carried is owed again. It runs after the ledger let go of what
// the dead agent had (Agent.Gone).
func (r *Recorder) interrupted(ctx context.Context) {
	err := r.do(ctx, func(ctx context.Context) {
		clear(r.params) // no response comes for what the dead agent had
		for sid, s := range r.sessions {
			// An unsent prompt's turn is taken back (unbegin).
			if s.turn != nil && !r.led.UnsentPrompt(sid) {
				s.turn.Status = state.TurnInterrupted
				s.turn.Ended = r.cfg.Now()
				s.turn.Answer += r.takeAnswer(s.turn.NativeID)
				r.putTurn(ctx, s, s.turn)
				if s.turn.HandoffDelivered {
					// The agent died under the prompt that carried the
					// kept turns: what it kept of them is unknown, so the
					// rebuilt session is handed them again.
					s.rec.HandoffPending = true
					r.putSession(ctx, s)
				}
				s.turn = nil
			}
		}
		r.flush(ctx)
	})
	if err != nil {
		// Only a stopping recorder refuses, and then no session is
		// rebuilt any more.
		r.log.Warn("the running turns were not marked interrupted", "err", err)
	}
}

// Recover rebuilds a session whose native session died with the agent, by
// the crash ladder (recoverPlan).
func (r *Recorder) Recover(ctx context.Context, sid string) error {
	_, err := r.Run(ctx, r.recoverPlan(sid))
	return err
}

// emulates says whether the sidecar decides a client's session/load,
// session/resume or session/list itself: a load or resume of a session the
// record may know is rebuilt (natively where the agent can, else emulated),
// and a list the agent cannot make is answered from the record.
func (ll *lifeline) emulates(method, sid string) bool {
	if method == wire.SessionList {
		return !ll.life.Caps().List
	}
	return sid != ""
}

// emulate decides a held session/load, session/resume or session/list
// once the agent is up: an unknown session goes to the agent for its own
// answer, a known one is reopened from the record.
func (ll *lifeline) emulate(ctx context.Context, q waited) proxy.Decision {
	if !ll.emulates(q.method, q.sid) {
		return ll.rest(ctx, proxy.ClientToAgent, q.raw)
	}
	if q.method == wire.SessionList {
		return answerWith(ll.rec.listSessions(ctx, q.id, q.raw))
	}
	line, err := ll.rec.reopen(ctx, q.sid, q.method)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // not ours: the agent answers, with its own error if it must
	case err != nil:
		return answerWith(proxy.ErrorResponse(q.id, errorCode(err), err.Error()))
	case line == nil:
		return ll.rest(ctx, proxy.ClientToAgent, q.raw) // live here: the agent has it
	default:
		// The sidecar's commands follow, as after every open the client
		// makes, unless the agent sent its list during the reopen.
		return answerWith(append([][]byte{wire.Response(q.id, line)}, ownCommands(ll.led, ll.led.NativeOf(q.sid), q.sid)...)...)
	}
}

// reopen brings back a session the record knows for a client's load or
// resume, and returns the result to answer with; nil means the session is
// live here and the request can go to the agent as it is. For a load that
// is emulated, the recorded history goes to the client first, as the agent
// would have sent it.
func (r *Recorder) reopen(ctx context.Context, sid, method string) ([]byte, error) {
	live := false
	err := r.do(ctx, func(ctx context.Context) {
		if held, _ := r.revive(ctx, sid); held {
			live = !r.led.IsStale(sid)
		}
	})
	if err != nil {
		return nil, err
	}
	if live {
		caps := r.life.Caps()
		if method == wire.SessionResume && !caps.Resume || method == wire.SessionLoad && !caps.Load {
			return r.reopenLive(ctx, sid, method)
		}
		return nil, nil
	}
	if !r.led.IsStale(sid) {
		return nil, state.ErrNotFound
	}
	var a attempt
	if _, err := r.Run(ctx, r.reopenPlan(sid, method, &a)); err != nil {
		return nil, err
	}
	out, catalog, snap := a.out, a.catalog, a.snap
	// The agent's newest full option list, and the pickers with the
	// values it accepted in the restore (pickers.go).
	result := map[string]any{}
	if out.optionsRaw != nil {
		result["configOptions"] = out.optionsRaw
	} else if catalog != nil && len(catalog.Raw) > 0 {
		var p wire.ConfigPayload
		if json.Unmarshal(catalog.Raw, &p) == nil && p.ConfigOptions != nil {
			result["configOptions"] = p.ConfigOptions
		}
	}
	return withPickers(wire.Encode(result), snap.live, out.catalog), nil
}

// historyUpdates renders recorded turns as the session/update notifications
// an agent's own load replays: the user's message, the agent's answer, and
// each tool call with its final status.
func historyUpdates(sid string, turns []state.Turn) [][]byte {
	var out [][]byte
	for _, t := range turns {
		if t.Status == state.TurnCancelled && t.Answer == "" {
			continue
		}
		out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": t.PromptText}}))
		for _, tc := range t.ToolCalls {
			out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": tc.ID, "title": tc.Title, "status": tc.Status}))
		}
		if t.Answer != "" {
			out = append(out, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": t.Answer}}))
		}
	}
	return out
}

// listSessions answers session/list from the record, for agents that
// cannot: the cwd filter, pages of 50 by an opaque cursor, and titles from
// the first prompt line.
func (r *Recorder) listSessions(ctx context.Context, id, raw []byte) []byte {
	var p struct {
		Params struct {
			Cwd    string `json:"cwd"`
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: session/list: "+err.Error())
	}
	all, err := r.cfg.Store.Sessions(ctx)
	if err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInternalError, "acp-sidecar: cannot read the session record: "+err.Error())
	}
	start := 0
	if p.Params.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(p.Params.Cursor, "acp-sidecar:"))
		if err != nil || n < 0 {
			return proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: unknown cursor")
		}
		start = n
	}
	type info struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Title     string `json:"title,omitempty"`
		UpdatedAt string `json:"updatedAt,omitempty"`
	}
	var match []state.Summary
	for _, s := range all {
		if p.Params.Cwd == "" || s.Cwd == p.Params.Cwd {
			match = append(match, s)
		}
	}
	const page = 50
	res := map[string]any{"sessions": []info{}}
	var list []info
	for i := start; i < len(match) && i < start+page; i++ {
		s := match[i]
		title := ""
		if turns, err := r.cfg.Store.Turns(ctx, s.ID); err == nil && len(turns) > 0 {
			title = firstLine(turns[0].PromptText)
		}
		list = append(list, info{SessionID: s.ID, Cwd: s.Cwd, Title: title, UpdatedAt: s.LastActivity.UTC().Format(time.RFC3339)})
	}
	if list != nil {
		res["sessions"] = list
	}
	if start+page < len(match) {
		res["nextCursor"] = "acp-sidecar:" + strconv.Itoa(start+page)
	}
	b := wire.Encode(res)
	return wire.Response(id, b)
}

// reopenLive answers a load or resume of a session this process holds live
// on an agent that cannot do it itself, as the sidecar promised in
// initialize: the session is already where the client wants it, so a resume
// is its config, and a load is the recorded history, then its config.
func (r *Recorder) reopenLive(ctx context.Context, sid, method string) ([]byte, error) {
	var history [][]byte
	snap, err := r.snapshot(ctx, sid)
	if err != nil {
		return nil, err
	}
	r.led.Update(func(f *ledger.Flight) { f.Opening(snap.native) }) // an open, though the agent hears of none: the sidecar's commands follow it
	if method == wire.SessionLoad {
		if err := r.onSession(ctx, sid, func(ctx context.Context, s *session) {
			history = historyUpdates(sid, replay.Visible(&s.rec, r.fullTurns(ctx, s)))
		}); err != nil {
			return nil, err
		}
	}
	for _, line := range history {
		r.send(proxy.AgentToClient, line)
	}
	// The config as the record has it now: the options with their current
	// values, the pickers on theirs (withPickers builds them all).
	return withPickers([]byte("{}"), nil, snap.live), nil
}

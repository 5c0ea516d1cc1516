package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// reopens answer the client's session/load, resume and list from the
// record, where the record knows better than the agent (the emulation's
// Reopen and List): a session the record knows is brought back (natively
// where the agent can, else on a fresh native session with its history
// and config), and the sessions the agent cannot list are listed.
type reopens struct {
	rec     *record.Recorder
	sc      Sidecar // the relay (Core.Bind)
	rb      *rebuild.Rebuilder
	led     *ledger.Ledger
	life    *life.Life
	store   state.Store
	leases  *leases  // taken before a session is served here
	records *records // brings a session back from the store
	log     *slog.Logger
}

// Reopen brings back a session the record knows for a client's load or
// resume, and returns the result to answer with; nil means the session is
// live here and the request can go to the agent as it is. For a load that
// is emulated (or a v2 resume with replayFrom), the recorded history goes
// to the client first, as the agent would have sent it. raw is the
// client's request.
func (o *reopens) Reopen(ctx context.Context, sid, method string, raw []byte) ([]byte, error) {
	v := wire.Version(o.life.Caps().Protocol)
	history := wire.WantsHistory(v, method, wire.Member(raw, "params"))
	if err := o.leases.Acquire(ctx, sid); err != nil {
		return nil, err
	}
	o.led.Update(func(f *ledger.Flight) { f.Sessions.Reopen(sid) })
	live := false
	var gone error
	err := o.rec.Do(ctx, func(ctx context.Context) {
		held, err := o.records.revive(ctx, sid)
		if held {
			live = !o.led.IsStale(sid)
		}
		gone = err
	})
	if err != nil {
		return nil, err
	}
	if gone != nil && !errors.Is(gone, state.ErrNotFound) {
		// The record may know the session but could not be read: the
		// agent's own answer would be a wrong "not found".
		return nil, fmt.Errorf("reopen %s: %w", sid, gone)
	}
	if live {
		caps := o.life.Caps()
		if method == wire.SessionResume && !caps.Resume || method == wire.SessionLoad && !caps.Load {
			return o.reopenLive(ctx, sid, v, history)
		}
		return nil, nil
	}
	if !o.led.IsStale(sid) {
		return nil, state.ErrNotFound
	}
	p := &rebuild.Reopen{Session: sid, Method: method, History: history}
	if _, err := o.rb.Run(ctx, p); err != nil {
		return nil, err
	}
	return o.rb.ReopenResult(&p.Got), nil
}

// reopenLive answers a load or resume of a session this process holds live
// on an agent that cannot do it itself, as the sidecar promised in
// initialize: the session is already where the client wants it, so a resume
// is its config, and a load (history) is the recorded history, then its
// config.
func (o *reopens) reopenLive(ctx context.Context, sid string, v wire.Version, history bool) ([]byte, error) {
	var lines [][]byte
	snap, err := rebuild.SnapshotIn(ctx, o.rec, sid)
	if err != nil {
		return nil, err
	}
	o.led.Update(func(f *ledger.Flight) { f.Natives.Opening(snap.Native) }) // an open, though the agent hears of none: the sidecar's commands follow it
	var turns []state.Turn
	if history {
		if err := o.rec.OnSession(ctx, sid, func(ctx context.Context, s *record.Session) {
			turns = replay.Visible(&s.Rec, o.rec.FullTurns(ctx, s))
		}); err != nil {
			return nil, err
		}
	}
	lines = rebuild.HistoryUpdates(v, sid, turns)
	for _, line := range lines {
		rebuild.SendOwn(o.sc, o.log, proxy.AgentToClient, line)
	}
	// The config as the record has it now: the options with their current
	// values, the pickers on theirs (Rebuilder.WithPickers builds them all).
	return o.rb.WithPickers([]byte("{}"), nil, snap.Live), nil
}

// List answers session/list from the record, for agents that cannot: the
// cwd filter, pages of 50 by an opaque cursor, and each session's title:
// the one the agent last gave it (session_info_update), else its first
// prompt line.
func (o *reopens) List(ctx context.Context, id, raw []byte) []byte {
	var p struct {
		Params struct {
			Cwd    string `json:"cwd"`
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: session/list: "+err.Error())
	}
	all, err := o.store.Sessions(ctx)
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
		title := s.Title
		// Turns that cannot be read leave the title empty: a listing is
		// not refused for one session's title.
		if title == "" {
			if turns, err := o.store.Turns(ctx, s.ID); err == nil && len(turns) > 0 {
				title = rebuild.FirstLine(turns[0].PromptText)
			}
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

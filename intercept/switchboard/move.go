package switchboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Moves: a session from one agent to another (/agent, the selector).

// startMove runs a move on a goroutine of its own, so the client's other
// sessions go on meanwhile; the moving session's frames wait for it.
func (sw *Switchboard) startMove(ctx context.Context, id []byte, sid, name string, slash bool) {
	id = append([]byte(nil), id...)
	var update []byte // what the client must be told of the session's options after a move
	reply := func(text string, result []byte, err error) {
		switch {
		case slash:
			if err != nil {
				text = "acp-sidecar: /agent failed: " + err.Error()
			}
			var lines [][]byte
			if update != nil {
				lines = append(lines, update)
			}
			lines = append(lines,
				wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}),
				wire.Response(id, []byte(`{"stopReason":"end_turn"}`)))
			sw.answers.respond(id, lines...)
		case err != nil:
			sw.answers.respond(id, proxy.ErrorResponse(id, wire.CodeOf(err), "acp-sidecar: "+err.Error()))
		default:
			sw.answers.respond(id, wire.Response(id, result))
		}
	}
	if slash && name == "" {
		sw.mu.Lock()
		cur := sw.bound[sid]
		sw.mu.Unlock()
		reply(fmt.Sprintf("acp-sidecar: this session runs on %s. Agents: %s. Send /agent NAME to move it; the kept turns go with it.", cur, strings.Join(sw.sel.names(), ", ")), nil, nil)
		return
	}
	switch {
	case sid == "":
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: a switch of agent needs a sessionId"))
		return
	case sw.slots[name] == nil:
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: no agent named %q; the agents are %s", name, strings.Join(sw.sel.names(), ", ")))
		return
	}
	sw.mu.Lock()
	from, known := sw.bound[sid]
	_, busy := sw.moves[sid]
	if known && !busy {
		sw.moves[sid] = &pendingMove{to: name} // from here on, settleMove must run
	}
	sw.mu.Unlock()
	switch {
	case !known:
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid))
		return
	case busy:
		reply("", nil, wire.Refuse(proxy.CodeBusy, "this session is already moving to another agent"))
		return
	}
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		rep, err := sw.move(ctx, sid, from, name)
		sw.settleMove(ctx, sid)
		if err != nil {
			sw.log.Error("agent switch failed; the session stays where it was", "session", sid, "from", from, "to", name, "err", err)
			reply("", nil, err)
			return
		}
		text := rep.Text(from)
		if from == name {
			text = "acp-sidecar: this session already runs on " + name + "."
		}
		opts := sw.sel.options(rep.Options, name)
		result := wire.Encode(map[string]any{"configOptions": opts, "_meta": map[string]any{"acp-sidecar": rep}})
		// A set_config_option answer carries the new list; a slash
		// command's answer cannot, so the list goes out as an update.
		update = wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "config_option_update", "configOptions": opts})
		reply(text, result, nil)
	}()
}

// move takes sid from one agent to another: the target is started if it
// must be, the source lends the session, the target adopts it, and only
// then does the session's traffic go to the target. A failure leaves the
// session where it was.
func (sw *Switchboard) move(ctx context.Context, sid, from, to string) (rebuild.SwitchReport, error) {
	// Both agents' idle clocks start again once the move is over.
	defer func() {
		sw.mu.Lock()
		sw.slots[from].used, sw.slots[to].used = time.Now(), time.Now()
		sw.mu.Unlock()
	}()
	target, err := sw.ensure(ctx, to)
	if err != nil {
		return rebuild.SwitchReport{}, err
	}
	if from == to {
		opts, err := target.Rec.ConfigOptions(ctx, sid)
		return rebuild.SwitchReport{SessionID: sid, Agent: to, Options: opts}, err
	}
	if err := sw.mcpFits(ctx, sid, to); err != nil {
		return rebuild.SwitchReport{}, err
	}
	done := func(bool) {}
	sw.mu.Lock()
	source := sw.slots[from].b
	sw.mu.Unlock()
	if source != nil {
		if done, err = source.Rec.Lend(ctx, sid); err != nil {
			return rebuild.SwitchReport{}, err
		}
	}
	rep, err := target.Rec.Adopt(ctx, sid)
	done(err == nil)
	if err != nil {
		return rebuild.SwitchReport{}, err
	}
	sw.mu.Lock()
	sw.setBound(sid, to)
	sw.mu.Unlock()
	sw.log.Info("session moved", "session", sid, "from", from, "to", to)
	return rep, nil
}

// settleMove lets the frames that waited for a move go on, in order, to
// wherever the session is now.
func (sw *Switchboard) settleMove(ctx context.Context, sid string) {
	sw.route.Lock()
	defer sw.route.Unlock()
	sw.mu.Lock()
	queued := sw.moves[sid].queued
	delete(sw.moves, sid)
	target := sw.bound[sid]
	sw.mu.Unlock()
	for _, line := range queued {
		// Scanned once on its way in; the copy that waited is scanned
		// again, as the envelope pointed into the port's buffer.
		env, err := proxy.Scan(line)
		if err != nil {
			continue
		}
		var req *pendingReq
		if env.Kind == proxy.KindRequest {
			req = &pendingReq{agent: target, method: string(env.Method), sid: sid}
		}
		sw.toAgent(ctx, target, &proxy.Frame{Dir: proxy.ClientToAgent, Raw: line, Env: env}, req)
	}
}

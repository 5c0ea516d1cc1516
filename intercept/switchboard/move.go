package switchboard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

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
			sw.respond(id, lines...)
		case err != nil:
			sw.respond(id, proxy.ErrorResponse(id, wire.CodeOf(err), "acp-sidecar: "+err.Error()))
		default:
			sw.respond(id, wire.Response(id, result))
		}
	}
	if slash && name == "" {
		sw.mu.Lock()
		cur := sw.bound[sid]
		sw.mu.Unlock()
		reply(fmt.Sprintf("acp-sidecar: this session runs on %s. Agents: %s. Send /agent NAME to move it; the kept turns go with it.", cur, strings.Join(sw.names(), ", ")), nil, nil)
		return
	}
	switch {
	case sid == "":
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: a switch of agent needs a sessionId"))
		return
	case sw.slots[name] == nil:
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: no agent named %q; the agents are %s", name, strings.Join(sw.names(), ", ")))
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
		opts := sw.optionsWithSelector(rep.Options, name)
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

// optionsWithSelector is an agent's configOptions list with the selector
// last; a list the agent does not have is the selector alone, since the
// client that asked uses config options.
func (sw *Switchboard) optionsWithSelector(opts json.RawMessage, current string) json.RawMessage {
	var list []json.RawMessage
	// A list that is not one (or none) leaves the selector alone.
	_ = json.Unmarshal(opts, &list)
	list = append(list, sw.selectorJSON(current))
	b := wire.Encode(list)
	return b
}

// promised is what an initialize result promises about prompt content and
// MCP transports.
type promised struct {
	prompt map[string]bool // image, audio, embeddedContext
	mcp    map[string]bool // http, sse
}

func promisedBy(init json.RawMessage) promised {
	var r struct {
		AgentCapabilities struct {
			PromptCapabilities map[string]json.RawMessage `json:"promptCapabilities"`
			McpCapabilities    map[string]json.RawMessage `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	// What cannot be read is not promised: the client is promised less.
	_ = json.Unmarshal(init, &r)
	p := promised{prompt: map[string]bool{}, mcp: map[string]bool{}}
	for k, v := range r.AgentCapabilities.PromptCapabilities {
		p.prompt[k] = string(v) == "true"
	}
	for k, v := range r.AgentCapabilities.McpCapabilities {
		p.mcp[k] = string(v) == "true"
	}
	return p
}

// initOf is what an agent said in its initialize: from this run, else from
// the store when the same command said it before, else from a start now.
func (sw *Switchboard) initOf(ctx context.Context, name string) (json.RawMessage, error) {
	sw.mu.Lock()
	sl := sw.slots[name]
	init := sl.init
	sw.mu.Unlock()
	if init != nil {
		return init, nil
	}
	if info, err := sw.cfg.Store.Agent(ctx, name); err == nil && slices.Equal(info.Command, sl.command) && len(info.Init) > 0 {
		return info.Init, nil
	}
	if _, err := sw.ensure(ctx, name); err != nil {
		return nil, err
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sl.init == nil {
		return nil, fmt.Errorf("agent %s did not say what it supports", name)
	}
	return sl.init, nil
}

// promptKinds are the prompt capabilities the client is promised only when
// every agent has them; mcpKinds the same for MCP transports.
var (
	promptKinds = []string{"image", "audio", "embeddedContext"}
	mcpKinds    = []string{"http", "sse"}
)

// intersect makes the client's initialize result promise only what every
// configured agent supports, so a session can move anywhere; it also names
// the agents for orchestrators.
func (sw *Switchboard) intersect(ctx context.Context, line []byte) []byte {
	all := promised{prompt: map[string]bool{}, mcp: map[string]bool{}}
	for _, k := range promptKinds {
		all.prompt[k] = true
	}
	for _, k := range mcpKinds {
		all.mcp[k] = true
	}
	for _, a := range sw.cfg.Agents {
		init, err := sw.initOf(ctx, a.Name)
		if err != nil {
			sw.log.Warn("agent capabilities unknown; promising the client none of the optional ones", "agent", a.Name, "err", err)
		}
		p := promisedBy(init)
		for _, k := range promptKinds {
			all.prompt[k] = all.prompt[k] && p.prompt[k]
		}
		for _, k := range mcpKinds {
			all.mcp[k] = all.mcp[k] && p.mcp[k]
		}
	}
	mine := promisedBy(wire.Member(line, "result"))
	out := line
	for _, k := range promptKinds {
		if mine.prompt[k] && !all.prompt[k] {
			out = setOr(out, []byte("false"), "result", "agentCapabilities", "promptCapabilities", k)
		}
	}
	for _, k := range mcpKinds {
		if mine.mcp[k] && !all.mcp[k] {
			out = setOr(out, []byte("false"), "result", "agentCapabilities", "mcpCapabilities", k)
		}
	}
	names := wire.Encode(sw.names())
	out = setOr(out, names, "result", "agentCapabilities", "_meta", "acp-sidecar", "agents")
	if more, err := wire.InsertArray(out, false, [][]byte{[]byte(`"` + wire.ExtAgent + `"`)}, "result", "agentCapabilities", "_meta", "acp-sidecar", "methods"); err == nil {
		out = more
	}
	def := wire.Encode(sw.cfg.Default)
	return setOr(out, def, "result", "agentCapabilities", "_meta", "acp-sidecar", "defaultAgent")
}

func setOr(line, val []byte, path ...string) []byte {
	out, err := wire.SetPath(line, val, path...)
	if err != nil {
		return line
	}
	return out
}

// checkContent refuses a prompt whose content the agent cannot take, with a
// clear error, rather than let the agent drop it silently.
func (sw *Switchboard) checkContent(agent string, line []byte) error {
	sw.mu.Lock()
	init := sw.slots[agent].init
	sw.mu.Unlock()
	if init == nil {
		return nil // not known yet: the agent answers for itself
	}
	caps := promisedBy(init)
	var p struct {
		Params struct {
			Prompt []struct {
				Type string `json:"type"`
			} `json:"prompt"`
		} `json:"params"`
	}
	// A prompt whose blocks cannot be read goes on; its agent answers it.
	_ = json.Unmarshal(line, &p)
	for _, b := range p.Params.Prompt {
		need := map[string]string{"image": "image", "audio": "audio", "resource": "embeddedContext"}[b.Type]
		if need != "" && !caps.prompt[need] {
			return wire.Refuse(proxy.CodeInvalidParams, "Invalid params: acp-sidecar: agent %s does not accept %s content (promptCapabilities.%s); the prompt was not sent", agent, b.Type, need)
		}
	}
	return nil
}

// mcpFits refuses a move to an agent that cannot connect the session's MCP
// servers by their transport.
func (sw *Switchboard) mcpFits(ctx context.Context, sid, agent string) error {
	rec, err := sw.cfg.Store.Session(ctx, sid)
	if err != nil {
		return nil // the adopting recorder reports a missing record
	}
	var servers []struct {
		Type string `json:"type"`
	}
	// Servers that cannot be read are none the move must check.
	_ = json.Unmarshal(rec.McpServers, &servers)
	init, err := sw.initOf(ctx, agent)
	if err != nil {
		return err
	}
	caps := promisedBy(init)
	for _, s := range servers {
		if (s.Type == "http" || s.Type == "sse") && !caps.mcp[s.Type] {
			return wire.Refuse(proxy.CodeInvalidParams, "agent %s cannot connect this session's %s MCP servers (mcpCapabilities.%s); the session stays where it is", agent, s.Type, s.Type)
		}
	}
	return nil
}

// idleLoop stops agents that no session uses, once they have been unused
// for the idle time; they start again when something needs them.
func (sw *Switchboard) idleLoop(ctx context.Context) {
	if sw.cfg.Idle <= 0 {
		return
	}
	tick := time.NewTicker(min(max(sw.cfg.Idle/4, 10*time.Millisecond), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, sl := range sw.idle(time.Now()) {
			sw.stop(sl)
		}
	}
}

// idle lists the running agents with no session, no request in flight and
// no traffic for the idle time.
func (sw *Switchboard) idle(now time.Time) []*slot {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	used := map[string]bool{}
	for _, a := range sw.bound {
		used[a] = true
	}
	for _, r := range sw.pending {
		used[r.agent] = true
	}
	for _, m := range sw.moves {
		used[m.to] = true // the agent a session leaves is still its bound one
	}
	var out []*slot
	for _, sl := range sw.slots {
		if sl.b != nil && !used[sl.name] && now.Sub(sl.used) >= sw.cfg.Idle {
			out = append(out, sl)
		}
	}
	return out
}

func (sw *Switchboard) stop(sl *slot) {
	sl.start.Lock()
	defer sl.start.Unlock()
	sw.mu.Lock()
	b := sl.b
	sl.b = nil // whatever needs the agent from now on waits for a fresh start
	sw.mu.Unlock()
	if b == nil {
		return
	}
	sw.log.Info("stopping an agent no session uses", "agent", sl.name, "idle", sw.cfg.Idle.String())
	b.Stop()
}

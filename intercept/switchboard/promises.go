package switchboard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// What the client is promised: only what every configured agent supports,
// so a session can move anywhere; a prompt or a move that needs more of an
// agent than it said it can do is refused by name.

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

// promptKinds are the prompt capabilities the client is promised only when
// every agent has them; mcpKinds the same for MCP transports.
var (
	promptKinds = []string{"image", "audio", "embeddedContext"}
	mcpKinds    = []string{"http", "sse"}
)

func setOr(line, val []byte, path ...string) []byte {
	out, err := wire.SetPath(line, val, path...)
	if err != nil {
		return line
	}
	return out
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
	names := wire.Encode(sw.sel.names())
	out = setOr(out, names, "result", "agentCapabilities", "_meta", "acp-sidecar", "agents")
	if more, err := wire.InsertArray(out, false, [][]byte{[]byte(`"` + wire.ExtAgent + `"`)}, "result", "agentCapabilities", "_meta", "acp-sidecar", "methods"); err == nil {
		out = more
	}
	def := wire.Encode(sw.cfg.Default)
	return setOr(out, def, "result", "agentCapabilities", "_meta", "acp-sidecar", "defaultAgent")
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

package switchboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// The client's side: where each client frame goes.

// clientFrame decides where one client frame goes; it is the port's route.
// The frame was scanned once, by the port, and goes on to its agent's relay
// as it is.
func (sw *Switchboard) clientFrame(ctx context.Context, f *proxy.Frame) {
	env := &f.Env
	if env.Kind == proxy.KindResponse {
		sw.clientResponse(ctx, f)
		return
	}
	line := f.Raw
	sid := wire.SessionIDOf(f)
	method := string(env.Method)
	isReq := env.Kind == proxy.KindRequest
	if isReq {
		sw.answers.take(env.ID, method, sid)
		switch method {
		case wire.Initialize:
			var p struct {
				Params json.RawMessage `json:"params"`
			}
			// A frame that scanned is valid JSON, and params of any
			// shape decode into a RawMessage.
			_ = json.Unmarshal(line, &p)
			sw.mu.Lock()
			sw.initParams = wire.CompactJSON(p.Params)
			sw.mu.Unlock()
		case wire.SetConfigOption:
			if id, value, ok := selectorChoice(line); ok && id == SelectorID {
				sw.startMove(ctx, env.ID, sid, value, false)
				return
			}
		case wire.Prompt:
			if name, ok := agentSlash(line); ok {
				sw.startMove(ctx, env.ID, sid, name, true)
				return
			}
		case wire.ExtAgent:
			var p struct {
				Params struct {
					Agent string `json:"agent"`
				} `json:"params"`
			}
			// A params member that is no object leaves Agent empty,
			// which the move refuses by name.
			_ = json.Unmarshal(line, &p)
			sw.startMove(ctx, env.ID, sid, p.Params.Agent, false)
			return
		}
	}
	var recorded string
	if isReq && (method == wire.SessionLoad || method == wire.SessionResume) {
		recorded = sw.recordedAgent(ctx, sid)
	}
	sw.route.Lock()
	defer sw.route.Unlock()
	sw.mu.Lock()
	if m := sw.moves[sid]; m != nil {
		m.queued = append(m.queued, bytes.Clone(line))
		sw.mu.Unlock()
		return
	}
	target := sw.targetOf(method, sid, line, recorded)
	sw.mu.Unlock()
	if isReq && method == wire.Prompt {
		if err := sw.checkContent(target, line); err != nil {
			sw.answers.respond(env.ID, proxy.ErrorResponse(env.ID, proxy.CodeInvalidParams, err.Error()))
			return
		}
	}
	var req *pendingReq
	if isReq {
		req = &pendingReq{agent: target, method: method, sid: sid}
	}
	sw.toAgent(ctx, target, f, req)
}

// targetOf is the agent a client request or notification goes to;
// recorded is the agent the record names for a session being loaded.
// Called with sw.mu held.
func (sw *Switchboard) targetOf(method, sid string, line []byte, recorded string) string {
	if method == "$/cancel_request" {
		var p struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		// Without a readable requestId the default agent gets it.
		_ = json.Unmarshal(line, &p)
		if r, ok := sw.answers.sent(wire.CompactJSON(p.Params.RequestID)); ok {
			return r.agent
		}
		return sw.cfg.Default
	}
	if a, ok := sw.bound[sid]; ok && sid != "" {
		return a
	}
	if recorded != "" {
		return recorded
	}
	return sw.cfg.Default
}

// recordedAgent is the configured agent the record says a session runs
// on, "" when there is none: a session this process has not seen goes
// there, and one whose agent is no longer configured goes to the default
// agent, whose recorder rebuilds it with a handoff.
func (sw *Switchboard) recordedAgent(ctx context.Context, sid string) string {
	sw.mu.Lock()
	_, bound := sw.bound[sid]
	sw.mu.Unlock()
	if bound || sid == "" {
		return ""
	}
	rec, err := sw.cfg.Store.Session(ctx, sid)
	if err != nil {
		return ""
	}
	if sw.slots[rec.AgentName] == nil {
		sw.log.Info("the session's recorded agent is not configured; it goes to the default agent", "session", sid, "recorded", rec.AgentName)
		return ""
	}
	return rec.AgentName
}

// clientResponse sends the client's answer to the agent that asked.
func (sw *Switchboard) clientResponse(ctx context.Context, f *proxy.Frame) {
	if !bytes.HasPrefix(f.Env.ID, []byte(askPrefix)) {
		sw.toAgent(ctx, sw.cfg.Default, f, nil)
		return
	}
	a, ok := sw.asks.take(f.Env.ID)
	if !ok {
		sw.log.Warn("client answered a request nobody is waiting for; dropped")
		return
	}
	out, err := wire.SetPath(f.Raw, a.id, "id")
	if err != nil {
		sw.log.Warn("cannot give a client answer its agent's id back; dropped", "err", err)
		return
	}
	env, err := proxy.Scan(out)
	if err != nil {
		sw.log.Warn("a client answer with its agent's id back is not valid; dropped", "err", err)
		return
	}
	sw.toAgent(ctx, a.agent, &proxy.Frame{Dir: proxy.ClientToAgent, Raw: out, Env: env}, nil)
}

// toAgent hands a client frame to an agent's relay, starting the agent if
// it is not running. A request that cannot be delivered is answered.
func (sw *Switchboard) toAgent(ctx context.Context, name string, f *proxy.Frame, req *pendingReq) {
	var id []byte
	if req != nil {
		id = f.Env.ID
	}
	var err error
	for try := 0; try < 2; try++ {
		// The request counts as in flight before the agent is looked up,
		// so the idle stop passes the agent over from here on.
		sw.mu.Lock()
		if id != nil {
			sw.answers.at(id, req, ledger.Sent)
		}
		if sl := sw.slots[name]; sl != nil {
			sl.used = time.Now()
		}
		sw.mu.Unlock()
		var b *Backend
		if b, err = sw.ensure(ctx, name); err == nil {
			if err = b.Relay.Feed(ctx, f); err == nil {
				return
			}
		}
		if id != nil {
			sw.answers.at(id, req, ledger.Taken)
		}
		if !errors.Is(err, proxy.ErrClosed) {
			break // a closed relay is an agent stopped meanwhile: start it again once
		}
	}
	if id != nil {
		sw.answers.respond(id, proxy.ErrorResponse(id, proxy.CodeAgentGone, fmt.Sprintf("acp-sidecar: agent %s is not running: %v", name, err)))
	}
}

// selectorChoice reads a set_config_option's configId and string value.
func selectorChoice(line []byte) (id, value string, ok bool) {
	var p struct {
		Params struct {
			ConfigID string          `json:"configId"`
			Value    json.RawMessage `json:"value"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &p) != nil {
		return "", "", false
	}
	return p.Params.ConfigID, wire.Unquote(p.Params.Value), true
}

// agentSlash finds "/agent NAME" in a prompt of one text block.
func agentSlash(line []byte) (string, bool) {
	text, ok := wire.OnlyText(line)
	if !ok {
		return "", false
	}
	text = strings.TrimSpace(text)
	if text != "/agent" && !strings.HasPrefix(text, "/agent ") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimPrefix(text, "/agent")), true
}

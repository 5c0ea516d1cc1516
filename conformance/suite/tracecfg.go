package suite

import (
	"encoding/json"
	"fmt"
	"strings"
)

// traceFrame is what the config tracker reads of a frame in the trace.
type traceFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// tracedRequest is a request on its way to the agent, as it left the
// sidecar (its rewrite, when there is one, follows the original).
type tracedRequest struct {
	method string
	params struct {
		SessionID string `json:"sessionId"`
		ConfigID  string `json:"configId"`
		Value     string `json:"value"`
		ModeID    string `json:"modeId"`
		ModelID   string `json:"modelId"`
	}
}

// agentConfigs follows, through a sidecar's trace, the config the agent
// itself reported for each native session: session results, set_* answers
// and config reports, all in the agent's own frames. The sidecar's word
// (its rewrites and synthetic reports) never counts, so what it says is
// whatever the agent really ran on.
type agentConfigs struct {
	reqs map[string]*tracedRequest // by id, both the client's and the sidecar's
	cfg  map[string]*sessionConfig // by native session id
}

func newAgentConfigs() *agentConfigs {
	return &agentConfigs{reqs: map[string]*tracedRequest{}, cfg: map[string]*sessionConfig{}}
}

// see takes in one trace entry.
func (a *agentConfigs) see(e traceEntry) {
	var f traceFrame
	if json.Unmarshal(e.Frame, &f) != nil {
		return
	}
	switch {
	case e.Dir == "client->agent" && f.Method != "" && len(f.ID) > 0:
		if f.Method == "initialize" && e.From == "sidecar" {
			// The sidecar starts a fresh agent: its sessions died with the
			// old one, and a fake agent numbers its ids from 1 again.
			a.cfg = map[string]*sessionConfig{}
		}
		q := &tracedRequest{method: f.Method}
		_ = json.Unmarshal(f.Params, &q.params) // a request without them tracks nothing
		a.reqs[string(f.ID)] = q
	case e.Dir == "agent->client" && e.From == "peer" && f.Method == "" && len(f.ID) > 0:
		q := a.reqs[string(f.ID)]
		if q == nil || len(f.Error) > 0 {
			return
		}
		a.answered(q, f.Result)
	case e.Dir == "agent->client" && e.From == "peer" && f.Method == "session/update":
		var p configUpdate
		if json.Unmarshal(f.Params, &p) != nil || a.cfg[p.SessionID] == nil {
			return
		}
		s := a.cfg[p.SessionID]
		switch p.Update.Kind {
		case "config_option_update":
			if opts, ok := parseOptions(p.Update.ConfigOptions); ok {
				s.Options = opts
			}
		case "current_mode_update":
			if s.Modes != nil {
				s.Modes.Current = p.Update.CurrentModeID
			}
		}
	}
}

func (a *agentConfigs) answered(q *tracedRequest, result json.RawMessage) {
	switch q.method {
	case "session/new", "session/fork":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(result, &r) == nil && r.SessionID != "" {
			a.cfg[r.SessionID] = parseConfig(result)
		}
	case "session/load", "session/resume":
		a.cfg[q.params.SessionID] = parseConfig(result)
	case "session/set_config_option":
		var r struct {
			ConfigOptions json.RawMessage `json:"configOptions"`
		}
		if s := a.cfg[q.params.SessionID]; s != nil && json.Unmarshal(result, &r) == nil {
			if opts, ok := parseOptions(r.ConfigOptions); ok {
				s.Options = opts
			}
		}
	case "session/set_mode":
		if s := a.cfg[q.params.SessionID]; s != nil && s.Modes != nil {
			s.Modes.Current = q.params.ModeID
		}
	case "session/set_model":
		if s := a.cfg[q.params.SessionID]; s != nil && s.Models != nil {
			s.Models.Current = q.params.ModelID
		}
	}
}

// ranOn finds the client's prompt id as it reached the agent and returns
// the native session it went to and that session's config at that moment,
// as the agent had reported it.
func ranOn(entries []traceEntry, id string) (string, *sessionConfig, error) {
	a := newAgentConfigs()
	native, at := "", -1
	for i, e := range entries {
		var f traceFrame
		if e.Dir == "client->agent" && json.Unmarshal(e.Frame, &f) == nil && string(f.ID) == id && f.Method == "session/prompt" {
			native, at = sessionIDOf(f.Params), i // a rewrite follows the frame it rewrites
		}
	}
	if at < 0 || !agentAnsweredID(entries[at:], id) {
		return "", nil, fmt.Errorf("the trace does not show prompt %s reaching the agent and answered by it", id)
	}
	for _, e := range entries[:at] {
		a.see(e)
	}
	cfg := a.cfg[native]
	if cfg == nil {
		return native, nil, fmt.Errorf("the trace shows prompt %s going to native session %s, which the agent never reported opening", id, native)
	}
	return native, cfg.clone(), nil
}

func sessionIDOf(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p) // a frame without one has none
	return p.SessionID
}

// sidecarOpens lists the session opens (new, load, resume, fork) the
// sidecar sent on its own among entries.
func sidecarOpens(entries []traceEntry) []string {
	var out []string
	for _, e := range entries {
		var f traceFrame
		if e.Dir != "client->agent" || json.Unmarshal(e.Frame, &f) != nil {
			continue
		}
		var id string
		if json.Unmarshal(f.ID, &id) != nil || !strings.HasPrefix(id, "acp-sidecar:") {
			continue
		}
		switch f.Method {
		case "session/new", "session/load", "session/resume", "session/fork":
			out = append(out, f.Method)
		}
	}
	return out
}

// agentAnswered reports whether the agent itself answered a client request
// of method: the trace keeps every frame the client sent, whether the
// sidecar passed it on or answered it, so only the agent's own answer shows
// that the agent had it.
func agentAnswered(entries []traceEntry, method string) bool {
	ids := map[string]bool{}
	for _, e := range entries {
		var f traceFrame
		if json.Unmarshal(e.Frame, &f) != nil || len(f.ID) == 0 {
			continue
		}
		switch {
		case e.Dir == "client->agent" && e.From == "peer" && f.Method == method:
			ids[string(f.ID)] = true
		case e.Dir == "agent->client" && e.From == "peer" && f.Method == "" && ids[string(f.ID)]:
			return true
		}
	}
	return false
}

// agentAnsweredID reports whether the agent itself answered request id.
func agentAnsweredID(entries []traceEntry, id string) bool {
	for _, e := range entries {
		var f traceFrame
		if e.Dir == "agent->client" && e.From == "peer" && json.Unmarshal(e.Frame, &f) == nil && f.Method == "" && string(f.ID) == id {
			return true
		}
	}
	return false
}

package switchboard

import (
	"encoding/json"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// selector is how the client picks an agent: the config option SelectorID
// in every configOptions list, and the /agent command in every command
// list. It names the configured agents, in order.
type selector struct {
	agents []AgentRef
}

// names are the configured agents' names, in the selector's order.
func (s selector) names() []string {
	out := make([]string, len(s.agents))
	for i, a := range s.agents {
		out[i] = a.Name
	}
	return out
}

// option is the agent selector with current selected.
func (s selector) option(current string) []byte {
	opts := make([]map[string]any, 0, len(s.agents))
	for _, a := range s.agents {
		opts = append(opts, map[string]any{"value": a.Name, "name": a.Name, "description": strings.Join(a.Command, " ")})
	}
	b := wire.Encode(map[string]any{
		"id": SelectorID, "name": "Agent", "description": "acp-sidecar: the agent this session runs on; switching keeps the conversation",
		"category": selectorCategory, "type": "select", "currentValue": current, "options": opts,
	})
	return b
}

// with appends the selector to the configOptions list at path, when
// there is one: an agent without config options keeps its legacy modes and
// models, which a list of the selector alone would hide in some editors.
func (s selector) with(line []byte, current string, path ...string) []byte {
	start, end, ok := wire.Find(line, path...)
	if !ok || wire.IsNull(line[start:end]) {
		return line
	}
	out, err := wire.InsertArray(line, false, [][]byte{s.option(current)}, path...)
	if err != nil {
		return line
	}
	return out
}

// options is an agent's configOptions list with the selector
// last; a list the agent does not have is the selector alone, since the
// client that asked uses config options.
func (s selector) options(opts json.RawMessage, current string) json.RawMessage {
	var list []json.RawMessage
	// A list that is not one (or none) leaves the selector alone.
	_ = json.Unmarshal(opts, &list)
	list = append(list, s.option(current))
	b := wire.Encode(list)
	return b
}

// command is the /agent entry of a command list.
func (s selector) command() []byte {
	b := wire.Encode(map[string]any{
		"name":        "agent",
		"description": "acp-sidecar: move this session to another agent (" + strings.Join(s.names(), ", ") + "); the kept turns go with it",
		"input":       map[string]any{"hint": "NAME"},
	})
	return b
}

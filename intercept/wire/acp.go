package wire

import (
	"bytes"
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// This file turns the few ACP payloads the sidecar reads into state's types.
// It decodes only what it needs and keeps the raw JSON beside it: the SDK's
// types drop unknown fields and fail on unknown option types (go-libs.md §1),
// so each option is decoded on its own and one the SDK cannot type is still
// kept, by its id, in the agent's own words.

// ConfigPayload is what session results, set_config_option results and
// config_option_update carry.
type ConfigPayload struct {
	ConfigOptions json.RawMessage `json:"configOptions"`
	Modes         json.RawMessage `json:"modes"`
	Models        json.RawMessage `json:"models"`
}

// wireOption is one configOptions entry; only its id is required. ACP v1
// names it id, v2 configId (v2.go).
type wireOption struct {
	ID           string          `json:"id"`
	ConfigID     string          `json:"configId"`
	Name         string          `json:"name"`
	Category     string          `json:"category"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      json.RawMessage `json:"options"`
}

// ParseOptions decodes a configOptions array. It reports false when raw is
// absent or null, so "no options in this payload" differs from "an empty list".
func ParseOptions(raw json.RawMessage) ([]state.Option, bool) {
	if IsNull(raw) {
		return nil, false
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	out := make([]state.Option, 0, len(elems))
	for _, e := range elems {
		var w wireOption
		if json.Unmarshal(e, &w) != nil {
			continue
		}
		if w.ID == "" {
			w.ID = w.ConfigID
		}
		if w.ID == "" {
			continue
		}
		o := state.Option{ID: w.ID, Name: w.Name, Category: w.Category, Type: w.Type, Current: CompactJSON(w.CurrentValue), Raw: CompactJSON(e)}
		if o.Type == "" && w.Options != nil {
			o.Type = "select"
		}
		if w.Options != nil {
			var sel acp.SessionConfigSelectOptions
			if json.Unmarshal(w.Options, &sel) == nil {
				o.Values = selectValues(sel)
			}
		}
		if o.Type == "boolean" {
			o.Values = []state.Value{{Value: json.RawMessage("true")}, {Value: json.RawMessage("false")}}
		}
		out = append(out, o)
	}
	return out, true
}

// selectValues lists the values of a select option, its groups flattened.
func selectValues(sel acp.SessionConfigSelectOptions) []state.Value {
	var out []state.Value
	add := func(opts []acp.SessionConfigSelectOption) {
		for _, v := range opts {
			b := String(string(v.Value))
			out = append(out, state.Value{Value: b, Name: v.Name})
		}
	}
	if sel.Ungrouped != nil {
		add(*sel.Ungrouped)
	}
	if sel.Grouped != nil {
		for _, g := range *sel.Grouped {
			add(g.Options)
		}
	}
	return out
}

func ParseModes(raw json.RawMessage) *state.Legacy {
	if IsNull(raw) {
		return nil
	}
	var m acp.SessionModeState
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	l := &state.Legacy{Current: string(m.CurrentModeId), Raw: CompactJSON(raw)}
	for _, a := range m.AvailableModes {
		l.Available = append(l.Available, string(a.Id))
	}
	return l
}

func ParseModels(raw json.RawMessage) *state.Legacy {
	if IsNull(raw) {
		return nil
	}
	var m acp.SessionModelState
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	l := &state.Legacy{Current: string(m.CurrentModelId), Raw: CompactJSON(raw)}
	for _, a := range m.AvailableModels {
		l.Available = append(l.Available, string(a.ModelId))
	}
	return l
}

// ConfigFromResult reads a session result's whole config.
func ConfigFromResult(raw json.RawMessage) *state.Config {
	var p ConfigPayload
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	c := &state.Config{Mode: ParseModes(p.Modes), Model: ParseModels(p.Models), Raw: CompactJSON(raw)}
	c.Options, _ = ParseOptions(p.ConfigOptions)
	if c.Options == nil && c.Mode == nil && c.Model == nil {
		return &state.Config{}
	}
	return c
}

// PromptContent pulls the content blocks and their text out of a
// session/prompt request. With handoff set the first block is the sidecar's
// and is left out: the turn records what the user sent.
func PromptContent(params json.RawMessage, handoff bool) (blocks json.RawMessage, text string) {
	var p struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil, ""
	}
	if handoff {
		var all []json.RawMessage
		if json.Unmarshal(p.Prompt, &all) == nil && len(all) > 0 {
			p.Prompt, _ = json.Marshal(all[1:]) // raw blocks that decoded always encode
		}
	}
	var bl []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(p.Prompt, &bl) != nil {
		// Not a list of blocks: the turn keeps the prompt as sent, with no
		// text of its own.
		return CompactJSON(p.Prompt), ""
	}
	var parts []string
	for _, b := range bl {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return CompactJSON(p.Prompt), strings.Join(parts, "\n")
}

// UpdateFields is what the recorder reads of a session/update. Chunks are the
// common case by far, and only their text is taken.
type UpdateFields struct {
	Update struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		ToolCallID    string          `json:"toolCallId"`
		Title         *string         `json:"title"`
		Status        *string         `json:"status"`
		ConfigOptions json.RawMessage `json:"configOptions"`
		CurrentModeID string          `json:"currentModeId"`
		// A v2 state_update's: the session's foreground state, and with
		// idle, why the turn stopped.
		State      string `json:"state"`
		StopReason string `json:"stopReason"`
	} `json:"update"`
}

// SessionIDOf reads params.sessionId from its peeked span; "" when absent
// or not a string.
func SessionIDOf(f *proxy.Frame) string {
	sp := f.Env.SessionID
	if !sp.Present() {
		return ""
	}
	tok := f.Raw[sp.Start:sp.End]
	if len(tok) >= 2 && tok[0] == '"' && bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1]) // the common case: no escapes to undo
	}
	var id string
	if json.Unmarshal(tok, &id) != nil {
		return "" // not a string: no session id
	}
	return id
}

// IsNull says whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// CompactJSON is raw without insignificant white space, or raw as it is
// when it does not parse.
func CompactJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return buf.Bytes()
}

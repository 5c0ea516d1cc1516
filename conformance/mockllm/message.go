package mockllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// message is one assistant reply: a single text block that ends the turn.
type message struct {
	ID                        string
	Model                     string
	Text                      string
	InputTokens, OutputTokens int
}

func (m message) usage(output int) map[string]int {
	return map[string]int{
		"input_tokens":                m.InputTokens,
		"output_tokens":               output,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     0,
	}
}

// full is the non-streaming response body.
func (m message) full() map[string]any {
	return map[string]any{
		"id":            m.ID,
		"type":          "message",
		"role":          "assistant",
		"model":         m.Model,
		"content":       []map[string]string{{"type": "text", "text": m.Text}},
		"stop_reason":   "end_turn",
		"stop_sequence": nil,
		"usage":         m.usage(m.OutputTokens),
	}
}

// sseEvent is one server-sent event: its name and its JSON data.
type sseEvent struct {
	name string
	data any
}

// stream writes the reply as the API's server-sent events. The text is split
// into word-sized deltas so clients exercise their chunk joining, and each
// event is flushed so they see a real stream.
func (m message) stream(w http.ResponseWriter) error {
	start := m.full()
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = m.usage(1)
	events := []sseEvent{
		{"message_start", map[string]any{"type": "message_start", "message": start}},
		{"content_block_start", map[string]any{
			"type": "content_block_start", "index": 0,
			"content_block": map[string]string{"type": "text", "text": ""},
		}},
	}
	for _, chunk := range splitWords(m.Text) {
		events = append(events, sseEvent{"content_block_delta", map[string]any{
			"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "text_delta", "text": chunk},
		}})
	}
	events = append(events, []sseEvent{
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": m.OutputTokens},
		}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}...)
	w.Header().Set("request-id", "req_"+m.ID)
	return writeEvents(w, events)
}

// streamRead writes, as the API's server-sent events, a reply that calls
// the agent's Read tool on path (ReadMarker) and ends the turn for it.
func (m message) streamRead(w http.ResponseWriter, id, path string) error {
	return m.streamTool(w, id, "Read", map[string]any{"file_path": path})
}

// streamBackground writes a reply that runs command with the agent's Bash
// tool in the background (BackgroundMarker) and ends the turn for it.
func (m message) streamBackground(w http.ResponseWriter, id, command string) error {
	return m.streamTool(w, id, "Bash", map[string]any{"command": command, "description": "mock-llm background command", "run_in_background": true})
}

// streamTool writes, as the API's server-sent events, a reply that calls
// the agent's tool name with input and ends the turn for it.
func (m message) streamTool(w http.ResponseWriter, id, name string, in map[string]any) error {
	start := m.full()
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = m.usage(1)
	input, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode the %s call: %w", name, err)
	}
	events := []sseEvent{
		{"message_start", map[string]any{"type": "message_start", "message": start}},
		{"content_block_start", map[string]any{
			"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}},
		}},
		{"content_block_delta", map[string]any{
			"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "input_json_delta", "partial_json": string(input)},
		}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": m.OutputTokens},
		}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}
	w.Header().Set("request-id", "req_"+m.ID)
	return writeEvents(w, events)
}

// writeEvents answers 200 with events as a server-sent event stream, each
// event flushed as it is written so the client sees a real stream. Headers
// set on w before the call go out with it.
func writeEvents(w http.ResponseWriter, events []sseEvent) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, e := range events {
		data, err := json.Marshal(e.data)
		if err != nil {
			return fmt.Errorf("encode %s: %w", e.name, err)
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, data); err != nil {
			return fmt.Errorf("write %s: %w", e.name, err)
		}
		if err := rc.Flush(); err != nil {
			return fmt.Errorf("flush %s: %w", e.name, err)
		}
	}
	return nil
}

// splitWords cuts s after each space, so the pieces concatenate back to s.
func splitWords(s string) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

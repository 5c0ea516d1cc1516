package mockllm

import (
	"net/http"
)

// response is one reply in the OpenAI Responses API's shape: a single
// assistant message with one output_text part, which ends the turn. It is
// what codex reads (codex-rs/codex-api/src/sse/responses.rs): the text from
// response.output_text.delta, the message from response.output_item.done,
// and the end of the turn, with usage, from response.completed; a stream
// that ends without response.completed is an error it retries.
//
// The embedded message's ID is the output message's id; the response has
// its own.
type response struct {
	message
	RespID  string
	Created int64 // created_at, seconds since the epoch
}

// item is the output message, complete (done) or as it starts (empty content).
func (m response) item(done bool) map[string]any {
	item := map[string]any{
		"id":      m.ID,
		"type":    "message",
		"role":    "assistant",
		"status":  "in_progress",
		"content": []any{},
	}
	if done {
		item["status"] = "completed"
		item["content"] = []any{m.part(m.Text)}
	}
	return item
}

func (m response) part(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// full is the response object: in progress (no output, no usage) or
// completed.
func (m response) full(done bool) map[string]any {
	r := map[string]any{
		"id":         m.RespID,
		"object":     "response",
		"created_at": m.Created,
		"status":     "in_progress",
		"model":      m.Model,
		"output":     []any{},
		"usage":      nil,
		"error":      nil,
	}
	if done {
		r["status"] = "completed"
		r["output"] = []any{m.item(true)}
		r["usage"] = map[string]any{
			"input_tokens":          m.InputTokens,
			"input_tokens_details":  map[string]int{"cached_tokens": 0},
			"output_tokens":         m.OutputTokens,
			"output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens":          m.InputTokens + m.OutputTokens,
		}
	}
	return r
}

// stream writes the reply as the Responses API's server-sent events, in
// the order the API sends them for a one-message answer, each with its
// sequence_number. The text is split into word-sized deltas.
func (m response) stream(w http.ResponseWriter) error {
	// partEvent is an event about the message's one output_text part.
	partEvent := func(typ, key string, val any) map[string]any {
		return map[string]any{"type": typ, "item_id": m.ID, "output_index": 0, "content_index": 0, key: val}
	}
	data := []map[string]any{
		{"type": "response.created", "response": m.full(false)},
		{"type": "response.in_progress", "response": m.full(false)},
		{"type": "response.output_item.added", "output_index": 0, "item": m.item(false)},
		partEvent("response.content_part.added", "part", m.part("")),
	}
	for _, chunk := range splitWords(m.Text) {
		data = append(data, partEvent("response.output_text.delta", "delta", chunk))
	}
	data = append(data,
		partEvent("response.output_text.done", "text", m.Text),
		partEvent("response.content_part.done", "part", m.part(m.Text)),
		map[string]any{"type": "response.output_item.done", "output_index": 0, "item": m.item(true)},
		map[string]any{"type": "response.completed", "response": m.full(true)},
	)
	events := make([]sseEvent, len(data))
	for i, d := range data {
		d["sequence_number"] = i
		events[i] = sseEvent{d["type"].(string), d}
	}
	w.Header().Set("x-request-id", "req_"+m.RespID)
	return writeEvents(w, events)
}

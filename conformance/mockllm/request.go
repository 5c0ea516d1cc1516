package mockllm

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A Request is one HTTP request the mock received, as recorded in its log.
// Its JSON form is one line of the -log file.
type Request struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Query  string    `json:"query,omitempty"`
	// Header holds the request headers except credentials (see
	// redactedHeaders). Agents say things there that the body does not, such
	// as anthropic-beta flags for a 1M context window.
	Header http.Header `json:"header,omitempty"`
	// Status is the HTTP status the mock answered with.
	Status int `json:"status"`
	// Model, Effort and Stream are copied from the body of a turn request
	// (Messages or Responses API), so the log can be scanned without
	// decoding bodies. Effort is the reasoning effort the agent asked for:
	// output_config.effort in a Messages request, reasoning.effort in a
	// Responses request; "" when the body names none.
	Model  string `json:"model,omitempty"`
	Effort string `json:"effort,omitempty"`
	Stream bool   `json:"stream"`
	// Body is the request body exactly as sent when it is valid JSON. A body
	// that is not JSON is kept as a JSON string, so the log stays one JSON
	// value per line.
	Body json.RawMessage `json:"body,omitempty"`
}

// redactedHeaders are left out of the log: the log may be kept as a CI
// artifact, and a key in it would be a leak even if tests use dummy keys.
var redactedHeaders = []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization"}

// loggedHeader returns a copy of h without the redacted headers.
func loggedHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range redactedHeaders {
		out.Del(k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// turnBody is the part of a turn request body the mock reads, in either
// API's shape: a Messages request has system and messages, a Responses
// request instructions and input. Content, system, instructions and input
// are polymorphic in the APIs (a string or a list), so they stay raw until
// asked for.
type turnBody struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`

	// Messages API.
	System       json.RawMessage   `json:"system"`
	Messages     []messagesMessage `json:"messages"`
	OutputConfig struct {
		Effort string `json:"effort"`
	} `json:"output_config"`

	// Responses API.
	Instructions json.RawMessage `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Reasoning    struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

// effort returns the reasoning effort the body asks for, in either API.
func (b turnBody) effort() string {
	if b.Reasoning.Effort != "" {
		return b.Reasoning.Effort
	}
	return b.OutputConfig.Effort
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// A responsesItem is one element of a Responses request's input list. Only
// messages (type "message", or no type with a role) carry conversation;
// reasoning, function calls and tool lists are skipped.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// decode returns the parsed body; a body that is not a turn request
// decodes to the zero value, which the accessors treat as empty.
func (r Request) decode() turnBody {
	var b turnBody
	_ = json.Unmarshal(r.Body, &b) // best effort: any other body has no messages
	return b
}

// conversation returns the request's messages in order, system prompt
// aside: a Messages request's messages, or a Responses request's user and
// assistant messages (developer and system messages are its system prompt,
// see System).
func (r Request) conversation() []messagesMessage {
	b := r.decode()
	if b.Input == nil {
		return b.Messages
	}
	var out []messagesMessage
	for _, m := range responsesMessages(b.Input) {
		if m.Role == "user" || m.Role == "assistant" {
			out = append(out, m)
		}
	}
	return out
}

// responsesMessages returns the message items of a Responses input, which
// is a string (one user message) or a list of items.
func responsesMessages(input json.RawMessage) []messagesMessage {
	var s string
	if json.Unmarshal(input, &s) == nil {
		return []messagesMessage{{Role: "user", Content: input}}
	}
	var items []responsesItem
	if json.Unmarshal(input, &items) != nil {
		return nil
	}
	var out []messagesMessage
	for _, it := range items {
		if it.Type == "message" || (it.Type == "" && it.Role != "") {
			out = append(out, messagesMessage{Role: it.Role, Content: it.Content})
		}
	}
	return out
}

// Messages reports how many messages (user and assistant turns) the request
// carried. Agents resend the whole conversation, so this grows per turn.
func (r Request) Messages() int {
	return len(r.conversation())
}

// UserTexts returns the text of every text block of every user message, in
// order. A message whose content is a plain string counts as one block.
// Agents prepend context blocks (claude's <system-reminder>s, codex's
// <environment_context>) to the user's own text, so the typed prompt is
// usually the last element.
func (r Request) UserTexts() []string {
	var out []string
	for _, m := range r.conversation() {
		if m.Role == "user" {
			out = append(out, texts(m.Content)...)
		}
	}
	return out
}

// Texts returns the text of every text block of every message, user and
// assistant alike, in order: the whole conversation the LLM was shown.
func (r Request) Texts() []string {
	var out []string
	for _, m := range r.conversation() {
		out = append(out, texts(m.Content)...)
	}
	return out
}

// LastUserText returns the last text block of the last user message that has
// one, or "" if there is none.
func (r Request) LastUserText() string {
	msgs := r.conversation()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		if t := texts(msgs[i].Content); len(t) > 0 {
			return t[len(t)-1]
		}
	}
	return ""
}

// System returns the system prompt, its text blocks joined by newlines: a
// Messages request's system, or a Responses request's instructions followed
// by its developer and system messages.
func (r Request) System() string {
	b := r.decode()
	if b.Input == nil {
		return strings.Join(texts(b.System), "\n")
	}
	out := texts(b.Instructions)
	for _, m := range responsesMessages(b.Input) {
		if m.Role == "developer" || m.Role == "system" {
			out = append(out, texts(m.Content)...)
		}
	}
	return strings.Join(out, "\n")
}

// texts extracts the text of a content value that is either a string or a
// list of blocks; blocks that are not text (images, tool results) are
// skipped. Text blocks are "text" in the Messages API and "input_text" or
// "output_text" in the Responses API.
func texts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}
	}
	var blocks []contentBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		switch b.Type {
		case "text", "input_text", "output_text":
			out = append(out, b.Text)
		}
	}
	return out
}

// ToolResults returns the text of every tool_result block of every user
// message, in order (a Messages request's; a Responses request has none
// the mock reads): what the agent's tools gave the LLM.
func (r Request) ToolResults() []string {
	var out []string
	for _, m := range r.conversation() {
		if m.Role != "user" {
			continue
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, strings.Join(texts(b.Content), "\n"))
			}
		}
	}
	return out
}

// readRequest is the file a turn request asks the mock to read with the
// agent's Read tool, "" for none (toolAsk with ReadMarker): the first word
// after the marker.
func (r Request) readRequest() string {
	path, _, _ := strings.Cut(r.toolAsk("Read", ReadMarker), " ")
	return path
}

// backgroundRequest is the shell command a turn request asks the mock to
// run in the background with the agent's Bash tool, "" for none (toolAsk
// with BackgroundMarker): the rest of the text after the marker.
func (r Request) backgroundRequest() string { return r.toolAsk("Bash", BackgroundMarker) }

// toolAsk is what follows marker in a turn request that asks the mock to
// call the agent's tool, trimmed, "" for none: the request offers the
// tool, and its last user or assistant message is the user's, with marker
// in its last text and no tool result (claude-agent-acp puts a system-role
// message after the user's; its title request offers no tools).
func (r Request) toolAsk(tool, marker string) string {
	var b struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(r.Body, &b) // a body without tools asks for no tool
	if !slices.ContainsFunc(b.Tools, func(t struct {
		Name string `json:"name"`
	}) bool {
		return t.Name == tool
	}) {
		return ""
	}
	msgs := r.conversation()
	for len(msgs) > 0 && msgs[len(msgs)-1].Role != "user" && msgs[len(msgs)-1].Role != "assistant" {
		msgs = msgs[:len(msgs)-1]
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" || strings.Contains(string(msgs[len(msgs)-1].Content), `"tool_result"`) {
		return ""
	}
	t := texts(msgs[len(msgs)-1].Content)
	if len(t) == 0 {
		return ""
	}
	_, rest, ok := strings.Cut(t[len(t)-1], marker)
	if !ok {
		return ""
	}
	return strings.TrimSpace(rest)
}

package mockllm

import (
	"encoding/json"
	"net/http"
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
	// Model and Stream are copied from the body of a messages request, so the
	// log can be scanned without decoding bodies.
	Model  string `json:"model,omitempty"`
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

// messagesBody is the part of a Messages API request body the mock reads.
// Content and system are polymorphic in the API (a string or a list of
// blocks), so they stay raw until asked for.
type messagesBody struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Messages []messagesMessage `json:"messages"`
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// decode returns the parsed body; a body that is not a messages request
// decodes to the zero value, which the accessors treat as empty.
func (r Request) decode() messagesBody {
	var b messagesBody
	_ = json.Unmarshal(r.Body, &b) // best effort: any other body has no messages
	return b
}

// Messages reports how many messages (user and assistant turns) the request
// carried. Agents resend the whole conversation, so this grows per turn.
func (r Request) Messages() int {
	return len(r.decode().Messages)
}

// UserTexts returns the text of every text block of every user message, in
// order. A message whose content is a plain string counts as one block.
// Agents prepend context blocks (claude's <system-reminder>s) to the user's
// own text, so the typed prompt is usually the last element.
func (r Request) UserTexts() []string {
	var out []string
	for _, m := range r.decode().Messages {
		if m.Role == "user" {
			out = append(out, texts(m.Content)...)
		}
	}
	return out
}

// LastUserText returns the last text block of the last user message that has
// one, or "" if there is none.
func (r Request) LastUserText() string {
	msgs := r.decode().Messages
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

// System returns the system prompt, its text blocks joined by newlines.
func (r Request) System() string {
	return strings.Join(texts(r.decode().System), "\n")
}

// texts extracts the text of a content value that is either a string or a
// list of blocks; blocks that are not text (images, tool results) are skipped.
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
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

package mockllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const helloBody = `{"model":"claude-opus-4-6","stream":%s,"system":[{"type":"text","text":"You are Claude."},{"type":"text","text":"Plan mode is active."}],` +
	`"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"},` +
	`{"role":"user","content":[{"type":"text","text":"<system-reminder>ctx</system-reminder>"},{"type":"tool_result","tool_use_id":"x","content":"r"},{"type":"text","text":"hello\nthere"}]}]}`

func body(stream bool) string {
	if stream {
		return strings.Replace(helloBody, "%s", "true", 1)
	}
	return strings.Replace(helloBody, "%s", "false", 1)
}

func TestDefaultReply(t *testing.T) {
	r := Request{Model: "claude-opus-4-6", Body: json.RawMessage(body(true))}
	want := "mock-llm: model=claude-opus-4-6 messages=3 last=hello there"
	if got := DefaultReply(r); got != want {
		t.Errorf("DefaultReply() = %q, want %q", got, want)
	}
	long := Request{Model: "m", Body: json.RawMessage(`{"messages":[{"role":"user","content":"` + strings.Repeat("é", 70) + `"}]}`)}
	if got, want := DefaultReply(long), "mock-llm: model=m messages=1 last="+strings.Repeat("é", 60); got != want {
		t.Errorf("DefaultReply(long) = %q, want %q", got, want)
	}
}

// responsesBody is a Responses API request as codex sends one: a tool list
// item, developer messages, then the conversation, with reasoning effort.
const responsesBody = `{"model":"gpt-6-luna","stream":%s,"reasoning":{"effort":"high","summary":"auto"},"instructions":"Be brief.",` +
	`"input":[{"type":"additional_tools","role":"developer","tools":[]},` +
	`{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},` +
	`{"type":"reasoning","summary":[]},` +
	`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},` +
	`{"role":"user","content":"hello"}]}`

func respBody(stream bool) string {
	return strings.Replace(responsesBody, "%s", map[bool]string{true: "true", false: "false"}[stream], 1)
}

func TestRequestAccessors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		userTexts []string
		last      string
		system    string
		messages  int
		texts     []string
	}{
		{"blocks", body(true), []string{"first", "<system-reminder>ctx</system-reminder>", "hello\nthere"}, "hello\nthere", "You are Claude.\nPlan mode is active.", 3,
			[]string{"first", "ok", "<system-reminder>ctx</system-reminder>", "hello\nthere"}},
		{"string system", `{"system":"sys","messages":[{"role":"user","content":"a"}]}`, []string{"a"}, "a", "sys", 1, []string{"a"}},
		{"last user has no text", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image"}]}]}`, []string{"a"}, "a", "", 2, []string{"a"}},
		{"responses", respBody(true), []string{"<environment_context/>", "first", "hello"}, "hello", "Be brief.\nYou are Codex.", 4,
			[]string{"<environment_context/>", "first", "ok", "hello"}},
		{"responses string input", `{"model":"m","input":"hi"}`, []string{"hi"}, "hi", "", 1, []string{"hi"}},
		{"not a messages body", `[1,2]`, nil, "", "", 0, nil},
		{"no body", ``, nil, "", "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Body: json.RawMessage(tt.body)}
			if got := r.UserTexts(); !equal(got, tt.userTexts) {
				t.Errorf("UserTexts() = %q, want %q", got, tt.userTexts)
			}
			if got := r.LastUserText(); got != tt.last {
				t.Errorf("LastUserText() = %q, want %q", got, tt.last)
			}
			if got := r.System(); got != tt.system {
				t.Errorf("System() = %q, want %q", got, tt.system)
			}
			if got := r.Messages(); got != tt.messages {
				t.Errorf("Messages() = %d, want %d", got, tt.messages)
			}
			if got := r.Texts(); !equal(got, tt.texts) {
				t.Errorf("Texts() = %q, want %q", got, tt.texts)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sseEvents reads a whole event stream into (name, data) pairs.
func sseEvents(t *testing.T, r io.Reader) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(r)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: bad data %q: %v", name, line, err)
			}
			if d["type"] != name {
				t.Errorf("event %s has data type %v", name, d["type"])
			}
			names = append(names, name)
			data = append(data, d)
		case line == "":
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read stream: %v", err)
	}
	return names, data
}

// postStream posts body to a fresh mock at path and reads the event stream
// it answers with; it returns the mock too, for its record.
func postStream(t *testing.T, path, body string) (s *Server, names []string, data []map[string]any) {
	t.Helper()
	s = New(Options{Logf: t.Logf})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	resp := post(t, ts.URL+path, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	names, data = sseEvents(t, resp.Body)
	return s, names, data
}

func TestMessagesStream(t *testing.T) {
	s, names, data := postStream(t, "/v1/messages?beta=true", body(true))

	var text strings.Builder
	for _, d := range data {
		if d["type"] == "content_block_delta" {
			delta := d["delta"].(map[string]any)
			if delta["type"] != "text_delta" {
				t.Errorf("delta type %v", delta["type"])
			}
			text.WriteString(delta["text"].(string))
		}
	}
	if want := "mock-llm: model=claude-opus-4-6 messages=3 last=hello there"; text.String() != want {
		t.Errorf("streamed text %q, want %q", text.String(), want)
	}
	// Collapse the deltas to compare the event order.
	var order []string
	for _, n := range names {
		if n == "content_block_delta" && order[len(order)-1] == n {
			continue
		}
		order = append(order, n)
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !equal(order, want) {
		t.Errorf("events %q, want %q", order, want)
	}
	md := data[len(data)-2]
	if md["delta"].(map[string]any)["stop_reason"] != "end_turn" || md["usage"] == nil {
		t.Errorf("message_delta = %v, want stop_reason end_turn and usage", md)
	}
	start := data[0]["message"].(map[string]any)
	if start["model"] != "claude-opus-4-6" || start["id"] != "msg_mock_0001" {
		t.Errorf("message_start.message = %v", start)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("Requests() has %d entries, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/messages" || r.Query != "beta=true" || r.Model != "claude-opus-4-6" || !r.Stream || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
	if !bytes.Equal(r.Body, []byte(body(true))) {
		t.Errorf("recorded body %s, want the request body unchanged", r.Body)
	}
}

func TestResponsesStream(t *testing.T) {
	s, names, data := postStream(t, "/v1/responses", respBody(true))

	var text strings.Builder
	var order []string
	for i, d := range data {
		if d["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, names[i], d["sequence_number"])
		}
		if names[i] == "response.output_text.delta" {
			text.WriteString(d["delta"].(string))
			if d["item_id"] != "msg_mock_0001" || d["output_index"] != float64(0) || d["content_index"] != float64(0) {
				t.Errorf("delta %v does not point at the message's one part", d)
			}
			if order[len(order)-1] == names[i] {
				continue
			}
		}
		order = append(order, names[i])
	}
	const want = "mock-llm: model=gpt-6-luna messages=4 last=hello"
	if text.String() != want {
		t.Errorf("streamed text %q, want %q", text.String(), want)
	}
	wantOrder := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if !equal(order, wantOrder) {
		t.Errorf("events %q, want %q", order, wantOrder)
	}
	// What codex keeps: the finished message item and the completed
	// response with its usage (codex-rs/codex-api/src/sse/responses.rs).
	done := data[len(data)-2]["item"].(map[string]any)
	content := done["content"].([]any)
	if done["type"] != "message" || done["role"] != "assistant" || done["id"] != "msg_mock_0001" || len(content) != 1 ||
		content[0].(map[string]any)["type"] != "output_text" || content[0].(map[string]any)["text"] != want {
		t.Errorf("output_item.done item = %v", done)
	}
	completed := data[len(data)-1]["response"].(map[string]any)
	usage, _ := completed["usage"].(map[string]any)
	if completed["id"] != "resp_mock_0001" || completed["status"] != "completed" || completed["model"] != "gpt-6-luna" ||
		usage == nil || usage["input_tokens"] == nil || usage["output_tokens"] == nil || usage["total_tokens"] == nil ||
		usage["input_tokens_details"] == nil || usage["output_tokens_details"] == nil {
		t.Errorf("response.completed response = %v", completed)
	}
	if created := data[0]["response"].(map[string]any); created["id"] != "resp_mock_0001" || created["status"] != "in_progress" {
		t.Errorf("response.created response = %v", created)
	}

	reqs := s.ResponseRequests()
	if len(reqs) != 1 || len(s.MessageRequests()) != 0 || len(s.TurnRequests()) != 1 {
		t.Fatalf("ResponseRequests %d, MessageRequests %d, TurnRequests %d; want 1, 0, 1",
			len(reqs), len(s.MessageRequests()), len(s.TurnRequests()))
	}
	if r := reqs[0]; r.Path != "/v1/responses" || r.Model != "gpt-6-luna" || r.Effort != "high" || !r.Stream || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
}

func TestResponsesJSON(t *testing.T) {
	ts := httptest.NewServer(New(Options{Logf: t.Logf, Reply: func(r Request) string { return "custom " + r.Effort }}))
	defer ts.Close()

	resp := post(t, ts.URL+"/v1/responses", respBody(false))
	var got struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Model  string `json:"model"`
		Output []struct {
			Type, Role string
			Content    []struct{ Type, Text string }
		} `json:"output"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	if got.Object != "response" || got.Status != "completed" || got.Model != "gpt-6-luna" || len(got.Output) != 1 ||
		got.Output[0].Role != "assistant" || len(got.Output[0].Content) != 1 || got.Output[0].Content[0].Text != "custom high" ||
		got.Usage["output_tokens"] == nil {
		t.Errorf("response = %+v", got)
	}
}

// TestEffort: the effort an agent asks for is recorded from either API's
// body, and only from where that API puts it.
func TestEffort(t *testing.T) {
	s := New(Options{Logf: t.Logf})
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, c := range []struct{ path, body, want string }{
		{"/v1/messages", `{"model":"m","output_config":{"effort":"max"},"messages":[]}`, "max"},
		{"/v1/messages", `{"model":"m","messages":[]}`, ""},
		{"/v1/responses", `{"model":"m","reasoning":{"effort":"xhigh"},"input":[]}`, "xhigh"},
		{"/v1/responses", `{"model":"m","input":[]}`, ""},
	} {
		post(t, ts.URL+c.path, c.body)
		reqs := s.TurnRequests()
		if got := reqs[len(reqs)-1].Effort; got != c.want {
			t.Errorf("POST %s %s: effort %q, want %q", c.path, c.body, got, c.want)
		}
	}
}

func TestMessagesJSON(t *testing.T) {
	ts := httptest.NewServer(New(Options{
		Logf:  t.Logf,
		Reply: func(r Request) string { return "custom " + r.Model },
	}))
	defer ts.Close()

	resp := post(t, ts.URL+"/v1/messages", body(false))
	var got struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Role       string `json:"role"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text string
		} `json:"content"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	if got.Type != "message" || got.Role != "assistant" || got.Model != "claude-opus-4-6" ||
		got.StopReason != "end_turn" || len(got.Content) != 1 || got.Content[0].Text != "custom claude-opus-4-6" ||
		got.Usage["output_tokens"] == 0 {
		t.Errorf("response = %+v", got)
	}
}

func TestOtherEndpoints(t *testing.T) {
	var logBuf bytes.Buffer
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(Options{Log: &logBuf, Logf: t.Logf, Now: func() time.Time { return fixed }})
	ts := httptest.NewServer(s)
	defer ts.Close()

	head, err := http.Head(ts.URL + "/")
	if err != nil {
		t.Fatalf("HEAD /: %v", err)
	}
	head.Body.Close()
	if head.StatusCode != http.StatusOK {
		t.Errorf("HEAD / = %d, want 200", head.StatusCode)
	}

	resp := post(t, ts.URL+"/v1/messages/count_tokens?beta=true", body(false))
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil || ct.InputTokens <= 0 {
		t.Errorf("count_tokens = %+v, %v; want input_tokens > 0", ct, err)
	}

	if resp := post(t, ts.URL+"/v1/complete", "not json"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /v1/complete = %d, want 404", resp.StatusCode)
	}
	get, err := http.Get(ts.URL + "/v1/messages")
	if err != nil {
		t.Fatalf("GET /v1/messages: %v", err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/messages = %d, want 405", get.StatusCode)
	}
	if resp := post(t, ts.URL+"/v1/messages", "{"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /v1/messages with bad JSON = %d, want 400", resp.StatusCode)
	}

	// The log has one JSON line per request, equal to what Requests returns.
	lines := strings.Split(strings.TrimSuffix(logBuf.String(), "\n"), "\n")
	reqs := s.Requests()
	if len(lines) != 5 || len(reqs) != 5 {
		t.Fatalf("log has %d lines and Requests %d entries, want 5:\n%s", len(lines), len(reqs), logBuf.String())
	}
	wantStatus := []int{200, 200, 404, 405, 400}
	for i, line := range lines {
		var r Request
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %d %q: %v", i, line, err)
		}
		if r.Status != wantStatus[i] || !r.Time.Equal(fixed) || r.Path != reqs[i].Path {
			t.Errorf("log line %d = %+v, want status %d at %v", i, r, wantStatus[i], fixed)
		}
	}
	var notFound Request
	_ = json.Unmarshal([]byte(lines[2]), &notFound)
	if string(notFound.Body) != `"not json"` {
		t.Errorf("non-JSON body logged as %s, want a JSON string", notFound.Body)
	}
	if n := len(s.MessageRequests()); n != 1 {
		t.Errorf("MessageRequests() has %d entries, want 1 (the bad body one)", n)
	}
}

func TestWaitRequest(t *testing.T) {
	s := New(Options{Logf: t.Logf})
	ts := httptest.NewServer(s)
	defer ts.Close()

	got := make(chan Request, 1)
	go func() {
		r, err := s.WaitRequest(t.Context(), func(r Request) bool { return r.LastUserText() == "hello" })
		if err != nil {
			t.Errorf("WaitRequest: %v", err)
		}
		got <- r
	}()
	post(t, ts.URL+"/v1/responses", `{"model":"m","input":"other"}`)
	post(t, ts.URL+"/v1/responses", `{"model":"m","input":"hello"}`)
	if r := <-got; r.LastUserText() != "hello" || r.Path != "/v1/responses" {
		t.Errorf("WaitRequest returned %+v", r)
	}
	// A request recorded before the call counts too.
	if r, err := s.WaitRequest(t.Context(), func(r Request) bool { return r.LastUserText() == "other" }); err != nil || r.LastUserText() != "other" {
		t.Errorf("WaitRequest for an earlier request = %+v, %v", r, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.WaitRequest(ctx, func(Request) bool { return false }); err == nil {
		t.Errorf("WaitRequest on a done context returned no error")
	}
}

func TestStartClose(t *testing.T) {
	s, url, err := Start(t.Context(), Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url = %q, want loopback", url)
	}
	resp := post(t, url+"/v1/messages", body(false))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	resp.Body.Close()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body(false))); err == nil {
		t.Errorf("POST after Close succeeded")
	}
}

func TestStartStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, url, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.Close(); err != nil { // waits for the ctx-triggered close too
		t.Errorf("Close: %v", err)
	}
	if _, err := http.Head(url + "/"); err == nil {
		t.Errorf("HEAD after cancel succeeded")
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:80"} {
		if s, _, err := listenAndServe(t.Context(), addr, Options{}); err == nil {
			s.Close()
			t.Errorf("listenAndServe(%q) succeeded, want a loopback error", addr)
		}
	}
}

func TestHeadersRecordedWithoutCredentials(t *testing.T) {
	s := New(Options{Logf: t.Logf})
	ts := httptest.NewServer(s)
	defer ts.Close()

	req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/messages", strings.NewReader(body(false)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "secret")
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Anthropic-Beta", "context-1m-2025-08-07")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	h := s.Requests()[0].Header
	if h.Get("Anthropic-Beta") != "context-1m-2025-08-07" {
		t.Errorf("anthropic-beta not recorded: %v", h)
	}
	if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("credentials recorded: %v", h)
	}
}

// TestReadMarker: a Messages request that offers a Read tool and whose
// last user text holds ReadMarker is answered with a call of that tool,
// past a system-role message after it; the request that carries the
// tool's result, one without tools, and a Responses request get text.
func TestReadMarker(t *testing.T) {
	ask := `{"model":"m","stream":true,"tools":[{"name":"Read"}],"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"look ` + ReadMarker + `/tmp/x.txt please"}]},` +
		`{"role":"system","content":[{"type":"text","text":"env"}]}]}`
	_, _, data := postStream(t, "/v1/messages", ask)
	var calls []map[string]any
	var input strings.Builder
	for _, d := range data {
		if d["type"] == "content_block_start" {
			calls = append(calls, d["content_block"].(map[string]any))
		}
		if d["type"] == "content_block_delta" {
			if delta := d["delta"].(map[string]any); delta["type"] == "input_json_delta" {
				input.WriteString(delta["partial_json"].(string))
			}
		}
	}
	if len(calls) != 1 || calls[0]["type"] != "tool_use" || calls[0]["name"] != "Read" || input.String() != `{"file_path":"/tmp/x.txt"}` {
		t.Errorf("answer blocks %v with input %s, want one Read of /tmp/x.txt", calls, input.String())
	}
	if sr := data[len(data)-2]["delta"].(map[string]any)["stop_reason"]; sr != "tool_use" {
		t.Errorf("stop_reason %v, want tool_use", sr)
	}

	result := `{"model":"m","stream":true,"tools":[{"name":"Read"}],"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"look ` + ReadMarker + `/tmp/x.txt"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/tmp/x.txt"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"the content"}]}]}]}`
	noTools := `{"model":"m","stream":true,"messages":[{"role":"user","content":"look ` + ReadMarker + `/tmp/x.txt"}]}`
	for _, b := range []string{result, noTools} {
		s, _, data := postStream(t, "/v1/messages", b)
		for _, d := range data {
			if d["type"] == "content_block_start" && d["content_block"].(map[string]any)["type"] != "text" {
				t.Errorf("%s was answered %v, want text", b, d["content_block"])
			}
		}
		if b == result {
			if got := s.Requests()[0].ToolResults(); len(got) != 1 || got[0] != "the content" {
				t.Errorf("ToolResults() = %q, want the tool's text", got)
			}
		}
	}
}

// TestHoldMarker: a request whose last user text holds HoldMarker is
// recorded at once and answered only after Release; a request without it
// is not held meanwhile.
func TestHoldMarker(t *testing.T) {
	s := New(Options{Logf: t.Logf})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"wait `+HoldMarker+`"}]}`))
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	if _, err := s.WaitRequest(t.Context(), func(r Request) bool { return strings.Contains(r.LastUserText(), HoldMarker) }); err != nil {
		t.Fatal(err)
	}
	if resp := post(t, ts.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"not held"}]}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a request without the marker got %d while one was held", resp.StatusCode)
	}
	select {
	case code := <-answered:
		t.Fatalf("the held request was answered (%d) before Release", code)
	default:
	}
	s.Release()
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the held request got %d after Release, want 200", code)
	}
}

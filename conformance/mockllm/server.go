package mockllm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxBodyBytes bounds a request body. Agents resend the whole conversation
// each turn, so this is generous; it exists so a runaway client cannot
// exhaust the test's memory.
const MaxBodyBytes = 64 << 20

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// Reply computes the assistant text for a turn request. It is called
	// once per request, on the request's goroutine, after the request has
	// been recorded; it must not block and may be called concurrently. Nil
	// means [DefaultReply].
	Reply func(Request) string

	// Log, if set, receives every request as one JSON line (see [Request]),
	// written before the response so a reader that saw the response also
	// finds the line. Writes are serialized. A write error is reported to
	// Logf and does not fail the request.
	Log io.Writer

	// Logf, if set, receives diagnostics: unknown paths, undecodable bodies,
	// log write errors. It is called concurrently from request goroutines.
	// Tests usually pass t.Logf.
	Logf func(format string, args ...any)

	// Now returns the time recorded for a request. Nil means time.Now; tests
	// that compare logs set a fixed clock.
	Now func() time.Time
}

// A Server is the mock's http.Handler. It keeps every request it received.
// Use [Start] to serve it on loopback, or wrap it in httptest.NewServer.
type Server struct {
	opts Options

	mu       sync.Mutex // guards requests, n, recorded, closed, stopWatch and writes to opts.Log
	requests []Request
	n        int // turn requests answered, for deterministic message ids
	// recorded, made by a waiter, is closed when the next request is
	// recorded (see WaitRequest).
	recorded chan struct{}
	// released is closed by Release (isReleased), made by the first
	// request HoldMarker holds, or by Release.
	released   chan struct{}
	isReleased bool

	// closeFn is set by Start before the server is shared; it stops the
	// listener and waits for serving to end. Nil for a Server that is only a
	// handler.
	closeFn func() error
	// closed and inflight let Close wait for handlers still running, so none
	// calls Logf (often t.Logf) after its owner has returned. A handler joins
	// inflight under mu only while closed is false.
	closed   bool
	inflight sync.WaitGroup
	// stopWatch unregisters Start's ctx watcher; guarded by mu because the
	// watcher may already be running Close when Start stores it.
	stopWatch func() bool
}

// New returns a Server with the given options. It does not listen.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// WaitRequest waits until the mock has recorded a request that match
// accepts, and returns the first such. It returns ctx's cause when ctx ends
// first; the bound is the caller's. A test uses it to act once a turn has
// reached the "LLM", say to kill the agent in the middle of a stalled turn.
func (s *Server) WaitRequest(ctx context.Context, match func(Request) bool) (Request, error) {
	for n := 0; ; {
		s.mu.Lock()
		for ; n < len(s.requests); n++ {
			if r := s.requests[n]; match(r) {
				s.mu.Unlock()
				return r, nil
			}
		}
		if s.recorded == nil {
			s.recorded = make(chan struct{})
		}
		recorded := s.recorded
		s.mu.Unlock()
		select {
		case <-recorded:
		case <-ctx.Done():
			return Request{}, context.Cause(ctx)
		}
	}
}

// Requests returns a copy of every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// MessageRequests returns the recorded POST /v1/messages requests, the ones
// that reached the "LLM" over the Anthropic Messages API, oldest first.
func (s *Server) MessageRequests() []Request {
	return s.requestsTo(messagesPath)
}

// ResponseRequests returns the recorded POST /v1/responses requests, the
// ones that reached the "LLM" over the OpenAI Responses API, oldest first.
func (s *Server) ResponseRequests() []Request {
	return s.requestsTo(responsesPath)
}

// TurnRequests returns every recorded request to either API, oldest first.
func (s *Server) TurnRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if isTurn(r) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) requestsTo(path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if isTurn(r) && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

const (
	messagesPath  = "/v1/messages"
	responsesPath = "/v1/responses"
)

// isTurn reports whether r is a request for an LLM turn, in either API.
func isTurn(r Request) bool {
	return r.Method == http.MethodPost && (r.Path == messagesPath || r.Path == responsesPath)
}

// DefaultReply reveals what the mock saw, so a test can tell from the agent's
// output which model and conversation reached the LLM:
//
//	mock-llm: model=<model> messages=<n> last=<first 60 characters of the last user text>
//
// Line breaks in the quoted text become spaces so the reply is one line.
func DefaultReply(r Request) string {
	last := []rune(r.LastUserText())
	if len(last) > 60 {
		last = last[:60]
	}
	quoted := strings.Join(strings.Fields(string(last)), " ")
	return fmt.Sprintf("mock-llm: model=%s messages=%d last=%s", r.Model, r.Messages(), quoted)
}

// ServeHTTP records the request and answers it as the Anthropic API, or
// for /v1/responses the OpenAI Responses API, would.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "api_error", "mock closed")
		return
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	rec := Request{
		Time:   s.now(),
		Method: req.Method,
		Path:   req.URL.Path,
		Query:  req.URL.RawQuery,
		Header: loggedHeader(req.Header),
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBodyBytes))
	if err != nil {
		s.logf("mockllm: read body of %s %s: %v", req.Method, req.URL, err)
		rec.Status = http.StatusBadRequest
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "unreadable body")
		return
	}
	rec.Body = rawBody(body)

	switch {
	case req.URL.Path == "/" && req.Method == http.MethodHead:
		rec.Status = http.StatusOK
		s.record(rec)
		w.WriteHeader(rec.Status)
	case req.URL.Path == messagesPath && req.Method == http.MethodPost:
		s.turn(req.Context(), w, rec, anthropic)
	case req.URL.Path == responsesPath && req.Method == http.MethodPost:
		s.turn(req.Context(), w, rec, openai)
	case req.URL.Path == "/v1/messages/count_tokens" && req.Method == http.MethodPost:
		rec.Status = http.StatusOK
		s.record(rec)
		writeJSON(w, rec.Status, map[string]int{"input_tokens": estimateTokens(len(body))})
	case knownPath(req.URL.Path):
		rec.Status = http.StatusMethodNotAllowed
		s.logf("mockllm: %d %s %s", rec.Status, req.Method, req.URL)
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "method not allowed")
	default:
		rec.Status = http.StatusNotFound
		s.logf("mockllm: %d %s %s", rec.Status, req.Method, req.URL)
		s.record(rec)
		writeError(w, rec.Status, "not_found_error", "not found: "+req.URL.Path)
	}
}

func knownPath(p string) bool {
	return p == "/" || p == messagesPath || p == "/v1/messages/count_tokens" || p == responsesPath
}

// StallMarker in the last user text makes the mock record the request and
// never answer it, until the client goes away or the mock closes: a turn
// that stays in flight for as long as a test needs, say to kill the agent
// in the middle of it.
const StallMarker = "mock-llm: stall"

// HoldMarker in the last user text makes the mock record the request and
// answer it only once the test calls Release: a turn that stays in flight
// until the test has done what it must meanwhile (send the next prompt),
// and then ends as any other. An agent's side requests that quote the
// prompt (claude's title request) are held with it.
const HoldMarker = "mock-llm: hold"

// Release lets every request HoldMarker holds be answered, from now on.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isReleased {
		close(s.holdGate())
		s.isReleased = true
	}
}

// holdGate is what a held request waits on: closed by Release. s.mu must
// be held.
func (s *Server) holdGate() chan struct{} {
	if s.released == nil {
		s.released = make(chan struct{})
	}
	return s.released
}

// ReadMarker, followed by an absolute path, in the last user text makes the
// mock answer a Messages request with a call of the agent's Read tool on
// that path instead of text (claude-agent-acp has one); the agent's next
// request carries the tool's result, and gets the reply text. A turn whose
// history must hold a tool's result is made so.
const ReadMarker = "mock-llm: read "

// BackgroundMarker, followed by a shell command, in the last user text
// makes the mock answer a Messages request with a call of the agent's
// Bash tool that runs the command in the background (claude-agent-acp has
// one): the turn goes on, and may end, while the command runs, and the
// agent hears of the command's end later, as background work.
const BackgroundMarker = "mock-llm: background "

// An api is the wire shape of a turn request and its answer.
type api int

const (
	anthropic api = iota // POST /v1/messages: the Anthropic Messages API
	openai               // POST /v1/responses: the OpenAI Responses API
)

// turn answers a turn request (POST /v1/messages or /v1/responses) in the
// shape of its API, with the same reply text either way.
func (s *Server) turn(ctx context.Context, w http.ResponseWriter, rec Request, a api) {
	var b turnBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		s.logf("mockllm: decode %s body: %v", rec.Path, err)
		rec.Status = http.StatusBadRequest
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "body is not a turn request")
		return
	}
	rec.Model, rec.Effort, rec.Stream, rec.Status = b.Model, b.effort(), b.Stream, http.StatusOK
	gate := (<-chan struct{})(nil)
	if strings.Contains(rec.LastUserText(), HoldMarker) {
		s.mu.Lock()
		gate = s.holdGate()
		s.mu.Unlock()
	}
	n := s.record(rec)
	if strings.Contains(rec.LastUserText(), StallMarker) {
		<-ctx.Done() // the agent died or the mock closed; nobody reads an answer
		return
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return // the agent died or the mock closed; nobody reads an answer
		}
	}

	text := DefaultReply(rec)
	if s.opts.Reply != nil {
		text = s.opts.Reply(rec)
	}
	m := message{
		ID:           fmt.Sprintf("msg_mock_%04d", n),
		Model:        b.Model,
		Text:         text,
		InputTokens:  estimateTokens(len(rec.Body)),
		OutputTokens: estimateTokens(len(text)),
	}
	var err error
	switch {
	case a == openai:
		r := response{message: m, RespID: fmt.Sprintf("resp_mock_%04d", n), Created: rec.Time.Unix()}
		if !b.Stream {
			writeJSON(w, http.StatusOK, r.full(true))
			return
		}
		err = r.stream(w)
	case !b.Stream:
		writeJSON(w, http.StatusOK, m.full())
		return
	case rec.readRequest() != "":
		err = m.streamRead(w, fmt.Sprintf("toolu_mock_%04d", n), rec.readRequest())
	case rec.backgroundRequest() != "":
		err = m.streamBackground(w, fmt.Sprintf("toolu_mock_%04d", n), rec.backgroundRequest())
	default:
		err = m.stream(w)
	}
	if err != nil {
		// The client went away mid-stream; the request is already recorded.
		s.logf("mockllm: stream %s: %v", m.ID, err)
	}
}

// drain refuses new requests and waits for running handlers to return.
func (s *Server) drain() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
}

// record appends rec to the log and returns how many turn requests the
// mock has answered, counting rec if it is one.
func (s *Server) record(rec Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	if s.recorded != nil { // someone waits: wake them
		close(s.recorded)
		s.recorded = nil
	}
	if isTurn(rec) && rec.Status == http.StatusOK {
		s.n++
	}
	if s.opts.Log != nil {
		line, err := json.Marshal(rec)
		if err == nil {
			_, err = s.opts.Log.Write(append(line, '\n'))
		}
		if err != nil {
			s.logf("mockllm: write log: %v", err)
		}
	}
	return s.n
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// rawBody keeps a JSON body as it is and turns anything else into a JSON
// string, so Request always marshals.
func rawBody(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	q, _ := json.Marshal(string(b)) // a string always marshals
	return q
}

// estimateTokens is the usual four-bytes-per-token guess; agents only use
// the numbers for display and compaction thresholds.
func estimateTokens(n int) int {
	return n/4 + 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client going away is not our error
}

// writeError answers in the API's error shape, which SDKs parse for a message.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
}

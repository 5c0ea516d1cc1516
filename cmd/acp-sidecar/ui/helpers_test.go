package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acp-sidecar/acp-sidecar/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testAddr is the address the in-process tests pretend to listen on.
const testAddr = "127.0.0.1:4321"

const testToken = "test-token"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestServer(t testing.TB, st state.Store) *Server {
	t.Helper()
	s, err := New(Options{Store: st, Addr: testAddr, Token: testToken, Place: "/state"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// get asks s for path as a browser that has the token's cookie would.
func get(t testing.TB, s *Server, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://"+testAddr+path, nil)
	r.AddCookie(&http.Cookie{Name: s.guard.cookie, Value: testToken})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// post sends a form as the server's own page would, origin and all.
func post(t testing.TB, s *Server, path string, form url.Values, origin string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://"+testAddr+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	r.AddCookie(&http.Cookie{Name: s.guard.cookie, Value: testToken})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func body(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	b, err := io.ReadAll(w.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func config(model, mode string) *state.Config {
	return &state.Config{Options: []state.Option{
		{ID: "model", Category: "model", Current: json.RawMessage(fmt.Sprintf("%q", model))},
		{ID: "mode", Category: "mode", Current: json.RawMessage(fmt.Sprintf("%q", mode))},
		{ID: "effort", Category: "thought_level", Current: json.RawMessage(`"low"`)},
	}}
}

// put writes a session and its turns to st.
func put(t testing.TB, st state.Store, sess *state.Session, turns ...state.Turn) {
	t.Helper()
	ctx := context.Background()
	if err := st.PutSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	for i := range turns {
		if err := st.PutTurn(ctx, sess.ClientID, &turns[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func turn(i int, native, prompt string, status state.TurnStatus) state.Turn {
	return state.Turn{
		Index: i, PromptText: prompt, Answer: "answer to " + prompt, NativeID: native, Status: status,
		StopReason: "end_turn", Started: t0.Add(time.Duration(i) * time.Minute), Ended: t0.Add(time.Duration(i)*time.Minute + time.Second),
		ToolCalls: []state.ToolCall{{ID: "t", Title: "read file", Status: "completed"}},
	}
}

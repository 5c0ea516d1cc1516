package ui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// Every request the guard must refuse, and the ones it must let through,
// one row a rule.
func TestGuard(t *testing.T) {
	st := state.NewMemory()
	put(t, st, &state.Session{ClientID: "s1", NativeID: "n1", NativeHistory: []string{"n1"}, Updated: t0}, turn(1, "n1", "hello", state.TurnCompleted))
	s := newTestServer(t, st)
	cookie := &http.Cookie{Name: s.guard.cookie, Value: testToken}
	origin := "http://" + testAddr
	deleteForm := func(csrf string) url.Values { return url.Values{"id": {"s1"}, "csrf": {csrf}} }
	tests := []struct {
		name     string
		method   string
		url      string
		host     string // "" keeps the URL's
		cookie   *http.Cookie
		origin   string
		form     url.Values
		wantCode int
		wantBody string
	}{
		{name: "no token", method: "GET", url: "/", wantCode: 403, wantBody: "no token"},
		{name: "wrong token", method: "GET", url: "/?token=nope", wantCode: 403, wantBody: "wrong token"},
		{name: "wrong cookie", method: "GET", url: "/", cookie: &http.Cookie{Name: s.guard.cookie, Value: "nope"}, wantCode: 403, wantBody: "no token"},
		{name: "another port's cookie", method: "GET", url: "/", cookie: &http.Cookie{Name: "acp-sidecar-ui-9999", Value: testToken}, wantCode: 403},
		{name: "token moves to a cookie", method: "GET", url: "/session?id=s1&token=" + testToken, wantCode: 303},
		{name: "cookie", method: "GET", url: "/", cookie: cookie, wantCode: 200, wantBody: "s1"},
		{name: "static needs the token too", method: "GET", url: "/static/ui.css", wantCode: 403},
		{name: "foreign host (DNS rebinding)", method: "GET", url: "/", host: "evil.example:4321", cookie: cookie, wantCode: 403, wantBody: "Host"},
		{name: "foreign host with the token", method: "GET", url: "/?token=" + testToken, host: "evil.example:4321", wantCode: 403, wantBody: "Host"},
		{name: "host on another port", method: "GET", url: "/", host: "127.0.0.1:80", cookie: cookie, wantCode: 403, wantBody: "Host"},
		{name: "non-loopback address", method: "GET", url: "/", host: "192.168.1.5:4321", cookie: cookie, wantCode: 403, wantBody: "Host"},
		{name: "localhost", method: "GET", url: "/", host: "localhost:4321", cookie: cookie, wantCode: 200},
		{name: "ipv6 loopback", method: "GET", url: "/", host: "[::1]:4321", cookie: cookie, wantCode: 200},
		{name: "delete without origin", method: "POST", url: "/session/delete", cookie: cookie, form: deleteForm(s.csrf), wantCode: 403, wantBody: "Origin"},
		{name: "delete from a foreign origin", method: "POST", url: "/session/delete", cookie: cookie, origin: "http://evil.example", form: deleteForm(s.csrf), wantCode: 403, wantBody: "Origin"},
		{name: "delete from another port", method: "POST", url: "/session/delete", cookie: cookie, origin: "http://127.0.0.1:80", form: deleteForm(s.csrf), wantCode: 403, wantBody: "Origin"},
		{name: "delete without the form token", method: "POST", url: "/session/delete", cookie: cookie, origin: origin, form: deleteForm(""), wantCode: 403, wantBody: "form token"},
		{name: "delete with a wrong form token", method: "POST", url: "/session/delete", cookie: cookie, origin: origin, form: deleteForm("nope"), wantCode: 403, wantBody: "form token"},
		{name: "delete without the cookie", method: "POST", url: "/session/delete", origin: origin, form: deleteForm(s.csrf), wantCode: 403, wantBody: "no token"},
		{name: "delete as a GET", method: "GET", url: "/session/delete?id=s1", cookie: cookie, wantCode: 405},
		{name: "put", method: "PUT", url: "/session/delete", cookie: cookie, origin: origin, wantCode: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *http.Request
			if tt.form != nil {
				r = httptest.NewRequest(tt.method, "http://"+testAddr+tt.url, strings.NewReader(tt.form.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			} else {
				r = httptest.NewRequest(tt.method, "http://"+testAddr+tt.url, nil)
			}
			if tt.host != "" {
				r.Host = tt.host
			}
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tt.wantCode || !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("%s %s: %d %q, want %d with %q", tt.method, tt.url, w.Code, w.Body.String(), tt.wantCode, tt.wantBody)
			}
			if csp := w.Header().Get("Content-Security-Policy"); csp != contentSecurityPolicy {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
			if w.Header().Get("Referrer-Policy") != "same-origin" {
				t.Error("no Referrer-Policy same-origin: a Referer could go to another site")
			}
		})
	}
	if _, err := st.Session(context.Background(), "s1"); err != nil {
		t.Fatalf("a refused delete deleted: %v", err)
	}

	// The token's redirect sets the cookie and drops the token from the URL.
	w := get(t, s, "/session?id=s1&token="+testToken)
	if loc := w.Header().Get("Location"); loc != "/session?id=s1" {
		t.Errorf("redirect to %q, want /session?id=s1", loc)
	}
	var set *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == s.guard.cookie {
			set = c
		}
	}
	if set == nil || set.Value != testToken || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie = %+v, want the token, HttpOnly, SameSite=Strict", set)
	}

	// And the page's own delete goes through.
	w = post(t, s, "/session/delete", deleteForm(s.csrf), origin)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/?deleted=s1" {
		t.Fatalf("delete: %d %s", w.Code, w.Header().Get("Location"))
	}
	if _, err := st.Session(context.Background(), "s1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("after the delete, Session = %v, want ErrNotFound", err)
	}
}

// A non-loopback listener (--listen-any) takes any IP address as the Host,
// still no DNS name but localhost.
func TestGuardListenAny(t *testing.T) {
	g, err := newGuard("0.0.0.0:8080", "t", "c")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"192.168.1.5:8080": true, "127.0.0.1:8080": true, "localhost:8080": true,
		"example.com:8080": false, "192.168.1.5:80": false, "192.168.1.5": false,
	} {
		if got := g.hostAllowed(host); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

var (
	// inlineScript is a script element with a body, or a handler or
	// javascript: URL in a tag (text outside tags is escaped: no < there).
	inlineScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`)
	tag          = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	tagScript    = regexp.MustCompile(`(?i)\son[a-z]+\s*=|javascript:`)
)

// hasInlineScript says whether an HTML page runs script of its own.
func hasInlineScript(page string) bool {
	if inlineScript.MatchString(page) {
		return true
	}
	for _, t := range tag.FindAllString(page, -1) {
		if tagScript.MatchString(t) {
			return true
		}
	}
	return false
}

// No page has inline script (the CSP would block it anyway), and text from
// the record is escaped wherever it lands: a prompt, an answer, a title, a
// tool call, an option value, a native id.
func TestPagesEscapeTheRecord(t *testing.T) {
	const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	st := state.NewMemory()
	tr := turn(1, "n<b>1", evil, state.TurnCompleted)
	tr.Answer, tr.ToolCalls, tr.Notices = evil, []state.ToolCall{{ID: "t", Title: evil}}, []string{evil}
	c := config(evil, "code")
	put(t, st, &state.Session{ClientID: "s<1>", NativeID: "n<b>1", NativeHistory: []string{"n<b>1"}, Title: evil, Cwd: evil, Agent: []string{evil},
		Baseline: c, Live: c, Updated: t0}, tr)
	s := newTestServer(t, st)
	for _, path := range []string{"/", "/session?id=" + url.QueryEscape("s<1>"), "/session/turn?n=1&id=" + url.QueryEscape("s<1>")} {
		w := get(t, s, path)
		b := body(t, w)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", path, w.Code, b)
		}
		if strings.Contains(b, "<script>alert") || strings.Contains(b, "<img src=x") || hasInlineScript(b) {
			t.Errorf("%s: the record's text reached the page unescaped:\n%s", path, b)
		}
		if !strings.Contains(b, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the escaped text is not on the page", path)
		}
	}
}

// TestPageSaysTheProtocol: a session's page says which ACP version it was
// last recorded in, and a record from before versions were kept reads v1.
func TestPageSaysTheProtocol(t *testing.T) {
	st := state.NewMemory()
	c := config("deep-3", "code")
	put(t, st, &state.Session{ClientID: "s2", NativeID: "n1", NativeHistory: []string{"n1"}, Protocol: 2, Baseline: c, Live: c, Updated: t0})
	put(t, st, &state.Session{ClientID: "s0", NativeID: "n2", NativeHistory: []string{"n2"}, Baseline: c, Live: c, Updated: t0})
	s := newTestServer(t, st)
	for sid, want := range map[string]string{"s2": `<dd id="protocol">v2</dd>`, "s0": `<dd id="protocol">v1</dd>`} {
		if b := body(t, get(t, s, "/session?id="+sid)); !strings.Contains(b, want) {
			t.Errorf("the page of %s lacks %s", sid, want)
		}
	}
}

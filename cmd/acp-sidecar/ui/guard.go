package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// The record holds whole conversations, so the page is guarded the way a
// Jupyter notebook is (docs/ui.md, "Safe by default"):
//   - the URL the command prints carries a random token; the first request
//     with it gets the token as a cookie, and no request without one of the
//     two is served;
//   - the Host header must name the address the server listens on, so a
//     page of another site whose DNS name is re-pointed at 127.0.0.1 (DNS
//     rebinding) is refused even though the browser sends it there;
//   - a change (delete) is a POST whose Origin is this server and whose
//     form carries a second token, so no other page can forge one;
//   - every response forbids inline script and framing, and sends a
//     Referer to this server alone, never to another site. (Not
//     "no-referrer": with it a browser sends "Origin: null" on the page's
//     own POST, and the Origin check could not tell it from a forged one.)

// contentSecurityPolicy allows the server's own CSS and script and
// nothing inline; EventSource connects to the same origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// newSecret is 32 random bytes in hex.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func same(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// guard holds what a request must match.
type guard struct {
	token  string // in the URL, then the cookie
	csrf   string // in every form that changes something
	port   string // the port the server listens on
	anyIP  bool   // listening beyond loopback: any IP literal may be the Host
	cookie string // the cookie's name, one per port: cookies ignore ports
}

func newGuard(addr, token, csrf string) (*guard, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	return &guard{
		token: token, csrf: csrf, port: port,
		anyIP:  ip == nil || !ip.IsLoopback(),
		cookie: "acp-sidecar-ui-" + port,
	}, nil
}

// hostAllowed says whether a Host header names this server: localhost or
// a loopback address on its port (any IP address when it listens beyond
// loopback). A DNS name never passes: that is what rebinding uses.
func (g *guard) hostAllowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != g.port {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || g.anyIP)
}

// refuse answers a refused request with a short text that says why, and
// nothing of the record.
func refuse(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, why)
}

// wrap puts the checks in front of next.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !g.hostAllowed(r.Host) {
			refuse(w, http.StatusForbidden, "acp-sidecar ui: this Host is not the address the server listens on")
			return
		}
		if t := r.URL.Query().Get("token"); t != "" {
			if !same(t, g.token) {
				refuse(w, http.StatusForbidden, "acp-sidecar ui: wrong token; open the URL that `acp-sidecar ui` printed")
				return
			}
			// The token moves into a cookie and out of the address bar
			// and the history.
			http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			u.Scheme, u.Host = "", ""
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(g.cookie)
		if err != nil || !same(c.Value, g.token) {
			refuse(w, http.StatusForbidden, "acp-sidecar ui: no token; open the URL that `acp-sidecar ui` printed")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if r.Method != http.MethodPost {
				refuse(w, http.StatusMethodNotAllowed, "acp-sidecar ui: method not allowed")
				return
			}
			if origin := r.Header.Get("Origin"); !g.originAllowed(origin, r.Host) {
				refuse(w, http.StatusForbidden, "acp-sidecar ui: a change must come from this server's own page (Origin)")
				return
			}
			if !same(r.PostFormValue("csrf"), g.csrf) {
				refuse(w, http.StatusForbidden, "acp-sidecar ui: a change must carry the page's form token")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed: the page that posts is this server's, as the browser says
// in Origin (every browser sends it on a POST).
func (g *guard) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Host == host && u.Path == "" && u.User == nil
}

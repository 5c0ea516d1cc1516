package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// assets are the templates, the CSS and the script: in the binary, so
// nothing is fetched at run time.
//
//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Store is the record to serve. The server reads it, deletes from it
	// when a page asks, and never closes it. When it has a change feed
	// (Feed), open pages follow it.
	Store state.Store
	// Addr is the address the server listens on, host:port, as
	// net.Listener.Addr gives it. Every request's Host must name it:
	// localhost or a loopback address on its port; any IP address on its
	// port when Addr is not loopback (--listen-any). Never a DNS name.
	Addr string
	// Token is the secret of the printed URL; "" makes a random one.
	Token string
	// Fleet says the store is a fleet's: the listing names the host that
	// holds a live session.
	Fleet bool
	// Budget is the handoff budget of the sidecars that wrote the record
	// (their --handoff-budget), for the handoffs the pages build again
	// from it; 0 is the default.
	Budget int
	// Place names the record on the pages: the state dir, or the fleet's
	// database by host and name (never a connection string).
	Place string
	// Log gets the server's own problems: a broken change feed, a page
	// that failed. Nil discards them.
	Log *slog.Logger
}

// Server serves the record's pages. It is an http.Handler; Serve runs it
// on a listener together with the change feed that live pages follow.
type Server struct {
	opts    Options
	store   state.Store
	guard   *guard
	csrf    string
	handler http.Handler
	pages   map[string]*template.Template
	log     *slog.Logger
	hub     hub
	assetV  string // a hash of the assets, so a new binary's CSS is not a cached old one

	mu      sync.Mutex
	listing *cachedListing
	titles  map[string]string // first prompt lines of sessions without a title
}

type cachedListing struct {
	gen  uint64
	list []state.Summary
}

// New builds a server over opts.Store.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("ui: no store")
	}
	if opts.Token == "" {
		t, err := newSecret()
		if err != nil {
			return nil, err
		}
		opts.Token = t
	}
	csrf, err := newSecret()
	if err != nil {
		return nil, err
	}
	g, err := newGuard(opts.Addr, opts.Token, csrf)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, store: opts.Store, guard: g, csrf: csrf, log: opts.Log, titles: map[string]string{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.pages, s.assetV, err = parsePages(); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("ui assets: %w", err)
	}
	mux.HandleFunc("GET /static/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, err := fs.Stat(static, name); err != nil {
			http.NotFound(w, r)
			return
		}
		http.ServeFileFS(w, r, static, name)
	})
	mux.HandleFunc("GET /{$}", s.serveList)
	mux.HandleFunc("GET /events", s.serveListEvents)
	mux.HandleFunc("GET /session", s.serveSession)
	mux.HandleFunc("GET /session/events", s.serveSessionEvents)
	mux.HandleFunc("GET /session/turn", s.serveTurn)
	mux.HandleFunc("GET /session/handoff", s.serveHandoff)
	mux.HandleFunc("POST /session/delete", s.serveDelete)
	s.handler = g.wrap(mux)
	return s, nil
}

// URL is the address to open: the server's, with the token.
func (s *Server) URL() string {
	host, port, _ := net.SplitHostPort(s.opts.Addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // listening everywhere: loopback is one of them
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/?" + url.Values{"token": {s.opts.Token}}.Encode()
}

// ServeHTTP serves one request, behind the guard (guard.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Follow follows the store's change feed for the live pages until ctx
// ends, for a server that another listener serves (acp-sidecar serve
// --ui); Serve does it itself.
func (s *Server) Follow(ctx context.Context) { s.follow(ctx) }

// Serve serves on ln, and follows the store's change feed for the live
// pages, until ctx ends. Then it stops the open streams, closes ln and
// returns once both its goroutines have.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// The streams end with ctx: they are the requests' contexts.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		s.follow(ctx)
	}()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		cancel()
	}
	sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if serr := hs.Shutdown(sctx); serr != nil {
		hs.Close()
	}
	if err == nil {
		err = <-served
	}
	<-followed
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("serve %s: %w", s.opts.Addr, err)
	}
	return nil
}

// pageFiles are the templates of each page. The pages share one layout;
// each page's set also renders its content alone, which is what a live
// stream sends.
func pageFiles() map[string][]string {
	return map[string][]string{
		"sessions": {"assets/layout.html", "assets/sessions.html"},
		"session":  {"assets/layout.html", "assets/session.html", "assets/timeline.html"},
		"turn":     {"assets/layout.html", "assets/turn.html"},
		"handoff":  {"assets/layout.html", "assets/handoff.html"},
		"error":    {"assets/layout.html", "assets/error.html"},
	}
}

func parsePages() (map[string]*template.Template, string, error) {
	css, err := assets.ReadFile("assets/static/ui.css")
	if err != nil {
		return nil, "", fmt.Errorf("ui assets: %w", err)
	}
	js, err := assets.ReadFile("assets/static/live.js")
	if err != nil {
		return nil, "", fmt.Errorf("ui assets: %w", err)
	}
	v := strconv.FormatUint(uint64(fnv32(append(css, js...))), 36)
	funcs := template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.Local().Format("2006-01-02 15:04:05")
		},
		"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"states": func() []string { return []string{stLive, stIdle, stClosed} },
		"inc":    func(n int) int { return n + 1 },
		"asset":  func(name string) string { return "/static/" + name + "?v=" + v },
		"plural": func(n int, one, many string) string { return map[bool]string{true: one, false: many}[n == 1] },
		"kb": func(n int) string {
			if n < 1024 {
				return strconv.Itoa(n) + " bytes"
			}
			return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
		},
	}
	out := map[string]*template.Template{}
	for name, files := range pageFiles() {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, files...)
		if err != nil {
			return nil, "", fmt.Errorf("ui templates %s: %w", name, err)
		}
		out[name] = t
	}
	return out, v, nil
}

func fnv32(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// page is what the layout gets: the page's name, title and data, and the
// stream it follows ("" for none).
type page struct {
	Name   string
	Title  string
	Place  string
	Events string
	Data   any
}

// render writes a whole page, or fails with an error page.
func (s *Server) render(w http.ResponseWriter, name, title, events string, data any) {
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, "layout", page{Name: name, Title: title, Place: s.opts.Place, Events: events, Data: data}); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		refuse(w, http.StatusInternalServerError, "acp-sidecar ui: the page could not be rendered: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes()) // a client that went away needs no answer
}

// fail answers a read that failed: a session that is not there is 404,
// anything else 500 with the store's message.
func (s *Server) fail(w http.ResponseWriter, err error) {
	code, msg := http.StatusInternalServerError, err.Error()
	if errors.Is(err, state.ErrNotFound) {
		code = http.StatusNotFound
	} else {
		s.log.Error("read the record", "err", err)
	}
	var b bytes.Buffer
	if terr := s.pages["error"].ExecuteTemplate(&b, "layout", page{Name: "error", Title: "not found", Place: s.opts.Place, Data: msg}); terr != nil {
		refuse(w, code, msg)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	p, err := s.listData(r.Context(), parseListQuery(r.URL.Query()), r.URL.Query().Get("deleted"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "sessions", "sessions", p.EventsURL, p)
}

func (s *Server) serveSession(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tp, _ := strconv.Atoi(q.Get("tp"))
	p, err := s.sessionData(r.Context(), q.Get("id"), tp)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "session", p.Title, p.EventsURL, p)
}

func (s *Server) serveTurn(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	p, err := s.turnData(r.Context(), q.Get("id"), n)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "turn", fmt.Sprintf("turn %d", n), "", p)
}

func (s *Server) serveHandoff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("native"))
	p, err := s.handoffData(r.Context(), q.Get("id"), n)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "handoff", "handoff", "", p)
}

// deleteTimeout bounds a delete, as `acp-sidecar delete` does: the store
// answers once the session has left the disk.
const deleteTimeout = time.Minute

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), deleteTimeout)
	defer cancel()
	if err := s.store.DeleteSession(ctx, id); err != nil {
		s.fail(w, fmt.Errorf("delete session %s: %w", id, err))
		return
	}
	s.forget(id)
	s.hub.changed(id) // this page's own listing, also without a feed
	http.Redirect(w, r, "/?"+url.Values{"deleted": {id}}.Encode(), http.StatusSeeOther)
}

// The live streams (Server-Sent Events): each sends the page's content
// again after every change of what it shows, rendered on the server;
// live.js only puts it in place. The page names the feed's generation it
// was rendered at (gen), and a stream sends the content at once only when
// something changed since: a page is not redrawn under the user's hand for
// nothing. A session that is gone ends its stream with a "gone" event.

func (s *Server) serveListEvents(w http.ResponseWriter, r *http.Request) {
	lq, deleted := parseListQuery(r.URL.Query()), r.URL.Query().Get("deleted")
	s.stream(w, r, "", func(ctx context.Context, b *bytes.Buffer) error {
		p, err := s.listData(ctx, lq, deleted)
		if err != nil {
			return err
		}
		return s.pages["sessions"].ExecuteTemplate(b, "content", page{Name: "sessions", Data: p})
	})
}

func (s *Server) serveSessionEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	tp, _ := strconv.Atoi(q.Get("tp"))
	s.stream(w, r, id, func(ctx context.Context, b *bytes.Buffer) error {
		p, err := s.sessionData(ctx, id, tp)
		if err != nil {
			return err
		}
		return s.pages["session"].ExecuteTemplate(b, "content", page{Name: "session", Data: p})
	})
}

// stream runs one event stream for the followers of id ("" for every
// session) until the client goes or the server stops.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, content func(context.Context, *bytes.Buffer) error) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	f := s.hub.join(id)
	defer s.hub.leave(f)
	ctx := r.Context()
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil { // the browser's EventSource is open from here
		return
	}
	if gen, err := strconv.ParseUint(r.URL.Query().Get("gen"), 10, 64); err == nil {
		now, _ := s.hub.current()
		if id != "" {
			now = s.hub.genOf(id)
		}
		if now == gen {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
		}
	}
	var b bytes.Buffer
	for {
		b.Reset()
		event := "refresh"
		if err := content(ctx, &b); err != nil {
			if ctx.Err() != nil {
				return
			}
			event = "gone"
			b.Reset()
			if !errors.Is(err, state.ErrNotFound) {
				event = "trouble"
				s.log.Warn("live page", "session", id, "err", err)
			}
			template.HTMLEscape(&b, []byte(err.Error()))
		}
		if _, err := w.Write(sseEvent(event, b.Bytes())); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if event == "gone" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
	}
}

// sseEvent frames data as one event. A CR in the record's text would end
// an SSE line as a newline does, so it goes as a character reference,
// which reads the same in HTML.
func sseEvent(event string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for line := range strings.SplitSeq(strings.ReplaceAll(string(data), "\r", "&#13;"), "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar/ui"
	"github.com/acp-sidecar/acp-sidecar/remote"
)

// serveOptions are serve's own flags; the relay's come in runOptions.
type serveOptions struct {
	listen         string
	token          string
	tlsCert        string
	tlsKey         string
	detachTTL      time.Duration
	retain         remote.Retention
	maxMessage     int
	maxConnections int
	maxSessions    int
	ui             bool // serve the record's pages on the same listener
}

func serveFlags() []cli.Flag {
	return append(relayFlags(),
		&cli.StringFlag{Name: "listen", EnvVars: envs("LISTEN"), Value: "127.0.0.1:7777", Usage: "serve on `HOST:PORT` (loopback only without TLS) or unix:PATH"},
		&cli.StringFlag{Name: "token-file", EnvVars: envs("TOKEN_FILE"), Usage: "read the bearer token from `FILE` (else $ACP_SIDECAR_TOKEN, else one is made and printed once)"},
		&cli.StringFlag{Name: "tls-cert", EnvVars: envs("TLS_CERT"), Usage: "serve TLS with this certificate `FILE` (needs --tls-key); required for a non-loopback address"},
		&cli.StringFlag{Name: "tls-key", EnvVars: envs("TLS_KEY"), Usage: "the TLS certificate's key `FILE`"},
		&cli.DurationFlag{Name: "detach-ttl", EnvVars: envs("DETACH_TTL"), Value: remote.DefaultDetachTTL, Usage: "how long a connection's sessions stay live after its client went"},
		&cli.IntFlag{Name: "retain", EnvVars: envs("RETAIN"), Value: remote.DefaultRetention.Messages, Usage: "server messages each connection keeps for a stream that resumes"},
		&cli.IntFlag{Name: "retain-bytes", EnvVars: envs("RETAIN_BYTES"), Value: remote.DefaultRetention.Bytes, Usage: "bytes of them it keeps at most"},
		&cli.IntFlag{Name: "max-message", EnvVars: envs("MAX_MESSAGE"), Usage: "largest message in bytes a client may send or get (default: --max-frame)"},
		&cli.IntFlag{Name: "max-connections", EnvVars: envs("MAX_CONNECTIONS"), Value: 32, Usage: "connections served at once, attached or detached; each runs its own agent"},
		&cli.IntFlag{Name: "max-sessions", EnvVars: envs("MAX_SESSIONS"), Value: remote.DefaultMaxSessions, Usage: "sessions one connection may open"},
		&cli.BoolFlag{Name: "ui", EnvVars: envs("UI"), Usage: "also serve the record's pages (acp-sidecar ui) on the same listener, under the same token"},
	)
}

func serveCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve ACP over HTTP and WebSocket, with sessions that survive the network (docs/remote.md)",
		UsageText: "acp-sidecar serve [flags] -- AGENT [ARGS...]",
		Flags:     serveFlags(),
		Action: func(c *cli.Context) error {
			opts, err := relayOptions(c)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			so, err := serveOptionsFrom(c, opts)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return serve(c.Context, opts, so, s)
		},
	}
}

func serveOptionsFrom(c *cli.Context, o runOptions) (serveOptions, error) {
	so := serveOptions{
		listen: c.String("listen"), tlsCert: c.String("tls-cert"), tlsKey: c.String("tls-key"),
		detachTTL: c.Duration("detach-ttl"), maxMessage: c.Int("max-message"), maxConnections: c.Int("max-connections"), maxSessions: c.Int("max-sessions"),
		retain: remote.Retention{Messages: c.Int("retain"), Bytes: c.Int("retain-bytes")},
		ui:     c.Bool("ui"),
	}
	if so.maxMessage <= 0 {
		so.maxMessage = o.maxFrame
	}
	if (so.tlsCert == "") != (so.tlsKey == "") {
		return so, errors.New("--tls-cert and --tls-key go together")
	}
	if len(o.agents.defs) > 1 && !o.record {
		return so, errors.New("several agents need the record (--record): a switch hands the conversation over from it")
	}
	token, err := tokenFrom(c.String("token-file"))
	if err != nil {
		return so, err
	}
	so.token = token
	return so, nil
}

// acpOrPages sends ACP's requests (a connection's, a WebSocket, a JSON
// POST, a DELETE, a bearer token) to acp, and a browser's to the record's
// pages, which check the same token their own way (ui/guard.go).
func acpOrPages(acp, pages http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isACP := r.Header.Get(remote.HeaderConnection) != "" || r.Header.Get("Authorization") != "" ||
			strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || r.Method == http.MethodDelete ||
			(r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"))
		if isACP {
			acp.ServeHTTP(w, r)
			return
		}
		pages.ServeHTTP(w, r)
	})
}

// serve listens, and runs a stack like run's for each connection, with the
// connection as its client's stdio.
func serve(ctx context.Context, o runOptions, so serveOptions, s stdio) error {
	l, err := remote.Listen(ctx, so.listen, so.tlsCert != "")
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer l.Close() // also closed by the http server's Shutdown; a second close only errs
	env, err := prepare(ctx, &o, s)
	if err != nil {
		return err
	}
	defer env.close()
	settings, err := parseSettings(o.sets)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	printed := false
	if so.token == "" {
		if so.token, err = remote.NewToken(); err != nil {
			return &exitError{code: 1, err: err}
		}
		printed = true
	}
	log := env.log.With("serve", l.Addr().String())
	srv := remote.NewServer(remote.Config{
		Token: so.token, MaxMessage: so.maxMessage, MaxConnections: so.maxConnections, MaxSessions: so.maxSessions,
		Retain: so.retain, DetachTTL: so.detachTTL, Log: log,
		Open: func(ctx context.Context, h *remote.Host) {
			cl := log.With("conn", h.ID())
			cenv := &runEnv{host: env.host, log: cl, trace: env.trace, store: env.store}
			if len(o.agents.defs) > 1 {
				// Several agents: a switchboard per connection, as on stdio.
				if err := runSwitchboard(ctx, o, cenv, s, h, h, nil); err != nil {
					cl.Error("the connection's agents ended with an error", "err", err)
				}
				return
			}
			sp := stackSpec{
				argv: o.argv, settings: settings, record: o.record, restart: o.restart && o.record,
				clientIn: h, clientOut: h,
			}
			if defs := o.agents.defs; len(defs) == 1 {
				sp.env = defs[0].Env
			}
			st, err := startStack(ctx, o, cenv, s, sp)
			if err != nil {
				cl.Error("the connection's agent did not start", "err", err)
				return
			}
			end := st.run(ctx)
			cl.Info("the connection's agent ended", "code", end.Code)
		},
	})
	var handler http.Handler = srv
	var pages *ui.Server
	if so.ui {
		place := o.stateDir
		if o.store.kind == "postgres" {
			place = o.store.describe(o.stateDir)
		}
		if pages, err = ui.New(ui.Options{
			Store: env.store, Addr: l.Addr().String(), Token: so.token, Fleet: o.store.kind == "postgres",
			Budget: o.budget, Place: place, Log: log,
		}); err != nil {
			return &exitError{code: 1, err: err}
		}
		handler = acpOrPages(srv, pages)
	}
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// Lets a WebSocket send what is ready together as one segment.
		ConnContext: remote.ConnContext,
	}
	scheme := "http"
	if so.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(so.tlsCert, so.tlsKey)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	url := scheme + "://" + l.Addr().String()
	if l.Addr().Network() == "unix" {
		url = "unix:" + l.Addr().String()
	}
	fmt.Fprintf(s.err, "acp-sidecar: serving ACP on %s (HTTP and WebSocket)\n", url)
	if printed {
		// Printed once, here, and never logged.
		fmt.Fprintf(s.err, "acp-sidecar: token %s\n", so.token)
	}

	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		if pages != nil {
			fmt.Fprintf(s.err, "acp-sidecar: the record's pages: %s\n", pages.URL())
			pages.Follow(followCtx)
		}
	}()
	defer func() {
		stopFollow()
		<-followed
	}()
	served := make(chan error, 1)
	go func() {
		if hs.TLSConfig != nil {
			served <- hs.ServeTLS(l, "", "")
		} else {
			served <- hs.Serve(l)
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var serr error
	select {
	case sig := <-sigs:
		log.Info("signal received; ending every connection", "signal", sig.String())
	case <-ctx.Done():
	case serr = <-served:
		log.Error("the listener failed", "err", serr)
	}
	// Stop taking requests, then end the connections: each stack stops its
	// agent in agenthost/'s order, within the grace it is given.
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*o.grace+10*time.Second)
	defer cancel()
	// The connections first: their streams end with them, so the
	// listener's shutdown has no open stream to wait for.
	if err := srv.Close(stop); err != nil {
		log.Warn("the connections' agents did not all end", "err", err)
	}
	if err := hs.Shutdown(stop); err != nil {
		log.Warn("the listener's requests did not end in time", "err", err)
	}
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return &exitError{code: 1, err: serr}
	}
	return nil
}

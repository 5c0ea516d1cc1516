package main

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar/ui"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// uiCommand is `acp-sidecar ui`: the record as local web pages
// (docs/ui.md). It opens the store the way `sessions` and `show` do, for
// as long as it serves, and serves until interrupted.
func uiCommand(s stdio) *cli.Command {
	const usage = "usage: acp-sidecar ui [--listen ADDR] [--listen-any] [--open] [--budget BYTES] [--state-dir DIR] [--store STORE]"
	return &cli.Command{
		Name:            "ui",
		Usage:           "serve the record as local web pages, live, and print their URL",
		UsageText:       "acp-sidecar ui [--listen ADDR] [--listen-any] [--open] [--state-dir DIR]",
		HideHelpCommand: true,
		Flags: []cli.Flag{stateDirFlag(), storeFlag(),
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:0", Usage: "the address to serve on (port 0: any free port); a loopback address unless --listen-any"},
			&cli.BoolFlag{Name: "listen-any", Usage: "allow a --listen address beyond loopback: anyone who can reach it and learns the URL reads every conversation (docs/ui.md)"},
			&cli.BoolFlag{Name: "open", Usage: "open the URL in the browser"},
			&cli.IntFlag{Name: "budget", Value: replay.DefaultBudget, Usage: "the sidecars' --handoff-budget, for the handoffs the pages build from the record"},
		},
		Action: func(c *cli.Context) error {
			a, err := readArgs(c)
			if err != nil || len(a.pos) > 0 {
				return usageError(c, err, usage)
			}
			addr, err := listenAddr(c.String("listen"), c.Bool("listen-any"))
			if err != nil {
				return usageError(c, err, usage)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return withStore(ctx, a, func(ctx context.Context, st state.Store) error {
				return serveUI(ctx, s, st, a, addr, c.Bool("open"), c.Int("budget"))
			})
		},
	}
}

// listenAddr checks --listen: an IP address (or localhost) and a port,
// loopback unless any allows more. A name other than localhost is refused:
// what it resolves to can change under the server.
func listenAddr(addr string, any bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" && any:
	case host == "":
		return "", fmt.Errorf("--listen %q is every address of this host: the pages hold every recorded conversation; give a loopback address, or add --listen-any (docs/ui.md)", addr)
	case ip == nil:
		return "", fmt.Errorf("--listen %q: want an IP address or localhost, not a name", addr)
	case !ip.IsLoopback() && !any:
		return "", fmt.Errorf("--listen %q is not a loopback address: the pages hold every recorded conversation; add --listen-any to serve beyond this host (docs/ui.md)", addr)
	}
	return net.JoinHostPort(host, port), nil
}

func serveUI(ctx context.Context, s stdio, st state.Store, a readCmdArgs, addr string, open bool, budget int) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	place := a.dir
	if a.store.kind == "postgres" {
		place = a.store.describe(a.dir)
	}
	srv, err := ui.New(ui.Options{
		Store: st, Addr: ln.Addr().String(), Fleet: a.store.kind == "postgres", Budget: budget, Place: place,
		Log: slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintln(s.out, srv.URL())
	if open {
		done, err := openBrowser(srv.URL(), s.err)
		if err != nil {
			fmt.Fprintf(s.err, "acp-sidecar: cannot open the browser (%v); open the URL above\n", err)
		}
		defer done()
	}
	return srv.Serve(ctx, ln)
}

// openBrowser opens url in the user's browser the way Jupyter does: through
// a page in a private temporary file that redirects to it, so the token
// never stands on a command line that other users of the host can list.
// done removes the file.
func openBrowser(url string, errOut io.Writer) (done func(), err error) {
	dir, err := os.MkdirTemp("", "acp-sidecar-ui-")
	if err != nil {
		return func() {}, fmt.Errorf("make the redirect page: %w", err)
	}
	done = func() { os.RemoveAll(dir) }
	page := filepath.Join(dir, "open.html")
	var b []byte
	b = fmt.Appendf(b, "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url=%s\"><a href=\"%s\">acp-sidecar ui</a>\n",
		template.HTMLEscapeString(url), template.HTMLEscapeString(url))
	if err := os.WriteFile(page, b, 0o600); err != nil {
		return done, fmt.Errorf("write the redirect page: %w", err)
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", page)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", page)
	default:
		cmd = exec.Command("xdg-open", page)
	}
	if err := cmd.Start(); err != nil {
		return done, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	go func() {
		// Reaps the opener. The ui command owns it and does not wait for
		// it: an opener that is the browser itself may outlive the ui.
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(errOut, "acp-sidecar: %s: %v\n", cmd.Path, err)
		}
	}()
	return done, nil
}

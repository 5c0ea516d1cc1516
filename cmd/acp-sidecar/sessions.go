package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// `sessions`: the recorded sessions as a table, or as JSON for scripts
// (sessionJSON is that schema; docs/record.md documents it). `watch`
// draws the same table live.

// sessionJSON is one element of the `sessions --json` array.
type sessionJSON struct {
	// SessionID is the client-facing session id, stable across rebuilds.
	SessionID string `json:"sessionId"`
	// Agent is the agent's command line (argv), [] when none was recorded.
	Agent []string `json:"agent"`
	// AgentName is the configured name of the agent the session runs on now,
	// left out for a single-agent run and for records from before agents had
	// names.
	AgentName string `json:"agentName,omitempty"`
	// Cwd is the session's working directory.
	Cwd string `json:"cwd"`
	// Turns counts the turns that are not rolled back.
	Turns int `json:"turns"`
	// LastActivity is the latest of the record's update and its turns' times.
	LastActivity time.Time `json:"lastActivity"`
	// Live says a running sidecar has written the session since it joined the
	// store: some editor has it open now. A closed session is not live.
	Live bool `json:"live"`
	// Closed says the editor closed the session (session/close); its own
	// load or resume reopens it.
	Closed bool `json:"closed"`
	// Holder is, in a fleet's store, the host whose sidecar holds the
	// session's live lease; left out elsewhere and when none does.
	Holder string `json:"holder,omitempty"`
	// NotShared: a sidecar of this host kept writes of the session that
	// the fleet's database has not taken (docs/fleet.md).
	NotShared bool `json:"notShared,omitempty"`
	// Title is the title the agent last gave the session, left out when
	// it gave none.
	Title string `json:"title,omitempty"`
}

func sessionsCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:            "sessions",
		Usage:           "list the recorded sessions, most recent first",
		UsageText:       "acp-sidecar sessions [--json] [--state-dir DIR]",
		HideHelpCommand: true,
		Flags: []cli.Flag{jsonFlag(), stateDirFlag(), storeFlag(),
			&cli.BoolFlag{Name: "watch", Usage: "with a fleet's store: after the listing, print each session that changes, as it changes"}},
		Action: func(c *cli.Context) error {
			a, err := readArgs(c)
			if err != nil || len(a.pos) > 0 {
				return usageError(c, err, "usage: acp-sidecar sessions [--json] [--watch] [--state-dir DIR] [--store STORE]")
			}
			if a.watch {
				if a.store.kind != "postgres" {
					return usageError(c, errors.New("--watch follows a fleet's store (--store postgres://…)"), "usage: acp-sidecar sessions --watch --store STORE")
				}
				return withStore(c.Context, a, func(ctx context.Context, st state.Store) error {
					return watchSessions(ctx, st.(*state.Fleet), a.json, s.out)
				})
			}
			return withStore(c.Context, a, func(ctx context.Context, st state.Store) error {
				list, err := st.Sessions(ctx)
				if err != nil {
					return err
				}
				kept, err := keptHere(a)
				if err != nil {
					return err
				}
				rows := sessionsJSON(list)
				for i := range rows {
					rows[i].NotShared = slices.Contains(kept, rows[i].SessionID)
				}
				if a.json {
					return writeJSON(s.out, rows)
				}
				return writeSessionTable(s.out, list, tableOpts{header: true, fleet: a.store.kind == "postgres", notShared: kept})
			})
		},
	}
}

func sessionsJSON(list []state.Summary) []sessionJSON {
	out := make([]sessionJSON, 0, len(list))
	for _, s := range list {
		out = append(out, sessionJSON{
			SessionID: s.ID, Agent: nonNil(s.Agent), AgentName: s.AgentName, Cwd: s.Cwd,
			Turns: s.Turns, LastActivity: s.LastActivity, Live: s.Live, Closed: s.Closed, Holder: s.Holder,
			Title: s.Title,
		})
	}
	return out
}

// tableOpts shape the listing's table.
type tableOpts struct {
	header bool
	// fleet: a fleet's store, whose sessions are live on a host, idle or
	// closed, each said in LIVE.
	fleet bool
	// notShared are the sessions kept on this host and not yet in the
	// fleet's database: LIVE says so.
	notShared []string
}

// writeSessionTable prints the listing.
func writeSessionTable(w io.Writer, list []state.Summary, o tableOpts) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// The TITLE column appears only when some listed session has one, so
	// a listing of sessions without reads as it always has.
	titled := slices.ContainsFunc(list, func(s state.Summary) bool { return s.Title != "" })
	if o.header {
		header := "SESSION\tAGENT\tCWD\tTURNS\tLAST ACTIVITY\tLIVE"
		if titled {
			header += "\tTITLE"
		}
		fmt.Fprintln(tw, header)
	}
	for _, s := range list {
		live := ""
		switch {
		case s.Closed:
			live = "closed"
		case s.Live && s.Holder != "":
			live = "live on " + s.Holder
		case s.Live:
			live = "live"
		case o.fleet:
			live = "idle"
		}
		if slices.Contains(o.notShared, s.ID) {
			live = strings.TrimSpace(live + " not shared")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s",
			cell(s.ID, 0), cell(namedAgent(s.AgentName, shortAgent(s.Agent)), 40), cell(shortPath(s.Cwd), 40), s.Turns, showTime(s.LastActivity), live)
		if titled {
			fmt.Fprintf(tw, "\t%s", orDash(cell(s.Title, 40)))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

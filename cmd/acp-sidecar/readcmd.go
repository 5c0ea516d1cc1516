package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// What every command that reads the record shares (sessions, show, handoff,
// delete, ui, watch): the flags that find the store, the arguments they
// take, the store opened for reading, and the errors a user can act on.

// stateDirFlag is --state-dir on a read-only subcommand, so it can come after
// the subcommand too. It has no env var and no default: readArgs falls
// back to the app's flag, which has both.
func stateDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "state-dir", Usage: "where sessions are kept (default $XDG_STATE_HOME/acp-sidecar)"}
}

// storeFlag is --store on a read-only subcommand, as stateDirFlag is
// --state-dir: the app's flag, with its env var and default, stands behind
// it.
func storeFlag() cli.Flag {
	return &cli.StringFlag{Name: "store", Usage: storeUsage}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table (schema in docs/record.md)"}
}

// readCmdArgs are a read-only command's arguments and flags.
type readCmdArgs struct {
	pos   []string // positional arguments
	json  bool
	watch bool      // sessions --watch
	dir   string    // the state dir to read
	store storeSpec // --store: the state dir's store, or a fleet's
}

// place names where the command reads, for its messages: the state dir,
// or the fleet's database by host and name.
func (a readCmdArgs) place() string {
	if a.store.kind == "postgres" {
		return a.store.where
	}
	return a.dir
}

// readArgs collects the arguments and flags wherever they stand. urfave/cli
// v2 stops parsing flags at the first argument, as package flag does, so in
// `show SESSION --json` the --json is left among the arguments; readArgs
// parses the flags that follow each argument itself.
//
// The state dir is the last --state-dir after the subcommand, else the one
// before it (or ACP_SIDECAR_STATE_DIR), else state.DefaultDir. c.String alone
// is not enough: urfave/cli resolves a name in the nearest context that
// declares it, so the subcommand's unset flag would hide the app's.
func readArgs(c *cli.Context) (readCmdArgs, error) {
	a := readCmdArgs{json: c.Bool("json"), watch: c.Bool("watch")}
	for _, cc := range c.Lineage() {
		if cc.IsSet("state-dir") && cc.String("state-dir") != "" {
			a.dir = cc.String("state-dir")
			break
		}
	}
	store := "disk"
	for _, cc := range c.Lineage() {
		// The subcommand's own, when given, else the app's (its env var
		// counts as set).
		if cc.IsSet("store") && cc.String("store") != "" {
			store = cc.String("store")
			break
		}
	}
	fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&a.json, "json", a.json, "")
	fs.BoolVar(&a.watch, "watch", a.watch, "")
	fs.StringVar(&a.dir, "state-dir", a.dir, "")
	fs.StringVar(&store, "store", store, "")
	for rest := c.Args().Slice(); len(rest) > 0; rest = fs.Args() {
		a.pos = append(a.pos, rest[0])
		if err := fs.Parse(rest[1:]); err != nil {
			return a, err
		}
	}
	if a.watch && c.Command.Name != "sessions" {
		return a, errors.New("--watch is a flag of sessions")
	}
	var err error
	if a.store, err = parseStore(store); err != nil {
		return a, err
	}
	if a.dir == "" {
		d, err := state.DefaultDir()
		if err != nil {
			return a, err
		}
		a.dir = d
	}
	return a, nil
}

// usageError is exit status 2 with the usage line, or the command's help
// for -h among the trailing flags.
func usageError(c *cli.Context, err error, usage string) error {
	if errors.Is(err, flag.ErrHelp) {
		return cli.ShowSubcommandHelp(c)
	}
	if err != nil {
		usage = err.Error() + "; " + usage
	}
	return &exitError{code: 2, err: errors.New(usage)}
}

// withStore opens the store in dir for reading, runs f and closes the store.
// Every failure is exit status 1 with a message on stderr.
func withStore(ctx context.Context, a readCmdArgs, f func(ctx context.Context, st state.Store) error) error {
	st, err := openForReading(ctx, a)
	if err != nil {
		return &exitError{code: 1, err: storeError(a, err)}
	}
	err = f(ctx, st)
	if cerr := st.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close store %s: %w", a.place(), cerr)
	}
	if err != nil {
		return &exitError{code: 1, err: storeError(a, err)}
	}
	return nil
}

// openForReading opens the store the command reads: the state dir's, or
// the fleet's. A directory that does not exist holds no sessions, and a
// read-only command should not create it, so it reads as an empty store.
func openForReading(ctx context.Context, a readCmdArgs) (state.Store, error) {
	switch {
	case a.store.kind == "postgres":
		return a.store.openPostgres(ctx, nil, 0, "", nil, "")
	case a.store.kind == "memory":
		return state.NewMemory(), nil
	}
	if _, err := os.Stat(a.dir); errors.Is(err, fs.ErrNotExist) {
		return state.NewMemory(), nil
	}
	return state.Open(ctx, a.dir, state.Options{ConnectTimeout: readConnectTimeout})
}

// storeError explains the store's failures that a user can act on.
func storeError(a readCmdArgs, err error) error {
	if a.store.kind == "postgres" {
		switch {
		case errors.Is(err, state.ErrNewerSchema):
			return fmt.Errorf("the fleet's store (%s) was migrated by a newer acp-sidecar; use that version to read it (%w)", a.store.where, err)
		case errors.Is(err, state.ErrUnavailable):
			return fmt.Errorf("the fleet's store (%s) is unreachable; try again (%w)", a.store.where, err)
		}
		return err
	}
	dir := a.dir
	switch {
	case errors.Is(err, state.ErrCorrupt):
		return fmt.Errorf("the state store in %s is damaged and cannot be read (%w); "+
			"nothing was changed: move the directory aside to start a fresh store", dir, err)
	case errors.Is(err, state.ErrNewerSchema):
		return fmt.Errorf("the state store in %s was written by a newer acp-sidecar; use that version to read it (%w)", dir, err)
	case errors.Is(err, state.ErrUnavailable):
		return fmt.Errorf("the state store in %s is busy or unreachable; try again (%w)", dir, err)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cell makes s safe for one tabwriter cell on a terminal: control characters
// (tabs, newlines, escapes) become spaces, and it is cut to max runes (0: no
// limit) with an ellipsis.
func cell(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if max > 0 && len([]rune(s)) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// watchSessions is `sessions --watch` on a fleet's store: the listing, then
// a line for each session that changes, as the database notifies it
// (LISTEN/NOTIFY, ids only; the rows are read after). It runs until ctx
// ends or the connection to the database breaks.
func watchSessions(ctx context.Context, f *state.Fleet, asJSON bool, out io.Writer) error {
	var (
		mu      sync.Mutex
		pending []string
		wake    = make(chan struct{}, 1)
	)
	listed := make(chan error, 1)
	watched := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// Owned by watchSessions: it ends when wctx does, or with the
		// connection.
		watched <- f.Watch(wctx, func() {
			list, err := f.Sessions(wctx)
			if err == nil {
				err = printRows(out, list, asJSON, true)
			}
			listed <- err
		}, func(id string) {
			mu.Lock()
			if !slices.Contains(pending, id) {
				pending = append(pending, id)
			}
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case err := <-listed:
		if err != nil {
			return err
		}
	case err := <-watched:
		return err
	}
	for {
		select {
		case err := <-watched:
			return err
		case <-wake:
		}
		mu.Lock()
		ids := pending
		pending = nil
		mu.Unlock()
		// Changes that come while the rows are read wait for the next
		// round: one read of the listing for all of them.
		list, err := f.Sessions(wctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		var rows []state.Summary
		for _, id := range ids {
			i := slices.IndexFunc(list, func(s state.Summary) bool { return s.ID == id })
			if i < 0 {
				if err := printGone(out, id, asJSON); err != nil {
					return err
				}
				continue
			}
			rows = append(rows, list[i])
		}
		if err := printRows(out, rows, asJSON, false); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}

// printRows prints sessions as the listing does: a table (with its header
// first) or, for --json, the first listing as one JSON array on one line,
// then one JSON object a line for each change.
func printRows(out io.Writer, list []state.Summary, asJSON, first bool) error {
	if !asJSON {
		o := tableOpts{header: first, fleet: true}
		return writeSessionTable(out, list, o)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if first {
		return enc.Encode(sessionsJSON(list))
	}
	for _, row := range sessionsJSON(list) {
		if err := enc.Encode(row); err != nil {
			return err
		}
	}
	return nil
}

// printGone says a session left the listing: deleted, or not a session
// with a record yet.
func printGone(out io.Writer, id string, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(map[string]any{"sessionId": id, "gone": true})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(out, "%s\tgone\n", cell(id, 0))
	return err
}

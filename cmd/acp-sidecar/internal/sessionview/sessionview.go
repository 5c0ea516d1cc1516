package sessionview

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Read returns the session's record and its turns (none is no error: a
// record may have no turn yet). A missing session is state.ErrNotFound.
func Read(ctx context.Context, st state.Store, id string) (*state.Session, []state.Turn, error) {
	sess, err := st.Session(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	turns, err := st.Turns(ctx, id)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, nil, err
	}
	return sess, turns, nil
}

// Lookup finds a fork's parents in st for replay.Conversation; a parent
// that cannot be read is left out, as a deleted one is.
func Lookup(ctx context.Context, st state.Store) replay.Lookup {
	return func(pid string) (*state.Session, []state.Turn, bool) {
		p, pt, err := Read(ctx, st, pid)
		return p, pt, err == nil
	}
}

// SettleRunning shows a turn recorded running as interrupted when no
// sidecar serves its session now: the process that ran it died (the record
// writes a turn as it begins), and the turn ends only when someone brings
// the session back and marks it so. It changes turns in place.
func SettleRunning(ctx context.Context, st state.Store, id string, turns []state.Turn) error {
	if !slices.ContainsFunc(turns, func(t state.Turn) bool { return t.Status == state.TurnRunning }) {
		return nil
	}
	list, err := st.Sessions(ctx)
	if err != nil {
		return err
	}
	Settle(turns, slices.ContainsFunc(list, func(s state.Summary) bool { return s.ID == id && s.Live }))
	return nil
}

// Settle is SettleRunning for a caller that knows whether the session is
// live.
func Settle(turns []state.Turn, live bool) {
	if live {
		return
	}
	for i := range turns {
		if turns[i].Status == state.TurnRunning {
			turns[i].Status = state.TurnInterrupted
		}
	}
}

// Layer indexes the three recorded layers in a ConfigRow.
const (
	Baseline = iota
	Original
	Live
)

// ConfigRow is one option lined up across the layers baseline, original
// and live.
type ConfigRow struct {
	// ID is the option's id; for a legacy row, "mode" or "model".
	ID       string
	Category string
	// Legacy marks the legacy modes/models API's row: Values hold its
	// current id as a JSON string.
	Legacy bool
	// Has says whether each layer has the option.
	Has [3]bool
	// Values are each layer's current value as raw JSON, as the agent
	// reported it (empty when it reported none).
	Values [3]json.RawMessage
}

// ConfigRows lines the layers up by option id, in live's order, then the
// original's and the baseline's extras, then the legacy mode and model
// (those only when some layer uses that API).
func ConfigRows(sess *state.Session) []ConfigRow {
	layers := [3]*state.Config{sess.Baseline, sess.Original, sess.Live}
	var ids []string
	cats := map[string]string{}
	for _, c := range []*state.Config{sess.Live, sess.Original, sess.Baseline} {
		if c == nil {
			continue
		}
		for _, o := range c.Options {
			if !slices.Contains(ids, o.ID) {
				ids = append(ids, o.ID)
			}
			if cats[o.ID] == "" {
				cats[o.ID] = o.Category
			}
		}
	}
	var rows []ConfigRow
	for _, id := range ids {
		r := ConfigRow{ID: id, Category: cats[id]}
		for i, c := range layers {
			if o := c.Option(id); o != nil {
				r.Has[i], r.Values[i] = true, o.Current
			}
		}
		rows = append(rows, r)
	}
	for _, name := range []string{"mode", "model"} {
		r := ConfigRow{ID: name, Category: name, Legacy: true}
		found := false
		for i, c := range layers {
			var l *state.Legacy
			if c != nil && name == "mode" {
				l = c.Mode
			} else if c != nil {
				l = c.Model
			}
			if l != nil {
				b, err := json.Marshal(l.Current)
				if err != nil {
					continue // a Go string always encodes
				}
				r.Has[i], r.Values[i], found = true, b, true
			}
		}
		if found {
			rows = append(rows, r)
		}
	}
	return rows
}

// ShortAgent joins argv with the program's directory dropped:
// "/usr/local/bin/claude-agent-acp --x" reads "claude-agent-acp --x".
func ShortAgent(argv []string) string {
	if len(argv) == 0 {
		return "-"
	}
	parts := append([]string{filepath.Base(argv[0])}, argv[1:]...)
	for i, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t\"'") {
			parts[i] = strconv.Quote(p)
		}
	}
	return strings.Join(parts, " ")
}

// NamedAgent puts an agent's configured name before its command, "codex
// (codex-acp --x)"; without a name (a single-agent run, a record from before
// agents had names) it is the command alone.
func NamedAgent(name, command string) string {
	if name == "" {
		return command
	}
	if command == "" || command == "-" {
		return name
	}
	return name + " (" + command + ")"
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar/internal/sessionview"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// The read-only commands over the store (DESIGN.md "Surfaces"): `sessions`
// lists the recorded sessions and `show SESSION` prints one session's record.
// Both read through state.Open, so they join a running sidecar's store over its
// socket or open badger themselves, and they never write.
//
// The --json forms are a stable interface for scripts: the structs below are
// their whole schema, and docs/record.md documents it with an example. Add fields;
// never rename or remove one.

// showJSON is the `show SESSION --json` object.
type showJSON struct {
	// SessionID is the client-facing session id, stable across rebuilds.
	SessionID string `json:"sessionId"`
	// NotShared: a sidecar of this host kept writes of the session that
	// the fleet's database has not taken (docs/fleet.md); left out
	// otherwise.
	NotShared bool `json:"notShared,omitempty"`
	// NativeSessionID is the agent's id of the native session now behind
	// SessionID, "" when none was recorded.
	NativeSessionID string `json:"nativeSessionId"`
	// NativeHistory lists every native id the session has had, oldest first.
	NativeHistory []string `json:"nativeHistory"`
	// Natives says, oldest first, each time a native session was put
	// behind the session, and why; empty for records written before the
	// record kept them.
	Natives []nativeJSON `json:"natives"`
	// Agent is the agent's command line (argv).
	Agent []string `json:"agent"`
	// AgentName is the configured name of the agent the session runs on now
	// (Agent is its argv), left out for a single-agent run and for records
	// from before agents had names.
	AgentName string `json:"agentName,omitempty"`
	// Protocol is the ACP version the session was last opened in: 1 or 2
	// (1 for records from before the record kept it).
	Protocol int `json:"protocol"`
	// Cwd is the session's working directory.
	Cwd string `json:"cwd"`
	// Title is the title the agent last gave the session, left out when
	// it gave none.
	Title string `json:"title,omitempty"`
	// AdditionalDirectories are the client's extra workspace roots, if any.
	// (mcpServers are left out: their env often holds credentials.)
	AdditionalDirectories []string `json:"additionalDirectories"`
	// MetaKeys are the top-level keys of the _meta the client made the
	// session with (state.Session.Meta), which every native session made
	// for it gets again; its values are left out, as they may hold
	// credentials.
	MetaKeys []string `json:"metaKeys"`
	// Created and Updated are the record's times.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Lineage is the parent a fork came from, null for a session that is not a
	// fork.
	Lineage *lineageJSON `json:"lineage"`
	// Baseline is the config the agent reported when the native session was
	// created (display only, never restored); null if none was recorded.
	Baseline *layerJSON `json:"baseline"`
	// Original is the config once defaults and start-up --set values settled,
	// the one restore-original restores; null if none was recorded (such a
	// session refuses restore-original).
	Original *layerJSON `json:"original"`
	// Live is what the agent last accepted; null if nothing was recorded.
	Live *layerJSON `json:"live"`
	// Changed is what differs from the baseline in live
	// (baseline.Diff(live)): options in live's order, then options live
	// lacks, then legacy mode and model.
	Changed []changeJSON `json:"changed"`
	// Overrides are the client's explicit, accepted selections, oldest first.
	Overrides []overrideJSON `json:"overrides"`
	// Blocked is set while a rebuild could not restore the config and the next
	// prompt is refused; null otherwise.
	Blocked *blockedJSON `json:"blocked"`
	// SetErrors are the start-up --set values the agent did not accept.
	SetErrors []setErrorJSON `json:"setErrors"`
	// Handoff is the last delivery of kept turns to a fresh native session,
	// null if there was none.
	Handoff *handoffJSON `json:"handoff"`
	// Compaction is the agent's latest compaction of the session's context
	// that left a summary, null if there was none.
	Compaction *compactionJSON `json:"compaction"`
	// Turns are every recorded turn by index, rolled-back ones included.
	Turns []turnJSON `json:"turns"`
}

// layerJSON is one config layer in the agent's words.
type layerJSON struct {
	// Values maps each configOptions id to its current value as raw JSON
	// (null when the agent reported none).
	Values map[string]json.RawMessage `json:"values"`
	// Categories maps each option id to its category ("model", "mode", …;
	// "" when the agent gave none). Model and mode are found by category.
	Categories map[string]string `json:"categories"`
	// Mode and Model are the legacy modes/models API's current ids, left out
	// when the agent does not use that API.
	Mode  string `json:"mode,omitempty"`
	Model string `json:"model,omitempty"`
}

// changeJSON is one difference between two layers.
type changeJSON struct {
	// OptionID is the option's id, or "mode" / "model" for a legacy change.
	OptionID string `json:"optionId"`
	// Category is the option's category ("mode" / "model" for legacy).
	Category string `json:"category"`
	// Legacy marks a change in the legacy modes or models API; From and To are
	// then JSON strings.
	Legacy bool `json:"legacy"`
	// From is the baseline value, null when the option is new.
	From json.RawMessage `json:"from"`
	// To is the live value, null when live lacks the option.
	To json.RawMessage `json:"to"`
}

// overrideJSON is one explicit selection by the client.
type overrideJSON struct {
	OptionID string `json:"optionId"`
	Category string `json:"category"`
	// Value is the value as the client sent it and the agent accepted it.
	Value json.RawMessage `json:"value"`
	At    time.Time       `json:"at"`
}

// lineageJSON ties a fork to its parent.
type lineageJSON struct {
	// ParentID is the parent's client session id.
	ParentID string `json:"parentId"`
	// ForkTurn is the turn the fork was taken at: it inherits the parent's
	// kept turns before it.
	ForkTurn int `json:"forkTurn"`
}

// blockedJSON says which fields a rebuild could not restore and why.
type blockedJSON struct {
	Fields []string  `json:"fields"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// setErrorJSON is one start-up --set id=value the agent did not accept.
type setErrorJSON struct {
	OptionID string `json:"optionId"`
	Value    string `json:"value"`
	Error    string `json:"error"`
}

// handoffJSON is the bookkeeping of the last kept-turn handoff.
type handoffJSON struct {
	// NativeSessionID is the native session that received it.
	NativeSessionID string `json:"nativeSessionId"`
	// Turn is the turn whose prompt carried it.
	Turn int `json:"turn"`
	// Kept and Omitted count the turns included and left out.
	Kept    int       `json:"kept"`
	Omitted int       `json:"omitted"`
	At      time.Time `json:"at"`
}

// nativeJSON is one time a native session was put behind the session.
type nativeJSON struct {
	// NativeSessionID is the agent's id of it.
	NativeSessionID string `json:"nativeSessionId"`
	// Event is why: new, fork, open (the client's own load or resume),
	// reset, rewind, crash, reopen (the client's load of a session not
	// live in the sidecar), failover (a reopen or an open on another host), absorbed
	// (the agent failed the client's load or resume; the record answered)
	// or switch.
	Event string `json:"event"`
	// Path is how the agent gave it: new, fork, load or resume.
	Path string `json:"path"`
	// Host is the host of the sidecar that put it there, left out when
	// unknown.
	Host string    `json:"host,omitempty"`
	At   time.Time `json:"at"`
	// Handoff is the handoff it got with a prompt, null for none; the text
	// is that turn's.
	Handoff *handoffJSON `json:"handoff"`
}

// compactionJSON is the agent's compaction of the session's context: a
// handoff hands over its summary in place of the turns before turn Turn.
type compactionJSON struct {
	// ID is the agent's compactionId.
	ID string `json:"compactionId"`
	// Turn is the turn it ran in (the next turn, for one between turns).
	Turn int `json:"turn"`
	// Summary is the text the agent kept of the turns before it.
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// turnJSON is one session/prompt and what came of it.
type turnJSON struct {
	// Index numbers turns from 1.
	Index int `json:"index"`
	// Status is running, completed, cancelled, failed, interrupted or
	// rolled_back.
	Status string `json:"status"`
	// StopReason is the agent's stopReason, "" if the turn never ended.
	StopReason string `json:"stopReason"`
	// Prompt is the text of the prompt's text blocks, in full.
	Prompt string `json:"prompt"`
	// Answer is the agent's text, in full.
	Answer string `json:"answer"`
	// ToolCalls are the titles and statuses of the turn's tool calls.
	ToolCalls []toolCallJSON `json:"toolCalls"`
	// Notices are the advisories the agent showed during the turn, not
	// part of Answer and never handed over.
	Notices []string `json:"notices"`
	// Origin is "agent" for a turn the agent began itself (ACP v2), which
	// has no prompt; left out for a turn of the client's prompt.
	Origin string `json:"origin,omitempty"`
	// Asked is what the agent asked the user during the turn: the tool
	// call a permission was for, an elicitation's message.
	Asked []string `json:"asked"`
	// NativeSessionID is the native session that ran the turn.
	NativeSessionID string `json:"nativeSessionId"`
	// Handoff is the exact handoff text the turn's prompt carried ahead
	// of Prompt, left out for none (and for turns recorded before the
	// record kept it).
	Handoff string `json:"handoff,omitempty"`
	// UserMessageID is the messageId a v2 agent accepted the prompt
	// under, which the client knows the user's message by; left out in v1.
	UserMessageID string `json:"userMessageId,omitempty"`
	// AgentName is the configured name of the agent that ran the turn (a
	// session may move between agents), left out as the session's is. It is
	// not "agent": that key is an argv everywhere else in this schema.
	AgentName string    `json:"agentName,omitempty"`
	Started   time.Time `json:"started"`
	// Ended is left out while the turn has not ended.
	Ended time.Time `json:"ended,omitzero"`
}

// toolCallJSON is what a turn keeps of one tool call.
type toolCallJSON struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

func showCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:            "show",
		Usage:           "print one session's record: identity, config layers, overrides and turns",
		UsageText:       "acp-sidecar show SESSION [--json] [--state-dir DIR]",
		HideHelpCommand: true,
		Flags:           []cli.Flag{jsonFlag(), stateDirFlag(), storeFlag()},
		Action: func(c *cli.Context) error {
			a, err := readArgs(c)
			if err != nil || len(a.pos) != 1 {
				return usageError(c, err, "usage: acp-sidecar show SESSION [--json] [--state-dir DIR]")
			}
			id := a.pos[0]
			return withStore(c.Context, a, func(ctx context.Context, st state.Store) error {
				sess, err := st.Session(ctx, id)
				if errors.Is(err, state.ErrNotFound) {
					return fmt.Errorf("no session %q in %s (acp-sidecar sessions lists them)", id, a.place())
				}
				if err != nil {
					return err
				}
				turns, err := st.Turns(ctx, id)
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					return err
				}
				if err := sessionview.SettleRunning(ctx, st, id, turns); err != nil {
					return err
				}
				kept, err := keptHere(a)
				if err != nil {
					return err
				}
				notShared := slices.Contains(kept, id)
				if a.json {
					v := buildShow(sess, turns)
					v.NotShared = notShared
					return writeJSON(s.out, v)
				}
				if notShared {
					fmt.Fprintf(s.out, "not shared: a sidecar of this host kept writes of this session that the fleet's database has not taken (docs/fleet.md)\n")
				}
				return writeShow(s.out, sess, turns)
			})
		},
	}
}

// keptHere are the sessions of a fleet's store a sidecar of this host kept
// writes of that the database has not taken (state.KeptSessions); none for
// the store of one host.
func keptHere(a readCmdArgs) ([]string, error) {
	if a.store.kind != "postgres" {
		return nil, nil
	}
	return state.KeptSessions(a.dir)
}

// readConnectTimeout is how long a read command waits for the store's
// owner to take it in. A sidecar gives up on its owner after the store's
// default 2 s and records in memory meanwhile, which loses nothing; a
// read that gives up has nothing to show but "busy or unreachable", and on
// a host busy enough (a CI run beside a real agent's conformance) the
// owner took longer than 2 s to answer. Someone who typed the command
// would rather wait the few seconds more.
const readConnectTimeout = 15 * time.Second

func buildShow(sess *state.Session, turns []state.Turn) showJSON {
	v := showJSON{
		SessionID:             sess.ClientID,
		NativeSessionID:       sess.NativeID,
		NativeHistory:         nonNil(sess.NativeHistory),
		Natives:               []nativeJSON{},
		Agent:                 nonNil(sess.Agent),
		AgentName:             sess.AgentName,
		Protocol:              sess.ProtocolVersion(),
		Cwd:                   sess.Cwd,
		Title:                 sess.Title,
		AdditionalDirectories: nonNil(sess.AdditionalDirectories),
		MetaKeys:              metaKeys(sess.Meta),
		Created:               sess.Created,
		Updated:               sess.Updated,
		Baseline:              layer(sess.Baseline),
		Original:              layer(sess.Original),
		Live:                  layer(sess.Live),
		Changed:               []changeJSON{},
		Overrides:             []overrideJSON{},
		SetErrors:             []setErrorJSON{},
		Turns:                 []turnJSON{},
	}
	if l := sess.Lineage; l != nil {
		v.Lineage = &lineageJSON{ParentID: l.ParentID, ForkTurn: l.ForkTurn}
	}
	for _, c := range sess.Baseline.Diff(sess.Live) {
		v.Changed = append(v.Changed, changeJSON{OptionID: c.OptionID, Category: c.Category, Legacy: c.Legacy, From: c.From, To: c.To})
	}
	for _, o := range sess.Overrides {
		v.Overrides = append(v.Overrides, overrideJSON{OptionID: o.OptionID, Category: o.Category, Value: o.Value, At: o.At})
	}
	if b := sess.Blocked; b != nil {
		v.Blocked = &blockedJSON{Fields: nonNil(b.Fields), Reason: b.Reason, At: b.At}
	}
	for _, e := range sess.SetErrors {
		v.SetErrors = append(v.SetErrors, setErrorJSON{OptionID: e.OptionID, Value: e.Value, Error: e.Err})
	}
	v.Handoff = handoffOf(sess.Handoff)
	for _, n := range sess.Natives {
		v.Natives = append(v.Natives, nativeJSON{NativeSessionID: n.ID, Event: n.Event, Path: n.Path, Host: n.Host, At: n.At, Handoff: handoffOf(n.Handoff)})
	}
	if c := sess.Compaction; c != nil {
		v.Compaction = &compactionJSON{ID: c.ID, Turn: c.Turn, Summary: c.Summary, At: c.At}
	}
	for _, t := range turns {
		tj := turnJSON{
			Index: t.Index, Status: string(t.Status), StopReason: t.StopReason,
			Prompt: t.PromptText, Answer: t.Answer, ToolCalls: []toolCallJSON{}, Notices: nonNil(t.Notices), Origin: t.Origin, Asked: nonNil(t.Asked),
			NativeSessionID: t.NativeID, Handoff: t.Handoff, UserMessageID: t.UserMessageID, AgentName: t.Agent, Started: t.Started, Ended: t.Ended,
		}
		for _, tc := range t.ToolCalls {
			tj.ToolCalls = append(tj.ToolCalls, toolCallJSON{ID: tc.ID, Title: tc.Title, Status: tc.Status})
		}
		v.Turns = append(v.Turns, tj)
	}
	return v
}

// handoffOf is h in the JSON's shape; nil stays nil (null).
func handoffOf(h *state.Handoff) *handoffJSON {
	if h == nil {
		return nil
	}
	return &handoffJSON{NativeSessionID: h.NativeID, Turn: h.Turn, Kept: h.Kept, Omitted: h.Omitted, At: h.At}
}

// layer is a config in the JSON's shape; nil stays nil (null).
func layer(c *state.Config) *layerJSON {
	if c == nil {
		return nil
	}
	l := &layerJSON{Values: map[string]json.RawMessage{}, Categories: map[string]string{}}
	for _, o := range c.Options {
		v := o.Current
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		l.Values[o.ID] = v
		l.Categories[o.ID] = o.Category
	}
	if c.Mode != nil {
		l.Mode = c.Mode.Current
	}
	if c.Model != nil {
		l.Model = c.Model.Current
	}
	return l
}

// writeShow prints the record for a person: identity, the three layers side by
// side, what live changed from the baseline, then overrides, problems and
// turns. Everything the agent or client wrote is cleaned of control
// characters, so a recorded answer cannot drive the terminal.
func writeShow(w io.Writer, sess *state.Session, turns []state.Turn) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("session", cell(sess.ClientID, 0))
	if sess.Title != "" {
		row("title", cell(sess.Title, 0))
	}
	native := orNone(cell(sess.NativeID, 0))
	if len(sess.NativeHistory) > 1 {
		native += " (history: " + cell(strings.Join(sess.NativeHistory, ", "), 0) + ")"
	}
	row("native", native)
	row("agent", orNone(cell(namedAgent(sess.AgentName, strings.Join(sess.Agent, " ")), 0)))
	row("acp", fmt.Sprintf("v%d", sess.ProtocolVersion()))
	row("cwd", orNone(cell(sess.Cwd, 0)))
	if len(sess.AdditionalDirectories) > 0 {
		row("dirs", cell(strings.Join(sess.AdditionalDirectories, ", "), 0))
	}
	if keys := metaKeys(sess.Meta); len(keys) > 0 {
		row("_meta", cell(strings.Join(keys, ", "), 0))
	}
	row("created", showTime(sess.Created))
	row("updated", showTime(sess.Updated))
	if l := sess.Lineage; l != nil {
		row("lineage", fmt.Sprintf("forked from %s at turn %d", cell(l.ParentID, 0), l.ForkTurn))
	}
	if h := sess.Handoff; h != nil {
		row("handoff", fmt.Sprintf("%d turns kept, %d omitted, to %s with turn %d", h.Kept, h.Omitted, cell(h.NativeID, 0), h.Turn))
	}
	if c := sess.Compaction; c != nil {
		row("compacted", fmt.Sprintf("at turn %d, %s: %s", c.Turn, showTime(c.At), cell(firstLine(c.Summary), 60)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nconfig")
	if sess.Original == nil {
		fmt.Fprintln(w, "  original: (none recorded)")
	}
	if rows := configRows(sess); len(rows) == 0 {
		fmt.Fprintln(w, "  (no config recorded)")
	} else {
		fmt.Fprintln(tw, "  OPTION\tCATEGORY\tBASELINE\tORIGINAL\tLIVE")
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(r.id, 30), orDash(cell(r.category, 20)), r.vals[0], r.vals[1], r.vals[2])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch changes := sess.Baseline.Diff(sess.Live); {
	case sess.Baseline == nil:
		fmt.Fprintln(w, "  changed from baseline: (no baseline recorded)")
	case len(changes) == 0:
		fmt.Fprintln(w, "  changed from baseline: nothing")
	default:
		fmt.Fprintln(w, "  changed from baseline:")
		for _, c := range changes {
			fmt.Fprintf(w, "    %s: %s → %s\n", changeLabel(c), valueOrNone(c.From), valueOrNone(c.To))
		}
	}

	if len(sess.Overrides) > 0 {
		fmt.Fprintln(w, "\noverrides")
		for i, o := range sess.Overrides {
			fmt.Fprintf(tw, "  %d.\t%s\t= %s\t%s\n", i+1, cell(o.OptionID, 30), showValue(o.Value), showTime(o.At))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if b := sess.Blocked; b != nil {
		fmt.Fprintf(w, "\nblocked since %s: %s (fields: %s)\n", showTime(b.At), cell(b.Reason, 0), cell(strings.Join(b.Fields, ", "), 0))
	}
	if len(sess.SetErrors) > 0 {
		fmt.Fprintln(w, "\n--set errors")
		for _, e := range sess.SetErrors {
			fmt.Fprintf(w, "  %s=%s: %s\n", cell(e.OptionID, 0), cell(e.Value, 0), cell(e.Err, 0))
		}
	}

	if len(sess.Natives) > 0 {
		// Why each native session was made, and the handoff it got.
		fmt.Fprintln(w, "\nnative sessions")
		fmt.Fprintln(tw, "  #\tEVENT\tBY\tNATIVE\tAT\tHANDOFF")
		for i, n := range sess.Natives {
			handoff := "-"
			if h := n.Handoff; h != nil {
				handoff = fmt.Sprintf("with turn %d: %d kept, %d left out", h.Turn, h.Kept, h.Omitted)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", i+1, cell(n.Event, 12), orDash(cell(n.Path, 8)), cell(n.ID, 0), showTime(n.At), handoff)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nturns")
	if len(turns) == 0 {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	// The AGENT column appears only when some turn has an agent name, so a
	// record from a single-agent run, or from before agents had names, reads
	// as it always has.
	named := slices.ContainsFunc(turns, func(t state.Turn) bool { return t.Agent != "" })
	if named {
		fmt.Fprintln(tw, "  #\tAGENT\tSTATUS\tSTOP\tPROMPT\tANSWER")
	} else {
		fmt.Fprintln(tw, "  #\tSTATUS\tSTOP\tPROMPT\tANSWER")
	}
	for _, t := range turns {
		fmt.Fprintf(tw, "  %d\t", t.Index)
		if named {
			fmt.Fprintf(tw, "%s\t", orDash(cell(t.Agent, 20)))
		}
		prompt := cell(firstLine(t.PromptText), 40)
		if t.Origin == state.OriginAgent {
			prompt = "(the agent's own)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Status, orDash(cell(t.StopReason, 20)), prompt, cell(firstLine(t.Answer), 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The agent's advisories, apart from the answers they are not part of.
	if !slices.ContainsFunc(turns, func(t state.Turn) bool { return len(t.Notices) > 0 }) {
		return nil
	}
	fmt.Fprintln(w, "\nnotices")
	for _, t := range turns {
		for _, n := range t.Notices {
			fmt.Fprintf(tw, "  %d\t%s\n", t.Index, cell(firstLine(n), 80))
		}
	}
	return tw.Flush()
}

// configRow is one line of the side-by-side table: baseline, original, live.
type configRow struct {
	id, category string
	vals         [3]string
}

// configRows are sessionview.ConfigRows for a terminal: each value shown
// as showValue does ("-" where a layer lacks the option), legacy rows
// named "mode (legacy)" and "model (legacy)".
func configRows(sess *state.Session) []configRow {
	var rows []configRow
	for _, r := range sessionview.ConfigRows(sess) {
		row := configRow{id: r.ID, category: r.Category}
		if r.Legacy {
			row.id = r.ID + " (legacy)"
		}
		for i, v := range r.Values {
			row.vals[i] = "-"
			switch {
			case !r.Has[i]:
			case r.Legacy:
				var id string
				_ = json.Unmarshal(v, &id) // ConfigRows encoded it from a string
				row.vals[i] = cell(id, 30)
			default:
				row.vals[i] = showValue(v)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func changeLabel(c state.Change) string {
	switch {
	case c.Legacy:
		return c.OptionID + " (legacy)"
	case c.Category != "" && c.Category != c.OptionID:
		return cell(c.OptionID, 30) + " (" + cell(c.Category, 20) + ")"
	}
	return cell(c.OptionID, 30)
}

// showValue prints a raw JSON value for a person: a string without its
// quotes, anything else as compact JSON.
func showValue(v json.RawMessage) string {
	if len(v) == 0 {
		return "-"
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return `""`
		}
		return cell(s, 30)
	}
	var b bytes.Buffer
	if json.Compact(&b, v) == nil {
		return cell(b.String(), 30)
	}
	return cell(string(v), 30)
}

func valueOrNone(v json.RawMessage) string {
	if len(v) == 0 {
		return "(none)"
	}
	return showValue(v)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// shortAgent is sessionview.ShortAgent.
func shortAgent(argv []string) string { return sessionview.ShortAgent(argv) }

// namedAgent is sessionview.NamedAgent.
func namedAgent(name, command string) string { return sessionview.NamedAgent(name, command) }

// shortPath writes the home directory as ~.
func shortPath(p string) string {
	if p == "" {
		return "-"
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		if p == home {
			return "~"
		}
		if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
			return "~" + string(filepath.Separator) + rest
		}
	}
	return p
}

func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nonNil makes an absent list print as [] rather than null.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// metaKeys are the top-level keys of a session's creation _meta, sorted;
// empty for none.
func metaKeys(meta json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return []string{}
	}
	return slices.Sorted(maps.Keys(m))
}

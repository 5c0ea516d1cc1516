package suite

import (
	"fmt"
	"io"
	"strings"
)

// The table is printed as the run goes: its head once the probe has
// answered, a row as soon as a check is known, the summary at the end. A
// run on a real agent takes minutes, and a table held back until the end
// left the person running it looking at nothing for all of them.

// timeWidth is the TIME column's width: "999.9s", longer than any check's
// default bound of 2m.
const timeWidth = 6

// table prints report rows in columns of fixed widths. The widths come
// from the registry (every check id and tier) and every verdict, not from
// the rows, so a row printed the moment its check ends lines up with the
// rows printed before and after it, as tabwriter's would at the end.
type table struct {
	w                 io.Writer // nil: print nothing
	id, tier, verdict int
}

func newTable(w io.Writer) *table {
	t := &table{w: w, id: len("CHECK"), tier: len("TIER"), verdict: len("VERDICT")}
	for _, c := range checks() {
		t.id = max(t.id, len(c.id))
		t.tier = max(t.tier, len(c.tier))
	}
	for _, v := range verdicts {
		t.verdict = max(t.verdict, len(v))
	}
	return t
}

// head prints the agent line and the column names.
func (t *table) head(rep *Report) {
	if t.w == nil {
		return
	}
	name := rep.Agent.Name
	if name == "" {
		name = strings.Join(rep.Agent.Command, " ")
	}
	fmt.Fprintf(t.w, "agent: %s %s (protocol %d)\n", name, rep.Agent.Version, rep.Agent.ProtocolVersion)
	t.line("CHECK", "TIER", "VERDICT", "TIME", "DETAIL")
}

// row prints one check's row.
func (t *table) row(c CheckResult) {
	if t.w == nil {
		return
	}
	t.line(c.ID, c.Tier, c.Verdict, fmt.Sprintf("%.1fs", float64(c.DurationMs)/1000), oneLine(c.Detail, 400))
}

func (t *table) line(id, tier, verdict, took, detail string) {
	l := fmt.Sprintf("%-*s  %-*s  %-*s  %-*s  %s", t.id, id, t.tier, tier, t.verdict, verdict, timeWidth, took, detail)
	fmt.Fprintln(t.w, strings.TrimRight(l, " "))
}

// foot prints the summary line.
func (t *table) foot(rep *Report) {
	if t.w == nil {
		return
	}
	s := rep.Summary
	passed := fmt.Sprintf("%d passed", s.Pass)
	if s.Absorbed > 0 {
		passed += fmt.Sprintf(" (%d absorbed)", s.Absorbed)
	}
	warned := ""
	if s.Warn > 0 {
		warned = fmt.Sprintf(", %d warned", s.Warn)
	}
	fmt.Fprintf(t.w, "%s, %d failed, %d skipped%s in %.1fs; transcripts in %s\n",
		passed, s.Fail, s.Skip, warned, float64(rep.DurationMs)/1000, rep.Transcripts)
}

// printTable prints a whole report at once, as the run would have printed
// it as it went.
func printTable(w io.Writer, rep *Report) {
	t := newTable(w)
	t.head(rep)
	for _, c := range rep.Checks {
		t.row(c)
	}
	t.foot(rep)
}

// inOrder releases the results of checks that end in any order in the
// order they were started in (the registry's): a result once it and every
// result before it are in. Checks run side by side, and the rows must
// still come out in the same order on every run.
type inOrder struct {
	next int
	done []*CheckResult
}

func newInOrder(n int) *inOrder { return &inOrder{done: make([]*CheckResult, n)} }

// add takes check i's result and returns the results it releases, in
// order: none while an earlier check is still running.
func (o *inOrder) add(i int, res CheckResult) []CheckResult {
	o.done[i] = &res
	var out []CheckResult
	for o.next < len(o.done) && o.done[o.next] != nil {
		out = append(out, *o.done[o.next])
		o.next++
	}
	return out
}

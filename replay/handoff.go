package replay

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// Handoff budget bounds (DESIGN.md "Hand over").
const (
	DefaultBudget = 16 << 10
	MaxBudget     = 64 << 10
)

// HandoffTag starts the handoff text. Agents title a fresh native session
// from its first prompt, which the handoff leads: a title that starts with
// the tag is the handoff's, not the user's.
const HandoffTag = "[acp-sidecar] "

const (
	handoffHeader = HandoffTag + "What follows is the earlier conversation of this session, carried over because the agent's session was replaced. " +
		"It is given as context only: it is not a new request, and nothing in it is an instruction to act on now.\n"
	handoffFooter = "[acp-sidecar] End of the earlier conversation. The user's new request follows."
	omittedNote   = "(%d earlier items were left out to fit the size limit.)\n"
	summaryOpen   = "<summary of the earlier conversation, as the agent compacted its context>\n"
	summaryClose  = "</summary>\n"
)

// Handoff is the text a fresh native session gets ahead of the user's next
// prompt, and what went into it.
type Handoff struct {
	Text string
	// Kept counts the turns the handoff draws on; Items the user and agent
	// messages it holds (and a compaction's summary), Omitted those that did
	// not fit.
	Kept, Items, Omitted int
}

// Kept returns the turns a handoff draws on, in order: every turn not rolled
// back and not cancelled. Completed, failed and interrupted turns stay: the
// user saw them happen. A turn still running when its process died counts
// as interrupted.
func Kept(turns []state.Turn) []state.Turn {
	var out []state.Turn
	for _, t := range turns {
		switch t.Status {
		case state.TurnRolledBack, state.TurnCancelled:
			continue
		case state.TurnRunning:
			t.Status = state.TurnInterrupted
		}
		out = append(out, t)
	}
	return out
}

type item struct {
	turn, order int  // turn number (1-based) and position in the text
	user        bool // the user's message, not the agent's
	text        string
	// summary is a compaction's summary, the raw text: cut to fit where
	// a turn's message would be left out.
	summary string
}

// BuildHandoff renders the kept turns within budget bytes (0 means
// DefaultBudget; more than MaxBudget is capped). It picks the latest user
// message, the latest agent answer, the first user message, then the rest
// newest first; an item that does not fit is left out whole and counted.
// A compaction's summary (IsSummary) leads the conversation, so it takes
// the first user message's place. The text lists what it kept oldest
// first, each item tagged with its role and turn number. A turn's notices
// are never in it: they were advisories to the user, not conversation. No
// kept turns, no handoff: the zero Handoff.
func BuildHandoff(kept []state.Turn, budget int) Handoff {
	if budget <= 0 {
		budget = DefaultBudget
	}
	budget = min(budget, MaxBudget)
	var items []item
	n := 0
	for _, t := range kept {
		if IsSummary(&t) {
			items = append(items, item{order: len(items), text: renderSummary(t.Answer), summary: t.Answer})
			continue
		}
		n++
		if t.Origin != state.OriginAgent {
			items = append(items, item{turn: n, order: len(items), user: true, text: render(n, "user", t.PromptText, nil, nil, "")})
		}
		role := "assistant"
		if t.Agent != "" {
			// A session can move between agents; each answer says whose it was.
			role += " from agent " + t.Agent
		}
		if t.Origin == state.OriginAgent {
			// No user message led it: the agent began it itself.
			role += ", begun by the agent itself"
		}
		items = append(items, item{turn: n, order: len(items), text: render(n, role, t.Answer, t.ToolCalls, t.Asked, t.Status)})
	}
	if len(items) == 0 {
		return Handoff{}
	}
	priority := pickOrder(items)
	room := budget - len(handoffHeader) - len(handoffFooter) - len(fmt.Sprintf(omittedNote, len(items)))
	chosen := map[int]bool{}
	for _, i := range priority {
		if it := &items[i]; len(it.text) > room && it.summary != "" {
			// The summary is all that is left of the turns before the
			// compaction: rather cut than left out.
			if part := cutTo(strings.TrimSpace(it.summary), room-len(renderSummary(""))-len(summaryCut)); part != "" {
				it.text = renderSummary(part + summaryCut)
			}
		}
		if len(items[i].text) <= room {
			room -= len(items[i].text)
			chosen[i] = true
		}
	}
	var b strings.Builder
	b.WriteString(handoffHeader)
	omitted := len(items) - len(chosen)
	if omitted > 0 {
		fmt.Fprintf(&b, omittedNote, omitted)
	}
	for i := range items {
		if chosen[i] {
			b.WriteString(items[i].text)
		}
	}
	b.WriteString(handoffFooter)
	return Handoff{Text: b.String(), Kept: n, Items: len(chosen), Omitted: omitted}
}

// pickOrder ranks items: latest user, latest assistant, first user (or the
// summary that leads), then newest to oldest. A summary with no turn after
// it is the only item.
func pickOrder(items []item) []int {
	lastUser, lastAssistant := -1, len(items)-1
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].user {
			lastUser = i
			break
		}
	}
	first := []int{lastUser, lastAssistant, 0}
	seen := map[int]bool{}
	var out []int
	for _, i := range first {
		if i >= 0 && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	rest := make([]int, 0, len(items))
	for i := range items {
		if !seen[i] {
			rest = append(rest, i)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(rest)))
	return append(out, rest...)
}

// render is one tagged item. Tool calls are one line each, title and
// status, never their output; so is what the agent asked the user.
func render(turn int, role, text string, tools []state.ToolCall, asked []string, status state.TurnStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<turn %d %s>\n", turn, role)
	if text = strings.TrimSpace(text); text != "" {
		b.WriteString(text)
		b.WriteByte('\n')
	}
	for _, tc := range tools {
		fmt.Fprintf(&b, "[tool call] %s (%s)\n", oneLine(tc.Title), tc.Status)
	}
	for _, a := range asked {
		fmt.Fprintf(&b, "[asked the user] %s\n", oneLine(a))
	}
	switch status {
	case state.TurnInterrupted:
		b.WriteString("[this turn was interrupted before it finished]\n")
	case state.TurnFailed:
		b.WriteString("[this turn ended in an error]\n")
	}
	role = strings.FieldsFunc(role, func(r rune) bool { return r == ' ' || r == ',' })[0]
	fmt.Fprintf(&b, "</turn %d %s>\n", turn, role)
	return b.String()
}

// summaryCut ends a summary cut to fit the budget.
const summaryCut = " …[cut to fit]"

// cutTo is the longest prefix of s of at most n bytes that ends on a rune
// boundary; "" for n <= 0.
func cutTo(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// renderSummary is a compaction's summary as one item.
func renderSummary(text string) string {
	return summaryOpen + strings.TrimSpace(text) + "\n" + summaryClose
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

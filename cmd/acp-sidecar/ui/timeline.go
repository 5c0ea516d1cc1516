package ui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// The record says why each native session was put behind a session
// (Session.Natives), and the exact handoff each one got (the carrying
// turn's Handoff): nativesOf reads them. A record written before it kept
// them has only every native id the session had (NativeHistory) and which
// native session ran each turn, and inferNatives reads the why from what
// the rebuilds left behind (docs/ui.md, "The timeline"):
//   - a reset starts a new conversation: the record's ContextFrom is the
//     first turn after it, and the first prompt there carries no handoff;
//   - a rewind marks the turns it takes back rolled_back: the turn just
//     before the new native session's first one is rolled back;
//   - a switch moves the session to another agent: the turns name it;
//   - a fork is a session of its own whose record names its parent;
//   - anything else that replaced the native session is a restart: the
//     agent died or was killed (the turn it ran, if any, is interrupted),
//     the sidecar restarted, or another host of a fleet took the session.
// A native session replaced before it ran a turn is counted with the one
// that replaced it, as a restart.

// Events, also the CSS classes that colour them: the record's
// (state.Made*), and restart, which inferNatives gives a native session it
// cannot tell more of.
const (
	evNew     = state.MadeNew
	evFork    = state.MadeFork
	evReset   = state.MadeReset
	evRewind  = state.MadeRewind
	evRestart = "restart"
	evSwitch  = state.MadeSwitch
)

// native is one native session of a client session, as the timeline
// infers it.
type native struct {
	ID    string
	Event string // one of the ev* constants
	// Detail says what the event was, for a person.
	Detail string
	Agent  string // the configured agent name it ran on, "" unknown
	// Turns are the indexes of the turns it ran, in order.
	Turns []int
	// bound is the index of the first turn after the event that made it:
	// its first turn, or the next turn any native session runs.
	bound int
	// Handoff is the turn whose prompt carried the kept turns to it, 0
	// for none.
	Handoff int
	// recorded is the record's entry for it; nil when inferred.
	recorded *state.Native
}

// nativesOf lays out sess's native sessions, oldest first, each with the
// event that made it: as the record says, or, for a record written before
// it kept them, as inferNatives reads them.
func nativesOf(sess *state.Session, turns []state.Turn) []native {
	if !recorded(sess) {
		return inferNatives(sess, turns)
	}
	out := make([]native, len(sess.Natives))
	byIndex := map[int]*state.Turn{}
	for i, n := range sess.Natives {
		out[i] = native{ID: n.ID, Event: n.Event, recorded: &sess.Natives[i]}
		if n.Handoff != nil {
			out[i].Handoff = n.Handoff.Turn
		}
	}
	// A turn ran on the newest entry of its native id made before it
	// began: an agent's resume after a crash brings the same id back.
	last := 0
	for i := range turns {
		t := &turns[i]
		byIndex[t.Index] = t
		last = max(last, t.Index)
		p := -1
		for j := range out {
			if out[j].ID == t.NativeID && (p < 0 || !sess.Natives[j].At.After(t.Started)) {
				p = j
			}
		}
		if p >= 0 {
			out[p].Turns = append(out[p].Turns, t.Index)
			if out[p].Agent == "" {
				out[p].Agent = t.Agent
			}
		}
	}
	finish(out, sess, last)
	for i := range out {
		out[i].Detail = recordedDetail(sess, out, i, turns)
	}
	return out
}

// recorded says the record kept why each of sess's native sessions was
// made, from its first on.
func recorded(sess *state.Session) bool {
	return len(sess.Natives) > 0 && len(sess.NativeHistory) > 0 && sess.Natives[0].ID == sess.NativeHistory[0] &&
		(sess.Natives[0].Event == state.MadeNew || sess.Natives[0].Event == state.MadeFork)
}

// finish gives each of out, whose turns are placed, its bound and its
// agent; last is the newest turn's index.
func finish(out []native, sess *state.Session, last int) {
	// Each native session's bound, from the newest back: a native session
	// without turns ends where the next one's turns begin.
	next := last + 1
	for i := len(out) - 1; i >= 0; i-- {
		if len(out[i].Turns) > 0 {
			next = out[i].Turns[0]
		}
		out[i].bound = next
	}
	// One whose turns name no agent ran on the agent of the one before
	// it, and the newest on the session's own.
	if len(out) > 0 && out[len(out)-1].Agent == "" {
		out[len(out)-1].Agent = sess.AgentName // the one it is on now
	}
	for i := range out {
		if out[i].Agent == "" && i > 0 {
			out[i].Agent = out[i-1].Agent
		}
	}
}

// recordedDetail says, for a person, what made the i-th of ns, from the
// record's entry for it.
func recordedDetail(sess *state.Session, ns []native, i int, turns []state.Turn) string {
	n := ns[i].recorded
	by := func() string {
		switch n.Path {
		case "resume", "load":
			return "; the agent's session/" + n.Path + " brought it back"
		case "fork":
			return "; the agent forked it"
		}
		return "; a new session"
	}
	switch n.Event {
	case state.MadeNew:
		return "session/new"
	case state.MadeFork:
		if l := sess.Lineage; l != nil {
			return fmt.Sprintf("forked from %s at turn %d", l.ParentID, l.ForkTurn)
		}
		return "session/fork"
	case state.MadeOpen:
		return "the client's session/" + n.Path + ", answered by the agent"
	case state.MadeReset:
		return "reset: a new conversation on the same config"
	case state.MadeRewind:
		// The turns taken back are the rolled-back ones just before it.
		from, to := 0, 0
		for j := len(turns) - 1; j >= 0; j-- {
			t := &turns[j]
			if t.Started.After(n.At) {
				continue
			}
			if t.Status != state.TurnRolledBack {
				break
			}
			from = t.Index
			if to == 0 {
				to = t.Index
			}
		}
		what := "rewind"
		if from > 0 {
			what += ": " + turnSpan(from, to) + " taken back"
		}
		if n.Path == "fork" {
			return what + "; the agent forked its session at the last kept message"
		}
		return what + "; a new session, handed the kept turns"
	case state.MadeCrash:
		return "crash: the agent died" + by()
	case state.MadeReopen:
		return "reopened for the client, on a sidecar that did not have it live" + by()
	case state.MadeFailover:
		prev := ""
		for j := i - 1; j >= 0 && prev == ""; j-- {
			prev = ns[j].recorded.Host
		}
		return fmt.Sprintf("failover: from host %s to %s", orUnknown(prev), orUnknown(n.Host)) + by()
	case state.MadeAbsorbed:
		return "the agent failed the client's session/load or session/resume; the record answered it on a new session"
	case state.MadeSwitch:
		if i > 0 && ns[i-1].Agent != ns[i].Agent {
			return fmt.Sprintf("moved from agent %s to %s", ns[i-1].Agent, ns[i].Agent)
		}
		return "moved to agent " + ns[i].Agent
	}
	return n.Event + by()
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// inferNatives lays out sess's native sessions, oldest first, each with
// the event that made it, for a record that does not say.
func inferNatives(sess *state.Session, turns []state.Turn) []native {
	ids := slices.Clone(sess.NativeHistory)
	if sess.NativeID != "" && (len(ids) == 0 || ids[len(ids)-1] != sess.NativeID) {
		ids = append(ids, sess.NativeID)
	}
	out := make([]native, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	// A native id can come back (an agent restarted without its state
	// numbers its sessions again): each turn goes to the first place of its
	// id at or after the previous turn's, else to the last one before it.
	at := func(id string, from int) int {
		for p := from; p < len(ids); p++ {
			if ids[p] == id {
				return p
			}
		}
		for p := min(from, len(ids)) - 1; p >= 0; p-- {
			if ids[p] == id {
				return p
			}
		}
		return -1
	}
	byIndex := map[int]*state.Turn{}
	last, cur := 0, 0
	for i := range turns {
		t := &turns[i]
		byIndex[t.Index] = t
		last = max(last, t.Index)
		if p := at(t.NativeID, cur); p >= 0 {
			cur = p
			n := &out[p]
			n.Turns = append(n.Turns, t.Index)
			if n.Agent == "" {
				n.Agent = t.Agent
			}
			if t.HandoffDelivered && n.Handoff == 0 {
				n.Handoff = t.Index
			}
		}
	}
	finish(out, sess, last)
	// before is the turn just before index b, nil for none.
	before := func(b int) *state.Turn {
		for i := b - 1; i >= 1; i-- {
			if t := byIndex[i]; t != nil {
				return t
			}
		}
		return nil
	}
	for i := range out {
		n := &out[i]
		if i == 0 {
			n.Event, n.Detail = evNew, "session/new"
			if l := sess.Lineage; l != nil {
				n.Event, n.Detail = evFork, fmt.Sprintf("forked from %s at turn %d", l.ParentID, l.ForkTurn)
			}
			continue
		}
		prev := &out[i-1]
		prior := before(n.bound)
		switch {
		case prev.Agent != "" && n.Agent != "" && prev.Agent != n.Agent:
			n.Event, n.Detail = evSwitch, fmt.Sprintf("moved from agent %s to %s", prev.Agent, n.Agent)
		case len(prev.Turns) == 0 && prev.bound == n.bound:
			n.Event, n.Detail = evRestart, "rebuilt again before it ran a turn: the agent died or was restarted"
		case sess.ContextFrom == n.bound && sess.ContextFrom > 1,
			len(n.Turns) > 0 && !byIndex[n.Turns[0]].HandoffDelivered && prior != nil && prior.Status != state.TurnRolledBack:
			n.Event, n.Detail = evReset, "reset: a new conversation on the same config"
		case prior != nil && prior.Status == state.TurnRolledBack:
			from := prior.Index
			for t := before(from); t != nil && t.Status == state.TurnRolledBack; t = before(t.Index) {
				from = t.Index
			}
			n.Event, n.Detail = evRewind, "rewind: "+turnSpan(from, prior.Index)+" taken back"
		case prior != nil && prior.Status == state.TurnInterrupted:
			n.Event, n.Detail = evRestart, fmt.Sprintf("restart: the agent died during turn %d", prior.Index)
		default:
			n.Event, n.Detail = evRestart, "restart: the agent exited or was killed, or the sidecar or the host changed"
		}
	}
	return out
}

func turnSpan(a, b int) string {
	if a == b {
		return fmt.Sprintf("turn %d", a)
	}
	return fmt.Sprintf("turns %d–%d", a, b)
}

// contextAt is the first turn of the conversation that turn at belonged
// to: the newest reset at or before it.
func contextAt(sess *state.Session, ns []native, at int) int {
	cf := 0
	for _, n := range ns {
		if n.Event == evReset && n.bound <= at {
			cf = max(cf, n.bound)
		}
	}
	if sess.ContextFrom <= at {
		cf = max(cf, sess.ContextFrom)
	}
	return cf
}

// handoffAt is the handoff that turn at's prompt carried: the text the
// record kept with the turn, or, for a turn recorded before it kept it,
// the text built again from the record as the sidecar built it then: the
// conversation before the turn, from the reset before it on, and the
// compaction made before it. approx says why a text built again may differ
// from what was sent, "" when nothing does.
func handoffAt(sess *state.Session, turns []state.Turn, ns []native, at int, lookup replay.Lookup, budget int) (h replay.Handoff, approx string) {
	for i := range turns {
		if t := &turns[i]; t.Index == at && t.Handoff != "" {
			// The record kept what was sent: the text, and with the native
			// session that got it, what went into it.
			h.Text = t.Handoff
			for _, n := range ns {
				if r := n.recorded; r != nil && r.Handoff != nil && r.Handoff.Turn == at {
					h.Kept, h.Omitted = r.Handoff.Kept, r.Handoff.Omitted
				}
			}
			return h, ""
		}
	}
	s := *sess
	s.ContextFrom = contextAt(sess, ns, at)
	var carrier *state.Turn
	var prior []state.Turn
	for i := range turns {
		switch t := &turns[i]; {
		case t.Index < at:
			prior = append(prior, *t)
		case t.Index == at:
			carrier = t
		}
	}
	if c := s.Compaction; c != nil && (carrier == nil || !c.At.Before(carrier.Started)) {
		s.Compaction = nil
	}
	h = replay.BuildHandoff(replay.Kept(replay.Conversation(&s, prior, lookup)), budget)
	switch {
	case carrier != nil && carrier.Status == state.TurnRolledBack && slices.ContainsFunc(prior, func(t state.Turn) bool { return t.Status == state.TurnRolledBack }):
		approx = "a later rewind took this turn back, and the record cannot tell which earlier turns it took back with it"
	case sess.Handoff != nil && sess.Handoff.Turn == at && (sess.Handoff.Kept != h.Kept || sess.Handoff.Omitted != h.Omitted):
		approx = fmt.Sprintf("the sidecar noted %d turns kept and %d items left out; built here with a budget of %d bytes, it keeps %d and leaves out %d: the sidecar's --handoff-budget may differ (ui --budget)",
			sess.Handoff.Kept, sess.Handoff.Omitted, budgetOr(budget), h.Kept, h.Omitted)
	}
	return h, approx
}

func budgetOr(b int) int {
	if b <= 0 {
		return replay.DefaultBudget
	}
	return min(b, replay.MaxBudget)
}

// The drawing: one column per native session, oldest left; one lane per
// agent the session ran on, and a lane above for a fork's parent, whose
// native sessions up to the fork point come first. An arrow joins each
// native session to the next; a change of lane is a switch, the dashed
// arrow from the parent's lane the fork.

const (
	svgLeft    = 150 // room for the lane labels
	svgCol     = 130
	laneHeight = 84
	svgTop     = 34
	maxDrawn   = 60 // native sessions drawn; older ones are counted
	laneLabelW = 22 // runes of a lane label
)

type svgNode struct {
	X, Y                 int
	Class                string
	Label, Sub, Turns    string
	Title, Href          string
	Current              bool
	Radius               int
	LabelY, SubY, TurnsY int
}

type svgEdge struct {
	D     string
	Class string
}

type svgLane struct {
	Y     int
	Label string
}

type timelineView struct {
	Width, Height int
	Nodes         []svgNode
	Edges         []svgEdge
	Lanes         []svgLane
	// Omitted counts the older native sessions not drawn.
	Omitted int
}

// parentChain is a fork parent's native sessions up to the fork point, for
// the drawing.
type parentChain struct {
	ID      string
	URL     string
	Natives []native
}

func drawTimeline(ns []native, parent *parentChain) timelineView {
	var v timelineView
	drawn := ns
	if len(drawn) > maxDrawn {
		v.Omitted = len(drawn) - maxDrawn
		drawn = drawn[v.Omitted:]
	}
	lanes := map[string]int{}
	laneOf := func(key, label string) int {
		if l, ok := lanes[key]; ok {
			return l
		}
		l := len(v.Lanes)
		lanes[key] = l
		v.Lanes = append(v.Lanes, svgLane{Y: svgTop + l*laneHeight, Label: cut(label, laneLabelW)})
		return l
	}
	col := 0
	node := func(lane int, n *native, href, title string, cur bool) svgNode {
		x, y := svgLeft+col*svgCol, svgTop+lane*laneHeight
		col++
		sub, turns := shortID(n.ID), "no turn"
		if len(n.Turns) > 0 {
			turns = turnSpan(n.Turns[0], n.Turns[len(n.Turns)-1])
		}
		r := 9
		if cur {
			r = 12
		}
		return svgNode{X: x, Y: y, Class: "ev-" + n.Event, Label: n.Event, Sub: sub, Turns: turns, Title: title, Href: href, Current: cur, Radius: r, LabelY: y - 16, SubY: y + 26, TurnsY: y + 39}
	}
	edge := func(a, b svgNode, class string) {
		if a.Y == b.Y {
			v.Edges = append(v.Edges, svgEdge{D: fmt.Sprintf("M%d %d L%d %d", a.X+a.Radius, a.Y, b.X-b.Radius-3, b.Y), Class: class})
			return
		}
		mid := (a.X + b.X) / 2
		v.Edges = append(v.Edges, svgEdge{D: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", a.X+a.Radius, a.Y, mid, a.Y, mid, b.Y, b.X-b.Radius-3, b.Y), Class: class})
	}
	var forkFrom *svgNode
	if parent != nil && len(parent.Natives) > 0 {
		lane := laneOf("parent", "parent "+parent.ID)
		pn := parent.Natives
		if len(pn) > maxDrawn/4 {
			pn = pn[len(pn)-maxDrawn/4:]
		}
		var prev *svgNode
		for i := range pn {
			n := node(lane, &pn[i], parent.URL, "parent's native session "+pn[i].ID+": "+pn[i].Detail, false)
			n.Class += " parent"
			v.Nodes = append(v.Nodes, n)
			if prev != nil {
				edge(*prev, n, "edge")
			}
			prev = &v.Nodes[len(v.Nodes)-1]
		}
		forkFrom = prev
	}
	var prev *svgNode
	for i := range drawn {
		n := &drawn[i]
		agent := n.Agent
		if agent == "" {
			agent = "this session"
		}
		lane := laneOf("agent:"+n.Agent, agent)
		sn := node(lane, n, fmt.Sprintf("#native-%d", v.Omitted+i+1), n.ID+": "+n.Detail, i == len(drawn)-1)
		v.Nodes = append(v.Nodes, sn)
		switch {
		case prev != nil:
			class := "edge"
			if n.Event == evSwitch {
				class = "edge switch"
			}
			edge(*prev, sn, class)
		case forkFrom != nil:
			edge(*forkFrom, sn, "edge forked")
		}
		prev = &v.Nodes[len(v.Nodes)-1]
	}
	v.Width = svgLeft + max(col, 1)*svgCol
	v.Height = svgTop + max(len(v.Lanes), 1)*laneHeight - 28
	return v
}

// shortID keeps a native id readable in the drawing.
func shortID(id string) string {
	if id == "" {
		return "(none)"
	}
	return cut(id, 18)
}

// cut shortens s to n runes with an ellipsis.
func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/cmd/acp-sidecar/internal/sessionview"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// What the pages show, gathered from the record. The listing reads only
// the store's listing (one row a session, never a session's record), then
// the first prompt of the few rows on the page that have no title; a
// session's page reads that session (and a fork's parent).

// Page sizes: a page stays well under 200 KB however big the record is.
const (
	listPageSize = 50
	turnPageSize = 100
	// inlineHandoffs bounds the handoff text shown on a session's page;
	// older handoffs past it are a link to a page of their own.
	inlineHandoffs = 40 << 10
	// textCut is how much of a prompt or answer a turn's row shows; the
	// turn's own page has all of it.
	textCut = 240
)

// Session states, also the filter's values.
const (
	stLive   = "live"
	stIdle   = "idle"
	stClosed = "closed"
)

func stateOf(s state.Summary) string {
	switch {
	case s.Closed:
		return stClosed
	case s.Live:
		return stLive
	}
	return stIdle
}

// listQuery is the listing's filter and page, from the URL.
type listQuery struct {
	Cwd, Agent, State string
	Page              int // from 1
}

func parseListQuery(q url.Values) listQuery {
	lq := listQuery{Cwd: q.Get("cwd"), Agent: q.Get("agent"), State: q.Get("state")}
	if !slices.Contains([]string{stLive, stIdle, stClosed}, lq.State) {
		lq.State = ""
	}
	lq.Page, _ = strconv.Atoi(q.Get("page"))
	lq.Page = max(lq.Page, 1)
	return lq
}

// values is the query again, for links; page 1 is left out.
func (lq listQuery) values(page int) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"cwd": lq.Cwd, "agent": lq.Agent, "state": lq.State} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

func (lq listQuery) url(path string, page int) string {
	if q := lq.values(page).Encode(); q != "" {
		return path + "?" + q
	}
	return path
}

// listPage is the sessions page.
type listPage struct {
	Q                 listQuery
	Rows              []listRow
	Total, Matched    int
	From, To          int
	Page, Pages       int
	PrevURL, NextURL  string
	Fleet             bool
	Deleted           string
	Place             string
	Following, NoFeed bool
	EventsURL         string
}

type listRow struct {
	ID, URL      string
	Title        string
	FromPrompt   bool // Title is the first prompt's first line
	State        string
	Holder       string
	Agent        string
	Cwd          string
	Turns        int
	LastActivity time.Time
}

// listData is the listing for lq; deleted is the session the page just
// deleted, to say so.
func (s *Server) listData(ctx context.Context, lq listQuery, deleted string) (*listPage, error) {
	gen, following := s.hub.current() // before the reads: a change after it is news to the page
	list, err := s.summaries(ctx)
	if err != nil {
		return nil, err
	}
	p := &listPage{Q: lq, Total: len(list), Fleet: s.opts.Fleet, Place: s.opts.Place, Following: following}
	ev := lq.values(lq.Page)
	ev.Set("gen", strconv.FormatUint(gen, 10))
	if deleted != "" {
		ev.Set("deleted", deleted)
	}
	p.EventsURL, p.Deleted = "/events?"+ev.Encode(), deleted
	_, hasFeed := s.store.(Feed)
	p.NoFeed = !hasFeed
	cwd, agent := strings.ToLower(lq.Cwd), strings.ToLower(lq.Agent)
	var match []state.Summary
	for _, sum := range list {
		if lq.State != "" && stateOf(sum) != lq.State {
			continue
		}
		if cwd != "" && !strings.Contains(strings.ToLower(sum.Cwd), cwd) {
			continue
		}
		if agent != "" && !strings.Contains(strings.ToLower(agentLabel(sum.AgentName, sum.Agent)), agent) {
			continue
		}
		match = append(match, sum)
	}
	p.Matched = len(match)
	p.Pages = max(1, (len(match)+listPageSize-1)/listPageSize)
	p.Page = min(lq.Page, p.Pages)
	from := (p.Page - 1) * listPageSize
	to := min(from+listPageSize, len(match))
	if from < to {
		p.From, p.To = from+1, to
	}
	for _, sum := range match[from:to] {
		r := listRow{
			ID: sum.ID, URL: sessionURL(sum.ID), Title: sum.Title, State: stateOf(sum), Holder: sum.Holder,
			Agent: agentLabel(sum.AgentName, sum.Agent), Cwd: sum.Cwd, Turns: sum.Turns, LastActivity: sum.LastActivity,
		}
		if r.Title == "" {
			r.Title = s.promptTitle(ctx, sum.ID)
			r.FromPrompt = r.Title != ""
		}
		p.Rows = append(p.Rows, r)
	}
	if p.Page > 1 {
		p.PrevURL = lq.url("/", p.Page-1)
	}
	if p.Page < p.Pages {
		p.NextURL = lq.url("/", p.Page+1)
	}
	return p, nil
}

// summaries is the store's listing, read again only after a change: while
// the feed is followed, a listing read at a generation holds until the
// next change.
func (s *Server) summaries(ctx context.Context) ([]state.Summary, error) {
	gen, following := s.hub.current()
	s.mu.Lock()
	c := s.listing
	s.mu.Unlock()
	if following && c != nil && c.gen == gen {
		return c.list, nil
	}
	list, err := s.store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	s.mu.Lock()
	s.listing = &cachedListing{gen: gen, list: list}
	s.mu.Unlock()
	return list, nil
}

// promptTitle is the first line of a session's first prompt, for a row
// without a title. It is kept until the session changes.
func (s *Server) promptTitle(ctx context.Context, id string) string {
	s.mu.Lock()
	t, ok := s.titles[id]
	s.mu.Unlock()
	if ok {
		return t
	}
	turns, err := s.store.Turns(ctx, id)
	if err != nil || len(turns) == 0 {
		return ""
	}
	t = firstLine(turns[0].PromptText)
	s.mu.Lock()
	s.titles[id] = t
	s.mu.Unlock()
	return t
}

// forget drops what the server keeps of a session that changed ("": of
// every session): nothing of a deleted session stays in its memory.
func (s *Server) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		clear(s.titles)
	} else {
		delete(s.titles, id)
	}
}

// sessionPage is one session's page.
type sessionPage struct {
	ID, URL       string
	Title         string
	FromPrompt    bool
	State, Holder string
	Agent         string
	Protocol      int // the ACP version the session was last recorded in
	Cwd           string
	Dirs          []string
	Created       time.Time
	Updated       time.Time
	Native        string
	Lineage       *lineageView
	Blocked       *state.Blocked
	SetErrors     []state.SetError
	Compaction    *state.Compaction
	Config        configView
	Timeline      timelineView
	Natives       []nativeView
	OlderNatives  int          // not listed: older than the listed ones
	Armed         *handoffView // the handoff the next prompt carries
	Turns         turnsView
	CSRF          string
	EventsURL     string
	Following     bool
	NoFeed        bool
}

type lineageView struct {
	ParentID, ParentURL string
	ForkTurn            int
	ParentGone          bool
}

type configView struct {
	Rows        []configRowView
	Overrides   []overrideView
	NoOriginal  bool
	ShowRestore bool
	Empty       bool
}

type configRowView struct {
	ID, Category string
	Legacy       bool
	Cells        [3]cellView // baseline, original, live
	Override     string      // the latest override's value; "" none
	Overrides    int
	Restore      string // restored, refused, not offered; "" where no restore ran
	RestoreWhy   string
}

type cellView struct {
	Text    string
	Missing bool
	Changed bool // differs from the baseline
}

type overrideView struct {
	N        int
	OptionID string
	Value    string
	At       time.Time
}

type nativeView struct {
	N       int
	Anchor  string
	ID      string
	Event   string
	Detail  string
	Agent   string
	Turns   string
	Current bool
	Handoff *handoffView
}

type handoffView struct {
	Turn                 int
	Text                 string // "" when linked instead
	Link                 string
	Bytes, Kept, Omitted int
	Approx               string
}

type turnsView struct {
	Rows             []turnRow
	Total            int
	Page, Pages      int
	PrevURL, NextURL string
	From, To         int
}

type turnRow struct {
	Index      int
	URL        string
	Status     string
	StopReason string
	Native     string
	NativeN    int
	Agent      string
	Prompt     string
	Answer     string
	Tools      []string
	MoreTools  int
	Notices    int
	Handoff    bool
	Started    time.Time
}

func (s *Server) sessionData(ctx context.Context, id string, turnPage int) (*sessionPage, error) {
	gen := s.hub.genOf(id) // before the reads: a change after it is news to the page
	_, following := s.hub.current()
	sess, turns, err := sessionview.Read(ctx, s.store, id)
	if err != nil {
		return nil, err
	}
	list, err := s.summaries(ctx)
	if err != nil {
		return nil, err
	}
	var sum state.Summary
	if i := slices.IndexFunc(list, func(x state.Summary) bool { return x.ID == id }); i >= 0 {
		sum = list[i]
	} else {
		sum.Closed = sess.Closed != nil
	}
	sessionview.Settle(turns, sum.Live)

	p := &sessionPage{
		ID: id, URL: sessionURL(id), Title: sess.Title, State: stateOf(sum), Holder: sum.Holder,
		Agent: sessionview.NamedAgent(sess.AgentName, strings.Join(sess.Agent, " ")), Cwd: sess.Cwd,
		Protocol: sess.ProtocolVersion(), Dirs: sess.AdditionalDirectories, Created: sess.Created, Updated: sess.Updated, Native: sess.NativeID,
		Blocked: sess.Blocked, SetErrors: sess.SetErrors, Compaction: sess.Compaction,
		CSRF: s.csrf, Following: following,
		EventsURL: "/session/events?" + url.Values{"id": {id}, "tp": {strconv.Itoa(turnPage)}, "gen": {strconv.FormatUint(gen, 10)}}.Encode(),
	}
	_, hasFeed := s.store.(Feed)
	p.NoFeed = !hasFeed
	if p.Title == "" && len(turns) > 0 {
		p.Title, p.FromPrompt = firstLine(turns[0].PromptText), true
	}
	p.Config = configOf(sess)

	lookup := sessionview.Lookup(ctx, s.store)
	ns := nativesOf(sess, turns)
	var parent *parentChain
	if l := sess.Lineage; l != nil {
		p.Lineage = &lineageView{ParentID: l.ParentID, ParentURL: sessionURL(l.ParentID), ForkTurn: l.ForkTurn}
		if ps, pt, err := sessionview.Read(ctx, s.store, l.ParentID); err == nil {
			parent = &parentChain{ID: l.ParentID, URL: sessionURL(l.ParentID), Natives: upToFork(ps, pt, l.ForkTurn)}
		} else {
			p.Lineage.ParentGone = true
		}
	}
	p.Timeline = drawTimeline(ns, parent)

	position := map[int]int{} // turn index → native session, from 1
	for i, n := range ns {
		for _, t := range n.Turns {
			position[t] = i + 1
		}
	}
	// The newest native sessions are listed, as many as are drawn: a
	// session rebuilt a thousand times keeps a page of the usual size.
	p.OlderNatives = max(0, len(ns)-maxDrawn)
	inline := 0
	p.Natives = make([]nativeView, len(ns)-p.OlderNatives)
	for i := len(ns) - 1; i >= p.OlderNatives; i-- { // newest first gets the inline room
		n := ns[i]
		v := nativeView{N: i + 1, Anchor: fmt.Sprintf("native-%d", i+1), ID: n.ID, Event: n.Event, Detail: n.Detail, Agent: n.Agent, Current: i == len(ns)-1}
		if len(n.Turns) > 0 {
			v.Turns = turnSpan(n.Turns[0], n.Turns[len(n.Turns)-1])
		}
		if n.Handoff > 0 {
			h, approx := handoffAt(sess, turns, ns, n.Handoff, lookup, s.opts.Budget)
			hv := &handoffView{Turn: n.Handoff, Bytes: len(h.Text), Kept: h.Kept, Omitted: h.Omitted, Approx: approx}
			if inline+len(h.Text) <= inlineHandoffs {
				hv.Text, inline = h.Text, inline+len(h.Text)
			} else {
				hv.Link = "/session/handoff?" + url.Values{"id": {id}, "native": {strconv.Itoa(i + 1)}}.Encode()
			}
			v.Handoff = hv
		}
		p.Natives[i-p.OlderNatives] = v
	}
	if sess.HandoffPending {
		h := handoffNow(sess, turns, lookup, s.opts.Budget)
		if h.Text != "" {
			p.Armed = &handoffView{Text: h.Text, Bytes: len(h.Text), Kept: h.Kept, Omitted: h.Omitted}
		}
	}
	p.Turns = turnsOf(id, turns, position, turnPage)
	return p, nil
}

// upToFork is a parent's native sessions up to the one that ran the turn
// a fork was taken at.
func upToFork(ps *state.Session, pt []state.Turn, forkTurn int) []native {
	ns := nativesOf(ps, pt)
	vis := replay.Visible(ps, pt)
	if forkTurn < 1 || forkTurn > len(vis) {
		return ns
	}
	at := vis[forkTurn-1].NativeID
	for i, n := range ns {
		if n.ID == at {
			return ns[:i+1]
		}
	}
	return ns
}

// configOf lines the layers up, marks what differs from the baseline and
// says how the last restore went for each field.
func configOf(sess *state.Session) configView {
	v := configView{NoOriginal: sess.Original == nil}
	rows := sessionview.ConfigRows(sess)
	v.Empty = len(rows) == 0
	why := blockedReasons(sess.Blocked)
	v.ShowRestore = len(sess.NativeHistory) > 1 || sess.Blocked != nil
	for _, r := range rows {
		rv := configRowView{ID: r.ID, Category: r.Category, Legacy: r.Legacy}
		for i := range r.Values {
			c := cellView{Missing: !r.Has[i]}
			if r.Has[i] {
				c.Text = valueText(r.Values[i], r.Legacy)
			}
			if i > sessionview.Baseline && sess.Baseline != nil {
				c.Changed = r.Has[i] != r.Has[sessionview.Baseline] || !sameJSON(r.Values[i], r.Values[sessionview.Baseline])
			}
			rv.Cells[i] = c
		}
		for _, o := range sess.Overrides {
			if o.OptionID == r.ID && (!r.Legacy || o.Category == r.Category) {
				rv.Override, rv.Overrides = valueText(o.Value, false), rv.Overrides+1
			}
		}
		field := r.ID
		if r.Category == "model" || r.Category == "mode" {
			field = r.Category
		}
		if v.ShowRestore && r.Has[sessionview.Live] {
			rv.Restore = "restored"
			if reason, blocked := why[field]; blocked {
				rv.Restore, rv.RestoreWhy = "refused", reason
				if strings.Contains(reason, "offer") || strings.Contains(reason, "has no") {
					rv.Restore = "not offered"
				}
			}
		}
		v.Rows = append(v.Rows, rv)
	}
	for i, o := range sess.Overrides {
		v.Overrides = append(v.Overrides, overrideView{N: i + 1, OptionID: o.OptionID, Value: valueText(o.Value, false), At: o.At})
	}
	return v
}

// blockedReasons reads a failed restore's reason per field. The reason is
// replay.RestoreError's text, "cannot restore F=V: WHY; G=W: WHY"; a field
// whose part cannot be found gets the whole reason.
func blockedReasons(b *state.Blocked) map[string]string {
	out := map[string]string{}
	if b == nil {
		return out
	}
	rest := strings.TrimPrefix(b.Reason, "cannot restore ")
	for i, f := range b.Fields {
		out[f] = b.Reason
		at := strings.Index(rest, f+"=")
		if at < 0 {
			continue
		}
		part := rest[at+len(f)+1:]
		next := len(part)
		if i+1 < len(b.Fields) {
			if end := strings.Index(part, "; "+b.Fields[i+1]+"="); end >= 0 {
				next = end
			}
		}
		if _, why, ok := strings.Cut(part[:next], ": "); ok {
			out[f] = why
		}
		rest = part[next:]
	}
	return out
}

// turnsOf is one page of the turns, the newest page unless asked.
func turnsOf(id string, turns []state.Turn, position map[int]int, page int) turnsView {
	v := turnsView{Total: len(turns)}
	v.Pages = max(1, (len(turns)+turnPageSize-1)/turnPageSize)
	if page < 1 || page > v.Pages {
		page = v.Pages
	}
	v.Page = page
	from := (page - 1) * turnPageSize
	to := min(from+turnPageSize, len(turns))
	if from < to {
		v.From, v.To = from+1, to
	}
	link := func(p int) string {
		return "/session?" + url.Values{"id": {id}, "tp": {strconv.Itoa(p)}}.Encode() + "#turns"
	}
	if page > 1 {
		v.PrevURL = link(page - 1)
	}
	if page < v.Pages {
		v.NextURL = link(page + 1)
	}
	for _, t := range turns[from:to] {
		r := turnRow{
			Index: t.Index, URL: "/session/turn?" + url.Values{"id": {id}, "n": {strconv.Itoa(t.Index)}}.Encode(),
			Status: string(t.Status), StopReason: t.StopReason, Native: t.NativeID, NativeN: position[t.Index],
			Agent: t.Agent, Prompt: cut(t.PromptText, textCut), Answer: cut(firstLine(t.Answer), textCut),
			Notices: len(t.Notices), Handoff: t.HandoffDelivered, Started: t.Started,
		}
		for i, tc := range t.ToolCalls {
			if i == 5 {
				r.MoreTools = len(t.ToolCalls) - i
				break
			}
			title := cut(tc.Title, 80)
			if tc.Status != "" {
				title += " (" + tc.Status + ")"
			}
			r.Tools = append(r.Tools, title)
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

func sessionURL(id string) string { return "/session?" + url.Values{"id": {id}}.Encode() }

func agentLabel(name string, argv []string) string {
	return sessionview.NamedAgent(name, sessionview.ShortAgent(argv))
}

// valueText shows a raw JSON value for a person: a string without its
// quotes, anything else as compact JSON. The template escapes it.
func valueText(v json.RawMessage, legacy bool) string {
	if len(v) == 0 {
		return "(no value)"
	}
	var s string
	if json.Unmarshal(v, &s) == nil && string(bytes.TrimSpace(v)) != "null" {
		if s == "" && !legacy {
			return `""`
		}
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, v) == nil {
		return b.String()
	}
	return string(v)
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// handoffNow is the handoff a fresh native session would get now: what
// `acp-sidecar handoff` prints.
func handoffNow(sess *state.Session, turns []state.Turn, lookup replay.Lookup, budget int) replay.Handoff {
	return replay.BuildHandoff(replay.Kept(replay.Conversation(sess, turns, lookup)), budget)
}

// turnPage is one turn in full.
type turnPage struct {
	ID, URL, Title string
	Turn           state.Turn
	Native         string
	NativeN        int
	Tools          []state.ToolCall
}

func (s *Server) turnData(ctx context.Context, id string, n int) (*turnPage, error) {
	sess, turns, err := sessionview.Read(ctx, s.store, id)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(turns, func(t state.Turn) bool { return t.Index == n })
	if i < 0 {
		return nil, fmt.Errorf("session %s has no turn %d: %w", id, n, state.ErrNotFound)
	}
	list, err := s.summaries(ctx)
	if err != nil {
		return nil, err
	}
	sessionview.Settle(turns, slices.ContainsFunc(list, func(x state.Summary) bool { return x.ID == id && x.Live }))
	t := turns[i]
	p := &turnPage{ID: id, URL: sessionURL(id), Title: sess.Title, Turn: t, Native: t.NativeID, Tools: t.ToolCalls}
	for j, ns := range nativesOf(sess, turns) {
		if slices.Contains(ns.Turns, n) {
			p.NativeN = j + 1
		}
	}
	return p, nil
}

// handoffPage is one native session's handoff on a page of its own.
type handoffPage struct {
	ID, URL string
	N       int
	Native  string
	Handoff handoffView
}

func (s *Server) handoffData(ctx context.Context, id string, n int) (*handoffPage, error) {
	sess, turns, err := sessionview.Read(ctx, s.store, id)
	if err != nil {
		return nil, err
	}
	ns := nativesOf(sess, turns)
	if n < 1 || n > len(ns) || ns[n-1].Handoff == 0 {
		return nil, fmt.Errorf("session %s has no handoff to native session %d: %w", id, n, state.ErrNotFound)
	}
	h, approx := handoffAt(sess, turns, ns, ns[n-1].Handoff, sessionview.Lookup(ctx, s.store), s.opts.Budget)
	return &handoffPage{ID: id, URL: sessionURL(id), N: n, Native: ns[n-1].ID,
		Handoff: handoffView{Turn: ns[n-1].Handoff, Text: h.Text, Bytes: len(h.Text), Kept: h.Kept, Omitted: h.Omitted, Approx: approx}}, nil
}

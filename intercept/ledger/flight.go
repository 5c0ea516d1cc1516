package ledger

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// State is where a client request stands.
type State int

const (
	// Taken: a stage took it, and it has not reached the agent yet.
	Taken State = iota
	// Sent: written to the agent, which owes its answer.
	Sent
)

// A Request is a client request in flight.
type Request struct {
	Method  string
	Session string // its params.sessionId, "" for none
	State   State
	// Recorded: the record waits for its response to write what it did.
	Recorded bool
	// Began: a v2 prompt whose turn the agent reported running before it
	// accepted the prompt (its answer then starts no turn: TurnAccepted).
	Began bool
	// Probe is the prompt as the client sent it, when it is the first on
	// a native session the agent resumed (Flight.Resumed): an agent that
	// accepted the resume and cannot serve it fails this prompt, which is
	// then sent again to the rebuilt session (the lifeline's).
	Probe []byte
}

// Hush is what of a native session's updates the client does not see while
// one of the sidecar's own calls runs on it. What each kind keeps back is
// the lifeline's to decide; the ledger only keeps which. Kinds combine:
// a restore's HushConfig may run inside a rebuild's HushRebuild, and what
// a native session's updates meet is every kind held on it (HushOf).
type Hush int

const (
	// HushAll: a load's replay, which the client has; only what the
	// client lacks (the command list, the title) goes on.
	HushAll Hush = 1 << iota
	// HushRebuild: what the agent says in answer to the sidecar's own
	// resume, load or new (a replay, a turn's state, its notes on the
	// resume): none of it is news of the client's turn.
	HushRebuild
	// HushConfig: config reports, while a restore under a held response
	// reports its end itself.
	HushConfig
)

// A Session is one client session's flight state.
type Session struct {
	Native string // the native session behind the client id ("" before any)
	Busy   string // what rebuild runs on it, "" for none
	// Announced counts the operations taken for the session that may
	// rebuild it and have not ended (a slash command deferred, say): the
	// session counts as busy from when the operation is taken, not only
	// from when its rebuild begins, so no request taken after it goes on
	// before it (Flight.Announce).
	Announced int
	Stale     bool           // its native session died with the agent: rebuild before its next request
	Blocked   *state.Blocked // its restore failed: prompts are refused
	// Owed is the config a failed or interrupted restore still owes: a
	// retry aims at it, not at the partial config the agent reported.
	Owed *state.Config
	// Armed is the handoff the next prompt carries; Carried the one the
	// prompt in flight carries, until the record has noted it.
	Armed, Carried *replay.Handoff
	// Unsent: a prompt of this session never reached the agent that died,
	// so its turn is taken back, not interrupted.
	Unsent bool
	// Turn: an ACP v2 turn runs. v2 answers a prompt as soon as it is
	// accepted, and the turn ends with a state_update (idle) later, so the
	// prompt's request no longer spans the turn: this does.
	Turn bool
	// KeepTitle: the session has a title of its own, and TitleNative, the
	// native session behind it, is one a rebuild had the agent make
	// (state.Session.MadeByRebuild): the title the agent gives it is that
	// native session's, not the session's (AgentTitled). AutoTitle is that
	// title, once the agent gave it.
	KeepTitle              bool
	TitleNative, AutoTitle string
	// Unproven is a native session the agent resumed and no prompt has
	// reached since: codex-acp 2.6.0 accepts a resume of a thread it
	// cannot run, and fails the first prompt. Lied is a native session
	// whose resume the agent accepted and then could not serve: no rebuild
	// resumes it again.
	Unproven, Lied string
}

// Flight is everything in flight. It is reached only inside Update (to
// change it) or a read of the Ledger's, and changed only through its
// methods, which keep its counters true.
type Flight struct {
	requests map[string]*Request // client request id token -> request
	// answered are the ids of the last requests answered, oldest first in
	// answeredRing: an agent's answer to one of them is a second answer.
	answered     map[string]bool
	answeredRing []string
	sessions     map[string]*Session // client id -> flight state
	clients      map[string]string   // native id (current and past) -> client id
	// agentAsks are the agent's requests the client owes an answer;
	// staleAsks those of an agent that died, whose late answers nobody wants.
	agentAsks, staleAsks map[string]bool
	commands             map[string]bool // native ids the agent sent a command list for since they were opened
	// agentCommands is the agent's own command list, as it last gave it,
	// by native id, in v2 (AgentCommands).
	agentCommands map[string][]json.RawMessage
	hushes        map[string][]Hush // native id -> the kinds of its updates kept back, one per holder
	closed        map[string]bool   // client ids closed and not reopened since
	waiters       []*Waiter         // held client requests, in arrival order
	last          <-chan struct{}   // the done of the newest waiter
	created       chan struct{}     // closed when the creations in flight end

	life uint64 // the agent's life the ledger last heard of (AgentGone)
	// dead is what the agent's death took out and nobody has answered yet:
	// set when its output ends (AgentEnded), taken when its exit is known
	// (TakeGone).
	dead      *Gone
	mapped    bool
	staleN    int
	creatingN int
	busyN     int
	runningN  int
	unprovenN int // sessions with an Unproven native
	woke      bool
}

// session is sid's flight state, made on first use.
func (f *Flight) session(sid string) *Session {
	s := f.sessions[sid]
	if s == nil {
		s = &Session{}
		f.sessions[sid] = s
	}
	return s
}

// Note takes a client request into the ledger, or returns the one already
// there under id. Each stage that needs it sets what it owes on the result.
func (f *Flight) Note(id, method, sid string) *Request {
	q := f.requests[id]
	if q == nil {
		q = &Request{Method: method, Session: sid}
		f.requests[id] = q
		delete(f.answered, id) // the client uses the id again
	}
	if q.Session == "" {
		q.Session = sid
	}
	return q
}

// Record marks a request as one whose response the record waits for.
func (f *Flight) Record(id, method, sid string) {
	q := f.Note(id, method, sid)
	if !q.Recorded && method == promptMethod {
		f.runningN++
	}
	q.Recorded = true
}

// promptMethod is the one method whose requests are counted while in
// flight: chunks are read only while some prompt runs.
const promptMethod = "session/prompt"

// Respond is the one gate of every answer to a client request, whoever
// gives it: the agent, a stage, a rebuild, the agent's death, the relay's
// stop. The first answer to id takes the request out of the ledger and
// returns it, with first true; an answer to an id answered already, and
// not taken again since (Note), finds first false, and its sender must
// drop it: a second answer is a bug of whoever sent it. An id the ledger
// never noted is a first answer, and returns the zero Request.
func (f *Flight) Respond(id string) (q Request, first bool) {
	r := f.requests[id]
	if r == nil {
		if f.answered[id] {
			return Request{}, false
		}
		f.remember(id)
		return Request{}, true
	}
	f.take(id, r)
	f.remember(id)
	return *r, true
}

// take takes request r under id out of the ledger, keeping the counters
// true.
func (f *Flight) take(id string, r *Request) {
	delete(f.requests, id)
	if r.Recorded && r.Method == promptMethod {
		f.runningN--
	}
}

// keepAnswered bounds how many answered ids the ledger remembers. A second
// answer comes right after the first in every agent seen to send one, so
// the last thousand ids are plenty.
const keepAnswered = 1024

// remember notes id as answered, forgetting the oldest past keepAnswered.
func (f *Flight) remember(id string) {
	if f.answered[id] {
		return
	}
	if len(f.answeredRing) >= keepAnswered {
		delete(f.answered, f.answeredRing[0])
		f.answeredRing = f.answeredRing[1:]
	}
	f.answered[id] = true
	f.answeredRing = append(f.answeredRing, id)
}

// Unsent takes back a request whose write to the agent failed: it is not in
// flight, and waits for the next agent. A prompt's session notes it, so the
// death does not record a turn that never began.
func (f *Flight) Unsent(id, sid string, prompt bool) {
	// Not answered: it waits, and its answer is still its first.
	if r := f.requests[id]; r != nil {
		f.take(id, r)
	}
	if prompt && sid != "" {
		f.session(sid).Unsent = true
	}
}

// TurnTakenBack clears the unsent mark once the record has taken back the
// turn of the prompt that never reached the agent.
func (f *Flight) TurnTakenBack(sid string) {
	if s := f.sessions[sid]; s != nil {
		s.Unsent = false
	}
}

// AgentAsked notes a request of the agent's to the client. An agent that
// came back reuses its predecessor's ids; this one's answer is wanted.
func (f *Flight) AgentAsked(id string) {
	f.agentAsks[id] = true
	delete(f.staleAsks, id)
}

// ClientAnswered notes the client's answer to an agent's request, and says
// whether nobody wants it any more: the agent that asked has died.
func (f *Flight) ClientAnswered(id string) (stale bool) {
	if f.staleAsks[id] {
		delete(f.staleAsks, id)
		return true
	}
	delete(f.agentAsks, id)
	return false
}

// A Gone is what an agent's death left in flight, for the caller to answer.
type Gone struct {
	// Sent are the client requests the dead agent had received, by id in
	// order; each gets an error, as it may have started work that must not
	// run twice.
	Sent []GoneRequest
	// Turns are the client sessions whose v2 turn was running, sorted: the
	// client waits for their end, which the dead agent will never send.
	Turns []string
}

// TurnAccepted notes that the agent accepted v2 prompt q of client session
// sid: its turn runs, and the record reads its chunks, until TurnIdle. A
// prompt whose turn was reported running before (Began) starts nothing:
// that turn may have ended already, its idle ahead of the acceptance.
func (f *Flight) TurnAccepted(sid string, q Request) {
	if q.Began {
		return
	}
	if s := f.session(sid); !s.Turn {
		s.Turn = true
		f.runningN++
	}
}

// How a v2 turn began (TurnBegan).
type Began int

const (
	// BeganBefore: a turn already ran; the report changes nothing.
	BeganBefore Began = iota
	// BeganPrompt: the turn of a prompt the agent has not accepted yet.
	BeganPrompt
	// BeganAgent: a turn the agent began itself, with no prompt in flight.
	BeganAgent
)

// TurnBegan notes the agent's report that foreground work runs on client
// session sid (state_update running, or requires_action), and says how
// that turn began. Most reports follow the prompt's acceptance and change
// nothing; one that comes before it begins the turn of the prompt in
// flight, whose acceptance then starts nothing (Request.Began); one with
// no prompt in flight begins a turn of the agent's own (ACP v2: "It can
// start with a prompt or be agent-initiated").
func (f *Flight) TurnBegan(sid string) Began {
	s := f.session(sid)
	if s.Turn {
		return BeganBefore
	}
	s.Turn = true
	f.runningN++
	if q := f.promptOf(sid); q != nil {
		q.Began = true
		return BeganPrompt
	}
	return BeganAgent
}

// promptOf is a prompt of client session sid that the record waits for
// and whose turn has not begun, nil for none.
func (f *Flight) promptOf(sid string) *Request {
	for _, q := range f.requests {
		if q.Method == promptMethod && q.Recorded && q.Session == sid && !q.Began {
			return q
		}
	}
	return nil
}

// A TurnState is where a client session stands between its turns, as a
// chunk of its agent finds it (Ledger.TurnStateOf).
type TurnState int

const (
	// Between: no turn runs and nothing opens the session: the agent's
	// output is the background work of the turn before.
	Between TurnState = iota
	// Running: a turn runs (a v1 prompt in flight, a v2 turn).
	Running
	// Opening: a load or resume of the session is in flight, whose
	// replay is the history, not a turn's.
	Opening
)

// TurnIdle ends the v2 turn of client session sid, and says whether one
// ran: an idle state the agent reports at other times (after a resume, or
// its own background work) ends nothing.
func (f *Flight) TurnIdle(sid string) bool {
	s := f.sessions[sid]
	if s == nil || !s.Turn {
		return false
	}
	s.Turn = false
	f.runningN--
	return true
}

// TitleFrom says whose titles the agent's title reports for native
// session native, behind client session sid, are: with keep, the title
// the session has is its own and native's are native's (AgentTitled). A
// report for the native session already noted changes nothing, so a
// rebuild that brings the same native session back keeps what was seen
// of its title.
func (f *Flight) TitleFrom(sid, native string, keep bool) {
	s := f.session(sid)
	if s.TitleNative == native && s.KeepTitle == keep {
		return
	}
	s.KeepTitle, s.TitleNative, s.AutoTitle = keep, native, ""
}

// AgentTitled judges a title the agent gave client session sid's native
// session, and says whether it is the session's: it is, unless the
// session keeps its own (TitleFrom) and this is the title the agent made
// for the native session, the first it gave or the same again. A
// different one later is the agent renaming the session, which from then
// on has the agent's titles. A cleared title (null) is never the
// session's while it keeps its own.
func (f *Flight) AgentTitled(sid string, title *string) (sessions bool) {
	s := f.sessions[sid]
	if s == nil || !s.KeepTitle {
		return true
	}
	switch {
	case title == nil:
		return false
	case s.AutoTitle == "" || s.AutoTitle == *title:
		s.AutoTitle = *title
		return false
	}
	s.KeepTitle, s.AutoTitle = false, ""
	return true
}

// Resumed notes that the agent resumed native session native for client
// session sid: the first prompt to it proves it (Proving).
func (f *Flight) Resumed(sid, native string) {
	s := f.session(sid)
	if s.Unproven == "" {
		f.unprovenN++
	}
	s.Unproven = native
	if s.Lied == native {
		s.Lied = "" // resumed anew: it may serve now
	}
}

// Proving takes the mark Resumed left on sid, and says whether the prompt
// now on its way is the first to its resumed native session.
func (f *Flight) Proving(sid string) bool {
	s := f.sessions[sid]
	if s == nil || s.Unproven == "" {
		return false
	}
	s.Unproven = ""
	f.unprovenN--
	return true
}

// ResumeLied notes that the agent accepted the resume of native session
// native for client session sid and could not serve it: sid is rebuilt
// before its next request, and no rebuild resumes native again.
func (f *Flight) ResumeLied(sid, native string) {
	s := f.session(sid)
	s.Lied = native
	f.markStale(s)
}

// GoneRequest is one client request the dead agent had.
type GoneRequest struct {
	ID, Method string
}

// AgentGone is the agent's death, all at once: every request the dead agent
// had is taken out (the caller answers them), the agent's own requests
// become stale, and every session with a native session is marked to be
// rebuilt. life is the agent's life that begins now; a native session
// mapped later from an earlier life is stale from the start (Remap).
func (f *Flight) AgentGone(life uint64) Gone {
	f.life = life
	g := Gone{Sent: f.Owed()} // the caller answers them
	f.requests = map[string]*Request{}
	g.Turns = f.EndTurns()
	for id := range f.agentAsks {
		f.staleAsks[id] = true
	}
	f.agentAsks = map[string]bool{}
	for _, s := range f.sessions {
		if s.Native != "" {
			f.markStale(s)
		}
	}
	f.woke = true
	return g
}

// AgentEnded is the agent's death as the supervisor tells it, first when
// its output ends and again when it has exited: the first call of a death
// is AgentGone, on the life next begins; a second before TakeGone does
// nothing. What it took out waits here for TakeGone, so the death's state
// has no other owner.
func (f *Flight) AgentEnded(next func() uint64) {
	if f.dead != nil {
		return
	}
	g := f.AgentGone(next())
	f.dead = &g
}

// TakeGone hands out, once, what the agent's death left to answer, and
// readies the flight for the next death.
func (f *Flight) TakeGone() Gone {
	if f.dead == nil {
		return Gone{}
	}
	g := *f.dead
	f.dead = nil
	return g
}

// EndTurns ends every running v2 turn and returns their client sessions,
// sorted, for the caller to end on the wire: the client waits for an idle
// state_update that the agent will never send.
func (f *Flight) EndTurns() []string {
	var ended []string
	for sid, s := range f.sessions {
		if s.Turn {
			s.Turn = false
			ended = append(ended, sid)
		}
	}
	f.runningN = 0
	sort.Strings(ended)
	return ended
}

// Owed takes out the client requests the agent was sent and has not
// answered, by id, for the caller to answer: the relay is stopping.
func (f *Flight) Owed() []GoneRequest {
	var owed []GoneRequest
	for id, q := range f.requests {
		if q.State == Sent {
			owed = append(owed, GoneRequest{ID: id, Method: q.Method})
			f.Respond(id) // the caller answers it
		}
	}
	sort.Slice(owed, func(i, j int) bool { return owed[i].ID < owed[j].ID })
	return owed
}

func (f *Flight) markStale(s *Session) {
	if !s.Stale {
		s.Stale = true
		f.staleN++
	}
}

// Life is the agent's life the ledger last heard of.
func (f *Flight) Life() uint64 { return f.life }

// MarkStale marks a session to be rebuilt before its next request: one the
// record brought back from the store, whose native session is not live here.
func (f *Flight) MarkStale(sid string) { f.markStale(f.session(sid)) }

// Settled clears a session's stale mark after a rebuild in the agent's life
// life landed, unless the agent died since: the native session it made
// died with that agent.
func (f *Flight) Settled(sid string, life uint64) {
	s := f.sessions[sid]
	if s == nil || life != f.life {
		f.woke = true
		return
	}
	if s.Stale {
		s.Stale = false
		f.staleN--
	}
	f.woke = true
}

// Remap puts a new native session behind a client id, made in the agent's
// life life. The old native id keeps pointing at the client, so its late
// frames are still attributed. A native session of an agent that has died
// since is stale at once.
func (f *Flight) Remap(client, native string, life uint64) {
	s := f.session(client)
	if s.Native != native {
		delete(f.agentCommands, s.Native) // the list of a native session nobody goes back to
	}
	s.Native = native
	f.clients[native] = client
	if client != native {
		f.mapped = true
	}
	if life < f.life {
		f.markStale(s)
	}
}

// Begin marks a client session busy with a rebuild; when one runs already
// it returns what that is, and false.
func (f *Flight) Begin(sid, what string) (string, bool) {
	s := f.session(sid)
	if s.Busy != "" {
		return s.Busy, false
	}
	if s.Announced == 0 {
		f.busyN++
	}
	s.Busy = what
	return "", true
}

// End ends the rebuild Begin marked, and wakes what waits for it.
func (f *Flight) End(sid string) {
	if s := f.sessions[sid]; s != nil && s.Busy != "" {
		s.Busy = ""
		if s.Announced == 0 {
			f.busyN--
		}
		if *s == (Session{}) {
			// A rebuild of a session nobody knows (a client's /reset of a
			// made-up id) left nothing: the ledger does not keep it, so
			// such requests cannot grow it.
			delete(f.sessions, sid)
		}
	}
	f.woke = true
}

// Announce notes an operation taken for sid that may rebuild it (a slash
// command, a `_sidecar/*` method), before it runs on a goroutine of its
// own: the session is busy from now, so a request taken after it waits for
// it (a prompt that went on first would meet the rebuild's busy mark and
// be sent back). Every Announce is followed by one Announced.
func (f *Flight) Announce(sid string) {
	s := f.session(sid)
	if s.Busy == "" && s.Announced == 0 {
		f.busyN++
	}
	s.Announced++
}

// Announced ends an operation Announce noted, and wakes what waits for it.
func (f *Flight) Announced(sid string) {
	s := f.sessions[sid]
	if s == nil || s.Announced == 0 {
		return
	}
	s.Announced--
	if s.Busy == "" && s.Announced == 0 {
		f.busyN--
		if *s == (Session{}) {
			delete(f.sessions, sid)
		}
	}
	f.woke = true
}

// SetBlocked marks a session whose restore failed (nil lifts the mark).
func (f *Flight) SetBlocked(sid string, b *state.Blocked) { f.session(sid).Blocked = b }

// Owe keeps the target of a restore that failed or was cut short, so a
// retry aims at it again; nil clears it (the restore landed, or the user
// accepted the agent's config).
func (f *Flight) Owe(sid string, target *state.Config) { f.session(sid).Owed = target }

// Arm readies a handoff for a session's next prompt; an empty one disarms.
func (f *Flight) Arm(sid string, h replay.Handoff) {
	s := f.session(sid)
	if h.Text == "" {
		s.Armed = nil
		return
	}
	s.Armed = &h
}

// TakeHandoff hands out the armed handoff once, and remembers that the
// prompt now in flight carries it, for the record.
func (f *Flight) TakeHandoff(sid string) (replay.Handoff, bool) {
	s := f.sessions[sid]
	if s == nil || s.Armed == nil {
		return replay.Handoff{}, false
	}
	h := *s.Armed
	s.Armed, s.Carried = nil, &h
	return h, true
}

// CarriedBy reports, once, the handoff the prompt just taken carries.
func (f *Flight) CarriedBy(sid string) (replay.Handoff, bool) {
	s := f.sessions[sid]
	if s == nil || s.Carried == nil {
		return replay.Handoff{}, false
	}
	h := *s.Carried
	s.Carried = nil
	return h, true
}

// Forget drops what the ledger knows of a session that left: deleted, or
// moved to another agent (Close forgets a closed one, and remembers it is
// closed). The native ids it had keep pointing at it, so their late frames
// keep the client's id.
func (f *Flight) Forget(sid string) {
	delete(f.closed, sid)
	s := f.sessions[sid]
	if s == nil {
		return
	}
	if s.Stale {
		f.staleN--
	}
	if s.Unproven != "" {
		f.unprovenN--
	}
	if s.Busy != "" || s.Announced > 0 {
		// A rebuild still runs on it (a switch forgets the session it
		// moves): its End, or its Announced, finds the mark and ends it.
		f.sessions[sid] = &Session{Busy: s.Busy, Announced: s.Announced}
		return
	}
	delete(f.sessions, sid)
}

// Close forgets a session the client closed, and remembers that it is
// closed: its requests are refused until the client's own load or resume
// reopens it (Reopen), whether the agent closed it or the sidecar did for
// an agent without close.
func (f *Flight) Close(sid string) {
	f.Forget(sid)
	f.closed[sid] = true
}

// Reopen notes that the client reopens a closed session.
func (f *Flight) Reopen(sid string) { delete(f.closed, sid) }

// SawCommands notes that the agent sent a command list for a native session.
func (f *Flight) SawCommands(native string) { f.commands[native] = true }

// AgentCommands keeps the agent's own command list for a native session.
// A v2 agent gives it in a session's result, and each list that follows
// (the result's, an update's) replaces the one before, so every list the
// sidecar sends of its own carries the agent's commands with its own
// (intercept's ownCommands): else it would take them from the editor.
func (f *Flight) AgentCommands(native string, list []json.RawMessage) {
	f.agentCommands[native] = list
}

// Opening forgets that the agent sent a command list for a native session
// it is asked to load or resume again: the sidecar's own list follows the
// open unless the agent sends one anew.
func (f *Flight) Opening(native string) { delete(f.commands, native) }

// Hush keeps h of native's updates from the client, until Unhush of the
// same h.
func (f *Flight) Hush(native string, h Hush) { f.hushes[native] = append(f.hushes[native], h) }

// Unhush ends one Hush of h on native; the other holders' stay.
func (f *Flight) Unhush(native string, h Hush) {
	held := f.hushes[native]
	if i := slices.Index(held, h); i >= 0 {
		held = slices.Delete(held, i, i+1)
	}
	if len(held) == 0 {
		delete(f.hushes, native)
		return
	}
	f.hushes[native] = held
}

// BeginCreating notes one of the sidecar's own session/new calls: agent
// frames for a session nobody knows are held until it ends (Early).
func (f *Flight) BeginCreating() {
	if f.creatingN == 0 {
		f.created = make(chan struct{})
	}
	f.creatingN++
}

// EndCreating ends one, and when none is left lets every held frame go. It
// runs whatever the call's outcome, under the lock Early takes, so no frame
// can be held after the last release.
func (f *Flight) EndCreating() {
	f.creatingN--
	if f.creatingN == 0 {
		close(f.created)
		f.created = nil
	}
}

// Key is the ledger's name for a JSON-RPC id as a frame carries it: its
// bytes, unless the id could be spelt another way (a string with an escape,
// a number with a fraction or an exponent). Those are decoded and written
// again, so an agent that echoes an id in its own spelling still finds its
// request: a response the ledger cannot match is taken for a second answer.
func Key(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	plain := !bytes.Contains(id, []byte{'\\'})
	if id[0] != '"' {
		plain = !bytes.ContainsAny(id, ".eE")
	}
	if plain {
		return string(id)
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(id) // decoded JSON always encodes; keep the bytes if not
	}
	return string(b)
}

// Enter puts a held request at the end of the queue.
func (f *Flight) Enter(w *Waiter) {
	w.Cancel, w.Done, w.Prev = make(chan struct{}), make(chan struct{}), f.last
	if w.Prev == nil {
		closed := make(chan struct{})
		close(closed)
		w.Prev = closed
	}
	f.waiters = append(f.waiters, w)
	f.last = w.Done
}

// Leave takes a waiter out of the queue.
func (f *Flight) Leave(w *Waiter) {
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return
		}
	}
}

// CancelPrompts cancels the waiting prompts of sid and reports whether
// there were any.
func (f *Flight) CancelPrompts(sid string) bool {
	found := false
	for _, w := range f.waiters {
		if w.Prompt && w.Session == sid {
			select {
			case <-w.Cancel:
			default:
				close(w.Cancel)
			}
			found = true
		}
	}
	return found
}

// A Waiter is one client request held until its session is ready. Waiters
// leave in arrival order: each goes on only after the one before it (Prev),
// so the record sees them in the order the client sent them.
type Waiter struct {
	ID      []byte
	Session string
	Prompt  bool
	// Rebuild: a stale session is rebuilt before the request goes on;
	// else the request waits only for the agent and for running rebuilds.
	Rebuild bool
	// MinLife: the request waits for an agent of at least this life (one
	// whose predecessor never received it).
	MinLife uint64
	// Cancel is closed by a session/cancel for this waiting prompt.
	Cancel chan struct{}
	// Prev is closed when the waiter before this one has gone; Done when
	// this one has (its owner closes it).
	Prev <-chan struct{}
	Done chan struct{}
}

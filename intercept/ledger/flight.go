package ledger

import (
	"bytes"
	"encoding/json"

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
	// Agent is the agent it went to, behind a switchboard: the one that
	// owes its answer while State is Sent ("" with one agent).
	Agent string
	// Recorded: the record waits for its response to write what it did.
	Recorded bool
	// Frame is the request as the client sent it, when Recorded: the
	// record reads its params again at the response, which says what
	// they achieved. It is the record's own copy, never written to.
	Frame []byte
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

// Flight is everything in flight, kept by concern: the client's requests
// and their answers (Requests), each client session's flight state
// (Sessions), what the sidecar keeps per native session (Natives), and the
// requests that wait for their session (Waiters). It is reached only
// inside Update (to change it) or a read of the Ledger's, and changed only
// through its parts' methods, which keep each part's counters true. What
// changes several parts at once, an agent's death above all, is Flight's.
type Flight struct {
	Requests Requests
	Sessions Sessions
	Natives  Natives
	Waiters  Waiters

	life uint64 // the agent's life the ledger last heard of (AgentGone)
	// dead is what the agent's death took out and nobody has answered yet:
	// set when its output ends (AgentEnded), taken when its exit is known
	// (TakeGone).
	dead *Gone
}

// newFlight is an empty flight.
func newFlight() Flight {
	return Flight{
		Requests: Requests{
			requests: map[string]*Request{}, answered: map[string]bool{},
			agentAsks: map[string]bool{}, staleAsks: map[string]bool{},
		},
		Sessions: Sessions{all: map[string]*Session{}, clients: map[string]string{}, closed: map[string]bool{}},
		Natives:  Natives{commands: map[string]bool{}, agentCommands: map[string][]json.RawMessage{}, hushes: map[string][]Hush{}},
	}
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
	g := Gone{Sent: f.Requests.agentGone()}
	g.Turns = f.Sessions.EndTurns()
	f.Sessions.agentGone()
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

// Life is the agent's life the ledger last heard of.
func (f *Flight) Life() uint64 { return f.life }

// Settled clears a session's stale mark after a rebuild in the agent's life
// life landed, unless the agent died since: the native session it made
// died with that agent.
func (f *Flight) Settled(sid string, life uint64) {
	f.Sessions.settled(sid, life == f.life)
}

// Remap puts a new native session behind a client id, made in the agent's
// life life. The old native id keeps pointing at the client, so its late
// frames are still attributed. A native session of an agent that has died
// since is stale at once.
func (f *Flight) Remap(client, native string, life uint64) {
	if old := f.Sessions.remap(client, native, life < f.life); old != native {
		f.Natives.forget(old) // a native session nobody goes back to
	}
}

// Unsent takes back a request whose write to the agent failed: it is not in
// flight, and waits for the next agent. A prompt's session notes it, so the
// death does not record a turn that never began.
func (f *Flight) Unsent(id, sid string, prompt bool) {
	f.Requests.unsent(id)
	if prompt && sid != "" {
		f.Sessions.session(sid).Unsent = true
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
	if !f.Sessions.beginTurn(sid) {
		return BeganBefore
	}
	if q := f.Requests.promptOf(sid); q != nil {
		q.Began = true
		return BeganPrompt
	}
	return BeganAgent
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
	// Unknown: no turn runs, and the session is none the ledger knows
	// (nothing opened it here): no turn before it to give the output to.
	Unknown
)

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

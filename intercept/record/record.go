package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// recorded are the client requests whose outcome the record needs.
var recorded = map[string]bool{
	wire.Initialize: true, wire.Authenticate: true, wire.SessionNew: true, wire.SessionLoad: true, wire.SessionResume: true, wire.SessionFork: true,
	wire.SetMode: true, wire.SetConfigOption: true, wire.SetModel: true, wire.Prompt: true,
	wire.SessionClose: true, wire.SessionDelete: true,
}

// Config wires a Recorder.
type Config struct {
	Store state.Store
	Log   *slog.Logger
	// Agent is the agent's command line, kept with each session.
	Agent []string
	// Name is the agent's configured name when several agents share the
	// client ("" with one): each session and turn records the agent that
	// ran it.
	Name string
	// Settings are applied to every new session before the client sees it
	// (Then.ApplySettings).
	Settings []Setting
	// Queue bounds the events waiting for the recorder; a full queue slows
	// the relay rather than lose a frame (DESIGN.md "Speed").
	Queue int
	// Durable bounds how long a completing response waits for its write.
	Durable time.Duration
	// HandoffBudget bounds the kept-turn handoff in bytes (0: the default);
	// the record keeps no more of a turn's answer than a handoff can carry.
	HandoffBudget int
	// Host names this sidecar's host in each native session it records
	// (state.Native.Host), "" when it is not known.
	Host string
	Now  func() time.Time
}

// Then is what the sidecar does next when the record has taken in a
// response it held: the rebuilds' follow-ups (rebuild.FollowUps), which
// live above the record. Each runs on the record's goroutine, and lets the
// event's response go (Event.Release) itself.
type Then interface {
	// ApplySettings puts the start-up settings on a new session.
	ApplySettings(ctx context.Context, s *Session, ev Event)
	// Opened restores the config the agent's own load, resume or fork
	// dropped (before), if it did.
	Opened(ctx context.Context, s *Session, req *Request, ev Event, result json.RawMessage, before *state.Config)
	// Translate answers a config change the agent refused with -32601
	// through the surface it has, and says whether it took the event.
	Translate(ctx context.Context, ev Event) bool
	// OpenFailed answers, from the record, the client's load or resume of
	// session s that the agent failed, and says whether it took the event.
	OpenFailed(ctx context.Context, s *Session, ev Event, agentErr json.RawMessage) bool
}

// Ends is what the sidecar does when the agent ended a session: the
// session operations, which live above the record.
type Ends interface {
	// Closed marks a session the agent closed.
	Closed(ctx context.Context, sid string)
	// Forget forgets a session the agent deleted.
	Forget(ctx context.Context, sid string) error
}

// Recorder keeps the record of every session that passes: the config layers
// and every turn. It observes off the relay's path: Intercept copies what it
// claims onto a bounded queue, and one goroutine decodes and writes it. It
// holds a response only where DESIGN.md "Processes" requires the write to
// land first: a config change accepted, a turn ended.
type Recorder struct {
	cfg    Config
	log    *slog.Logger
	then   Then // what follows a held response (Follow)
	ends   Ends // what follows the agent's end of a session (Follow)
	events chan Event
	stop   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // the goroutines started with Go

	// text gathers the running turns' text on the relay's goroutine
	// (chunks.go).
	text *Text

	led  *ledger.Ledger
	life *life.Life
	ctx  context.Context // for the goroutines the recorder owns; set by Start

	// Owned by the run goroutine.
	sessions map[string]*Session
}

// Reopened clears a closed mark: the client opened the session again.
func (s *Session) Reopened() { s.Rec.Closed = nil }

// Setting is one start-up --set ID=VALUE. ID is an option id, or the
// category "model" or "mode".
type Setting struct {
	ID    string
	Value string
}

// Request is a client request the record waits to see answered.
type Request struct {
	ID     string
	Method string
	Params json.RawMessage
	SID    string
	// frame is the request as the client sent it, which the ledger kept
	// with it (ledger.Request.Frame): a response reads its params there.
	frame []byte
}

// paramsOf is the params member of a client request frame, nil for none.
// A frame that scanned is a JSON object, and any member decodes as raw
// JSON, so there is no error to keep.
func paramsOf(frame []byte) json.RawMessage {
	var msg struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(frame, &msg)
	return msg.Params
}

// Event is one unit of the record's work, in relay order.
type Event struct {
	Dir    proxy.Direction
	Method string
	Update string
	Raw    []byte
	Req    *Request // for responses: what they answer
	// Release, when set, lets a held response go once the event is written.
	Release func(lines ...[]byte)
	// Fn, when set, runs on the record's goroutine instead (internal events).
	Fn func(ctx context.Context)
	// Handoff is set on a prompt that carries the kept turns.
	Handoff *replay.Handoff
	// Life is the agent's life a response came from: a session it opened
	// is stale at once when that agent has died since (ledger Remap).
	Life uint64
	// Text is what the agent had streamed for the session when a turn's
	// end went by on the relay's goroutine (Text.TakeTurnText).
	Text TurnText
}

// TurnText is the text of a running turn, taken as its end went by.
type TurnText struct {
	Answer, MessageID string
}

// Session is the record's working copy of one session's record. It lives
// on the record's goroutine: only a function that runs there (Do,
// OnSession, Then) touches it.
type Session struct {
	Rec   state.Session
	Turns []state.Turn
	// Turn is the running turn, the one the agent's output is the answer
	// of, and turnReq the request key of its prompt ("" when unknown).
	Turn    *state.Turn
	turnReq string
	// queued are the turns whose prompts came while Turn ran, oldest
	// first. An agent that queues prompts (claude-agent-acp says so with
	// _meta.claudeCode.promptQueueing) runs each once the one before it
	// has ended, and answers them in that order.
	queued  []queuedTurn
	Started bool // the original has been written
	// Shown says the client has the session/new response: the session's
	// creation, start-up settings included, has settled, and until the
	// client's first change its live config is its original.
	Shown bool
	// TextFrom is the first turn (after the first) whose text is still in
	// memory; before it, only the store has the text (see thinOut).
	TextFrom int
	// Born is when this process saw the current native session made (the
	// agent's answer to a new or a fork, or a rebuild's fresh one); zero
	// when it was opened otherwise, or by an earlier process. Some agents
	// cannot load a session in its first minute (life.Habits).
	Born time.Time
	// compacting are the agent's compactions of the session that have not
	// completed, by compactionId (compaction.go).
	compacting map[string]*compacting
	// whole is the last turn that ended, as it was written, for its
	// background work to rewrite (turns.go); nil until one ends here.
	whole *state.Turn
}

// New builds a record that shares the ledger and the agent's life with
// the stages. Follow gives it what follows the responses it holds; Start
// runs it.
func New(cfg Config, led *ledger.Ledger, lf *life.Life) *Recorder {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	if cfg.Durable <= 0 {
		cfg.Durable = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Recorder{
		cfg: cfg, log: cfg.Log,
		events:   make(chan Event, cfg.Queue),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		sessions: map[string]*Session{},
		led:      led,
		life:     lf,
		ctx:      context.Background(),
	}
	r.text = newText(led, lf, answerBudget(cfg.HandoffBudget), func(f *proxy.Frame) { r.enqueue(noticeEvent(f)) },
		func(f *proxy.Frame) {
			r.enqueue(Event{Dir: f.Dir, Method: wire.Update, Update: updBackground, Raw: bytes.Clone(f.Raw)})
		})
	return r
}

// Follow gives the record what follows the responses it holds: then, the
// rebuilds' follow-ups, and ends, what the session operations do when the
// agent ended a session. They live above the record, which is built before
// them; call it before Start.
func (r *Recorder) Follow(then Then, ends Ends) { r.then, r.ends = then, ends }

// Text is where the running turns' text gathers, for the chain's chunk
// path (Text.TakeChunk) and for what takes a turn back.
func (r *Recorder) Text() *Text { return r.text }

// Go runs fn on a goroutine Close waits for, with the record's own
// context, which outlives a request: the sidecar's own calls for a session
// (a slash command, a rebuild).
func (r *Recorder) Go(fn func(ctx context.Context)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn(r.ctx)
	}()
}

// Start runs the recorder's goroutine until Close.
func (r *Recorder) Start(ctx context.Context) {
	r.ctx = context.WithoutCancel(ctx)
	go r.run(r.ctx)
}

// Close lets the recorder finish the events already queued, writes what it
// holds, and waits for its goroutine.
func (r *Recorder) Close(ctx context.Context) error {
	// The goroutines the recorder started (slash commands, rebuilds) end
	// with their calls, which time out when the agent is gone.
	spawned := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(spawned)
	}()
	select {
	case <-spawned:
	case <-ctx.Done():
		return fmt.Errorf("close recorder: rebuilds still running: %w", ctx.Err())
	}
	close(r.stop)
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("close recorder: %w", ctx.Err())
	}
	return nil
}

// Claims takes the requests whose outcome the record needs, their responses,
// and the session updates that change config or belong to a running turn.
// The chain hands it message chunks through takeChunk (chunks.go).
func (r *Recorder) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	switch {
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest:
		return recorded[string(env.Method)]
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindNotification:
		return env.MethodIs(wire.Cancel)
	case dir == proxy.AgentToClient && env.Kind == proxy.KindResponse:
		// The chain took the request out of the ledger as the answer
		// came (ledger.Respond); Intercept reads it from the context.
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification && env.MethodIs(wire.Update):
		switch string(env.Update) {
		case "config_option_update", "current_mode_update", updSubagent, updSessionInfo, updCompaction, updCompactionChunk, updState:
			return true
		case "agent_message_chunk", "tool_call", "tool_call_update":
			// A running turn's, or the background work of the turn before
			// (turns.go), once some session is open.
			return r.led.Running() || r.led.Opened()
		case updNotice, updAgentMessage:
			return r.led.Running()
		}
	case dir == proxy.AgentToClient && asks(env):
		return true
	}
	return false
}

// Intercept copies the frame to the recorder, and holds the responses whose
// write must land before the client sees them.
func (r *Recorder) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindNotification && wire.IsMessageChunk(f.Env.Update) {
		r.text.collect(f)
		return proxy.Verdict{}, nil
	}
	if f.Dir == proxy.AgentToClient && string(f.Env.Update) == updAgentMessage {
		r.text.Message(f)
		return proxy.Verdict{}, nil
	}
	if f.Dir == proxy.AgentToClient && string(f.Env.Update) == updSubagent {
		if child, parent, ok := childOf(f, r.log); ok {
			r.text.adopt(child, parent)
		}
		return proxy.Verdict{}, nil
	}
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindRequest {
		r.enqueue(Event{Dir: f.Dir, Method: string(f.Env.Method), Update: updAsked, Raw: bytes.Clone(f.Raw)})
		return proxy.Verdict{}, nil
	}
	var answered ledger.Request
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse {
		var ok bool
		if answered, ok = ledger.AnsweredOf(ctx); !ok || !answered.Recorded {
			return proxy.Verdict{}, nil // not a response the record waits for
		}
	}
	if u := string(f.Env.Update); u == "tool_call" || u == "tool_call_update" {
		sid := wire.SessionIDOf(f)
		switch r.led.TurnStateOf(sid, speaksV2(r.life)) {
		case ledger.Opening:
			// The replay of a load or resume, history the record has:
			// not the background work of the turn before (turns.go).
			return proxy.Verdict{}, nil
		case ledger.Unknown:
			// No session here to give it to, unless it is a subagent's,
			// whose tool calls are its parent's turn's (subagents.go);
			// copied for nothing, a 5 MiB tool call would cost as much
			// again.
			if r.text.parentOf(sid) == "" {
				return proxy.Verdict{}, nil
			}
		}
	}
	ev := Event{Dir: f.Dir, Method: string(f.Env.Method), Update: string(f.Env.Update), Raw: append([]byte(nil), f.Raw...)}
	if f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindRequest {
		// The params are decoded on the recorder's goroutine, off the
		// relay's path; only the session id is read here, from its span.
		req := &Request{ID: ledger.Key(f.Env.ID), Method: ev.Method, SID: wire.SessionIDOf(f)}
		native := req.SID
		if ev.Method == wire.SessionLoad || ev.Method == wire.SessionResume {
			native = r.led.NativeOf(req.SID)
		}
		r.led.Update(func(f *ledger.Flight) {
			f.Requests.Record(req.ID, req.Method, req.SID).Frame = ev.Raw
			switch ev.Method {
			case wire.SessionLoad, wire.SessionResume:
				f.Natives.Opening(native)
			case wire.Prompt:
				if h, ok := f.Sessions.CarriedBy(req.SID); ok {
					ev.Handoff = &h
				}
			}
		})
		ev.Req = req
	}
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse {
		// The request's params are read again from its frame, which the
		// ledger kept with it, on the record's goroutine (apply).
		ev.Req = &Request{ID: ledger.Key(f.Env.ID), Method: answered.Method, SID: answered.Session, frame: answered.Frame}
		ev.Life = r.life.Gen()
		if ev.Req.Method == wire.Prompt && !f.Env.Error && speaksV2(r.life) {
			// A v2 prompt is answered as it is accepted: the turn runs on,
			// and its chunks are read, until its idle state_update.
			r.led.Update(func(f *ledger.Flight) { f.Sessions.TurnAccepted(answered.Session, answered) })
			r.enqueue(ev)
			return proxy.Verdict{}, nil
		}
		if ev.Req.Method == wire.Prompt {
			ev.Text = r.text.TakeTurnText(r.led.NativeOf(answered.Session))
		}
		if holds(ev.Req.Method) {
			v := holding(&ev)
			r.enqueue(ev)
			return v, nil
		}
	}
	if ev.Update == updState {
		switch stateOf(f.Raw) {
		case "idle":
			if !turnIdle(r.led, f) {
				return proxy.Verdict{}, nil
			}
			ev.Text = r.text.TakeTurnText(wire.SessionIDOf(f))
			v := holding(&ev) // it completes a turn, as a v1 prompt's response does
			r.enqueue(ev)
			return v, nil
		case "running", "requires_action":
			client := r.led.ClientOf(wire.SessionIDOf(f))
			var began ledger.Began
			r.led.Update(func(f *ledger.Flight) { began = f.TurnBegan(client) })
			if began == ledger.BeganAgent {
				ev.Update = updAgentTurn
				r.enqueue(ev)
			}
		}
		return proxy.Verdict{}, nil
	}
	r.enqueue(ev)
	return proxy.Verdict{}, nil
}

// updState is v2's report of a session's foreground state; idle ends a
// turn (wire.Version). updAgentMessage is v2's whole message of the
// agent's (Text.Message).
const (
	updState        = "state_update"
	updAgentMessage = "agent_message"
)

// speaksV2 says whether the connection speaks ACP v2 or later.
func speaksV2(lf *life.Life) bool { return wire.Version(lf.Caps().Protocol) >= wire.V2 }

// turnIdle says whether a state_update ends a running v2 turn, and ends it
// in the ledger: the turn's chunks are read up to here, on the relay's
// goroutine, so none after it is taken for the turn's.
func turnIdle(led *ledger.Ledger, f *proxy.Frame) bool {
	if string(wire.Member(f.Raw, "params", "update", "state")) != `"idle"` {
		return false
	}
	client := led.ClientOf(wire.SessionIDOf(f))
	var ended bool
	led.Update(func(fl *ledger.Flight) { ended = fl.Sessions.TurnIdle(client) })
	return ended
}

// holds says which responses wait for their write: the ones that complete a
// config change or a turn, and session/new when start-up settings must be
// applied before the client may act on the session.
func holds(method string) bool {
	switch method {
	case wire.SetMode, wire.SetConfigOption, wire.SetModel, wire.Prompt:
		return true
	case wire.SessionDelete:
		return true // the client hears of the delete once the record is gone
	case wire.SessionNew, wire.SessionLoad, wire.SessionResume, wire.SessionFork:
		return true // the sidecar's command list follows the response (rebuild's held.go)
	}
	return false
}

// holding readies ev to keep its response's place until the event is
// written: the record calls the event's release once, with what goes to
// the client in the response's place (the response, and whatever the
// sidecar adds after it). The verdict it returns holds the response; the
// caller queues the event.
func holding(ev *Event) proxy.Verdict {
	lines := make(chan [][]byte, 1)
	var once sync.Once
	ev.Release = func(l ...[]byte) { once.Do(func() { lines <- l }) }
	raw := ev.Raw
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		select {
		case l := <-lines:
			return proxy.Decision{Forward: l}
		case <-ctx.Done():
			return proxy.Decision{Forward: [][]byte{raw}} // the relay is stopping: the response goes as it came
		}
	}}
}

func (r *Recorder) enqueue(ev Event) {
	select {
	case r.events <- ev:
	case <-r.done:
		if ev.Release != nil {
			ev.Release(ev.Raw)
		}
	}
}

// Queue runs fn on the record's goroutine, in relay order with the frames
// queued before it, and does not wait for it.
func (r *Recorder) Queue(fn func(ctx context.Context)) { r.enqueue(Event{Fn: fn}) }

// Settle runs fn on the record's goroutine for the held response of ev,
// and waits for it. Whatever befalls fn, the response goes: as fn lets it
// (ev.Release), or as it came when fn fails on it or the record has
// stopped (apply, enqueue).
func (r *Recorder) Settle(ev Event, fn func(ctx context.Context)) {
	done := make(chan struct{})
	r.enqueue(Event{Fn: func(ctx context.Context) {
		defer close(done)
		fn(ctx)
	}, Release: ev.Release, Raw: ev.Raw})
	select {
	case <-done:
	case <-r.done:
	}
}

// Session is the record of sid in this process, nil if none. Call it on
// the record's goroutine only (Do, Queue, Settle, OnSession, Then).
func (r *Recorder) Session(sid string) *Session { return r.sessions[sid] }

// SetSession puts s behind sid; nil forgets sid in this process (the store
// keeps what it has). On the record's goroutine only.
func (r *Recorder) SetSession(sid string, s *Session) {
	if s == nil {
		delete(r.sessions, sid)
		return
	}
	r.sessions[sid] = s
}

// Interrupted is the record's half of the agent's death: a prompt in
// flight is recorded as interrupted (it stays among the kept turns), and
// what it carried is owed again. It runs after the ledger let go of what
// the dead agent had (Agent.Gone).
func (r *Recorder) Interrupted(ctx context.Context) {
	err := r.Do(ctx, func(ctx context.Context) {
		for sid, s := range r.sessions {
			// An unsent prompt's turn stays, to be taken back (unbegin).
			for i, t := range s.StopTurns(r.led.UnsentPrompt(sid)) {
				t.Status = state.TurnInterrupted
				t.Ended = r.cfg.Now()
				if i == 0 { // the running turn: the text so far is its
					t.Answer += r.text.TakeAnswer(t.NativeID)
				}
				r.PutTurn(ctx, s, t)
				if t.HandoffDelivered {
					// The agent died under the prompt that carried the
					// kept turns: what it kept of them is unknown, so the
					// rebuilt session is handed them again.
					s.Rec.HandoffPending = true
					r.PutSession(ctx, s)
				}
			}
		}
		r.Flush(ctx)
	})
	if err != nil {
		// Only a stopping recorder refuses, and then no session is
		// rebuilt any more.
		r.log.Warn("the running turns were not marked interrupted", "err", err)
	}
}

// run is the recorder's goroutine: it applies events in relay order.
func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	for {
		select {
		case ev := <-r.events:
			r.apply(ctx, ev)
		case <-r.stop:
			for {
				select {
				case ev := <-r.events:
					r.apply(ctx, ev)
				default:
					// A client that makes a session and goes (acpx's
					// `sessions new`, an editor closed before the first
					// message) leaves it unchanged and unprompted: its live
					// config is its original. Unfixed, the session would
					// stay without one for good, since the next process
					// takes a recorded session without an original for one
					// recorded before originals existed.
					for sid, s := range r.sessions {
						if s.Shown && !s.Started {
							fixUnused(ctx, r.cfg.Store, sid, r.log)
						}
					}
					r.Flush(ctx)
					return
				}
			}
		}
	}
}

func (r *Recorder) apply(ctx context.Context, ev Event) {
	defer func() {
		if p := recover(); p != nil {
			// A frame the recorder cannot digest must not take the relay down.
			r.log.Error("recorder failed on a frame; it was relayed unchanged", "method", ev.Method, "panic", fmt.Sprint(p))
			if ev.Release != nil {
				ev.Release(ev.Raw)
			}
		}
	}()
	switch {
	case ev.Fn != nil:
		ev.Fn(ctx)
	case ev.Dir == proxy.ClientToAgent && ev.Req != nil:
		ev.Req.Params = paramsOf(ev.Raw)
		r.clientRequest(ctx, ev)
	case ev.Dir == proxy.ClientToAgent:
		// A session/cancel: the turn's status comes from its stop reason,
		// as a cancel is only a request, and the agent may finish anyway.
	case ev.Req != nil:
		if ev.Req.Method != wire.Prompt {
			// A prompt's params, its content, maybe large, are read at its
			// request only: what its response achieved is the turn's end.
			ev.Req.Params = paramsOf(ev.Req.frame)
		}
		r.response(ctx, ev)
	default:
		r.update(ctx, ev)
	}
}

// clientRequest notes a request before the agent sees it. The first change
// or prompt the client makes fixes the original: the agent's defaults and
// the start-up settings have settled by then.
func (r *Recorder) clientRequest(ctx context.Context, ev Event) {
	switch ev.Method {
	case wire.Initialize, wire.Authenticate:
		r.life.Told(ev.Method == wire.Initialize, wire.CompactJSON(ev.Req.Params))
	case wire.SetMode, wire.SetConfigOption, wire.SetModel:
		r.FixOriginal(ctx, ev.Req.SID)
	case wire.Prompt:
		s := r.sessions[ev.Req.SID]
		if s == nil {
			return
		}
		r.FixOriginal(ctx, ev.Req.SID)
		blocks, text := wire.PromptContent(ev.Req.Params, ev.Handoff != nil)
		t := state.Turn{
			Index: len(s.Turns) + 1, Prompt: blocks, PromptText: text, NativeID: s.Rec.NativeID,
			Status: state.TurnRunning, Agent: r.cfg.Name, Started: r.cfg.Now(),
			HandoffDelivered: ev.Handoff != nil,
		}
		if h := ev.Handoff; h != nil {
			t.Handoff = h.Text
			s.Rec.HandoffPending = false
			s.Rec.Handoff = &state.Handoff{NativeID: s.Rec.NativeID, Turn: t.Index, Kept: h.Kept, Omitted: h.Omitted, At: t.Started}
			if n := s.Rec.LastNative(); n != nil && n.ID == s.Rec.NativeID {
				got := *s.Rec.Handoff
				n.Handoff = &got
			}
			r.PutSession(ctx, s)
		}
		// The turn is written as it begins, running, and again whole when
		// it ends. A sidecar killed mid-turn leaves it running, never a
		// completed turn with half an answer; whoever brings the session
		// back (a restarted sidecar, another host of a fleet) marks it
		// interrupted. The first write needs no wait: only the end is
		// acknowledged.
		r.PutTurn(ctx, s, s.beginTurn(ev.Req.ID, t))
	}
}

func (r *Recorder) FixOriginal(ctx context.Context, sid string) {
	s := r.sessions[sid]
	if s == nil || s.Started {
		return
	}
	s.Started = true
	s.Rec.Original = CloneConfig(s.Rec.Live)
	r.PutSession(ctx, s)
}

// fixUnused fixes the original of sid, a session this process made and
// never changed nor prompted, from the record as the store has it now:
// another sidecar of the host may have taken the session on since, and
// this process's copy of it is stale then. A stored record with an
// original, or with overrides, was changed elsewhere and is left alone.
func fixUnused(ctx context.Context, store state.Store, sid string, log *slog.Logger) {
	rec, err := store.Session(ctx, sid)
	if err != nil || rec.Original != nil || len(rec.Overrides) > 0 {
		return // gone, changed elsewhere, or unreadable: nothing to fix from
	}
	rec.Original = CloneConfig(rec.Live)
	if err := store.PutSession(ctx, rec); err != nil && !errors.Is(err, state.ErrOriginalExists) {
		log.Warn("record the original of an unused session", "session", sid, "err", err)
	}
}

// response records what a request achieved, then lets a held response go.
func (r *Recorder) response(ctx context.Context, ev Event) {
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(ev.Raw, &msg) // a scanned object's members decode as raw JSON
	failed := !wire.IsNull(msg.Error)
	req := ev.Req
	switch req.Method {
	case wire.SessionNew, wire.SessionLoad, wire.SessionResume, wire.SessionFork:
		if !failed {
			// The config the agent's own load, resume or fork may drop: the
			// session's (a load or resume of a session this process knows)
			// or the parent's (a fork).
			var before *state.Config
			if prev := r.sessions[req.SID]; prev != nil && req.Method != wire.SessionNew {
				before = CloneConfig(r.led.TargetOr(req.SID, prev.Rec.Live))
			}
			s := r.sessionResult(ctx, req, msg.Result, ev.Life)
			if s != nil && ev.Release != nil {
				if req.Method == wire.SessionNew && len(r.cfg.Settings) > 0 {
					// The response waits until the start-up settings are in.
					r.then.ApplySettings(ctx, s, ev)
					return
				}
				r.then.Opened(ctx, s, req, ev, msg.Result, before)
				return
			}
		} else if s := r.sessions[req.SID]; s != nil && ev.Release != nil &&
			(req.Method == wire.SessionLoad || req.Method == wire.SessionResume) && r.then.OpenFailed(ctx, s, ev, msg.Error) {
			return
		}
	case wire.SetConfigOption, wire.SetMode, wire.SetModel:
		if !failed {
			r.ConfigAccepted(ctx, req, msg.Result)
		} else if ev.Release != nil && wire.ErrorCodeOf(msg.Error) == proxy.CodeMethodNotFound && r.then.Translate(ctx, ev) {
			return
		}
	case wire.Prompt:
		var res struct {
			StopReason string `json:"stopReason"`
			MessageID  string `json:"messageId"`
		}
		decoded(r.log, "session/prompt result", msg.Result, &res) // an unreadable member stays empty
		if failed || !speaksV2(r.life) {
			r.turnEnded(ctx, req.SID, req.ID, res.StopReason, failed, ev.Text)
		} else if s := r.sessions[req.SID]; s != nil {
			if t := s.turnOf(req.ID); t != nil && res.MessageID != "" {
				// Written now, not with the turn's end: a sidecar killed
				// mid-turn leaves the turn under the id the client knows
				// its message by, for a replay or a rewind to it.
				t.UserMessageID = res.MessageID
				r.PutTurn(ctx, s, t)
			}
		}
	case wire.SessionClose:
		if !failed {
			r.ends.Closed(ctx, req.SID)
		}
	case wire.SessionDelete:
		if !failed {
			if err := r.ends.Forget(ctx, req.SID); err != nil {
				// The agent deleted it; the record could not follow. Say so
				// in the log, where the user looks when `show` still has it.
				r.log.Error("the agent deleted the session, the record did not", "session", req.SID, "err", err)
			}
		}
	}
	if ev.Release != nil {
		r.Flush(ctx)
		ev.Release(ev.Raw)
	}
}

// sessionResult starts or refreshes a session's record from a session result.
func (r *Recorder) sessionResult(ctx context.Context, req *Request, result json.RawMessage, life uint64) *Session {
	var ids struct {
		SessionID string `json:"sessionId"`
	}
	decoded(r.log, req.Method+" result", result, &ids) // without an id, the request names the session
	sid := ids.SessionID
	if sid == "" {
		sid = req.SID // load and resume answer without the id
	}
	if sid == "" {
		return nil
	}
	var p struct {
		Cwd                   string          `json:"cwd"`
		McpServers            json.RawMessage `json:"mcpServers"`
		AdditionalDirectories []string        `json:"additionalDirectories"`
		Meta                  json.RawMessage `json:"_meta"`
	}
	decoded(r.log, req.Method+" params", req.Params, &p) // what decoded is kept; a bad field stays empty
	cfg := wire.ConfigFromResult(result)
	s := r.sessions[sid]
	live := s != nil // this sidecar had the session before: its native session too
	if s == nil {
		s = &Session{}
		if old, err := r.cfg.Store.Session(ctx, sid); err == nil {
			// A session recorded without an original keeps having none:
			// nothing reconstructs one from mutable data.
			s.Rec = *old
			s.Started = true
			if turns, err := r.cfg.Store.Turns(ctx, sid); err == nil {
				s.Turns = turns
			}
		}
		r.sessions[sid] = s
	}
	now := r.cfg.Now()
	// A new session or a fork has the id the agent gave it. A load or a
	// resume went to the native session the client id maps to, which a
	// rebuild may have replaced.
	native := sid
	if req.Method == wire.SessionLoad || req.Method == wire.SessionResume {
		native = r.led.NativeOf(sid)
	}
	opened := req.Method == wire.SessionLoad || req.Method == wire.SessionResume
	if s.Rec.NativeID != native || !opened {
		s.Born = time.Time{}
		if !opened {
			s.Born = r.cfg.Now()
		}
	}
	s.Rec.ClientID = sid
	// A load or resume of the native session this sidecar has live adds
	// nothing to the natives: it is the same native session, on the same
	// agent. One the sidecar had not live (it restarted, or another host
	// ran it) the agent brought back.
	if last := s.Rec.LastNative(); !opened || !live || last == nil || last.ID != native {
		s.Rec.Behind(state.Native{ID: native, Event: madeBy(req.Method), Path: pathOf(req.Method), Host: r.cfg.Host, At: now})
	}
	s.Rec.Agent, s.Rec.AgentName, s.Rec.Cwd = r.cfg.Agent, r.cfg.Name, p.Cwd
	s.Rec.McpServers, s.Rec.AdditionalDirectories = wire.CompactJSON(p.McpServers), p.AdditionalDirectories
	var parentMeta, parentParams json.RawMessage // a fork's parent's
	if parent := r.sessions[req.SID]; parent != nil && req.Method == wire.SessionFork {
		parentMeta, parentParams = parent.Rec.Meta, parent.Rec.NewParams
	}
	s.Rec.Meta = creationMeta(req.Method, p.Meta, s.Rec.Meta, parentMeta)
	switch req.Method {
	case wire.SessionNew, wire.SessionFork:
		// What else the client made it with (ACP's systemPrompt); a load's
		// or resume's other members (replayFrom) open, and make nothing.
		s.Rec.NewParams = wire.OtherMembers(req.Params, "sessionId", "cwd", "mcpServers", "additionalDirectories", "_meta")
		if s.Rec.NewParams == nil && req.Method == wire.SessionFork {
			s.Rec.NewParams = parentParams
		}
	}
	if s.Rec.Created.IsZero() {
		s.Rec.Created = now
	}
	s.Reopened()
	if s.Rec.Baseline == nil {
		s.Rec.Baseline = CloneConfig(cfg)
	}
	r.life.SawResult(cfg != nil && cfg.Mode != nil)
	if req.Method == wire.SessionLoad || req.Method == wire.SessionResume {
		cfg = CarryLegacy(cfg, s.Rec.Live)
	}
	s.Rec.Live = cfg
	keep := s.Rec.Title != "" && s.Rec.MadeByRebuild(native)
	r.led.Update(func(f *ledger.Flight) {
		f.Remap(sid, native, life)
		f.Sessions.TitleFrom(sid, native, keep)
		if req.Method == wire.SessionResume {
			f.Sessions.Resumed(sid, native) // the first prompt proves it (lifeline)
		}
	})
	if req.Method == wire.SessionFork && req.SID != "" {
		s.Rec.Lineage = &state.Lineage{ParentID: req.SID, ForkTurn: len(keptTurns(r.sessions[req.SID])) + 1}
	}
	r.PutSession(ctx, s)
	return s
}

// creationMeta is the _meta a session keeps after the client's request
// method with _meta sent (state.Session.Meta): a session/new's as it came;
// a fork's without the fork point, which asks for this one fork only
// (wire.ForkAtMeta), or the parent's when the fork sent nothing else, as
// the agent's fork goes on with the parent's options; a load's or resume's
// when it sent one, else the one the session had.
func creationMeta(method string, sent, had, parent json.RawMessage) json.RawMessage {
	present := len(sent) > 0 && !wire.IsNull(sent)
	switch method {
	case wire.SessionNew:
		if !present {
			return nil
		}
	case wire.SessionFork:
		if present {
			sent = wire.WithoutForkAt(sent)
		}
		if len(sent) == 0 || wire.IsNull(sent) {
			return parent
		}
	default:
		if !present {
			return had
		}
	}
	return bytes.Clone(sent)
}

// madeBy is the event a client's request that made a native session
// records (state.Native.Event).
func madeBy(method string) string {
	switch method {
	case wire.SessionFork:
		return state.MadeFork
	case wire.SessionLoad, wire.SessionResume:
		return state.MadeOpen
	}
	return state.MadeNew
}

// pathOf is how the agent gave the native session a client's request
// made (state.Native.Path).
func pathOf(method string) string {
	switch method {
	case wire.SessionFork:
		return "fork"
	case wire.SessionLoad:
		return "load"
	case wire.SessionResume:
		return "resume"
	}
	return "new"
}

func keptTurns(s *Session) []state.Turn {
	if s == nil {
		return nil
	}
	var out []state.Turn
	for _, t := range s.Turns {
		if t.Status != state.TurnRolledBack {
			out = append(out, t)
		}
	}
	return out
}

// configAccepted records a client change the agent accepted: into live, as
// the agent reported it, and into the overrides.
func (r *Recorder) ConfigAccepted(ctx context.Context, req *Request, result json.RawMessage) {
	s := r.sessions[req.SID]
	if s == nil {
		return
	}
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModeID   string          `json:"modeId"`
		ModelID  string          `json:"modelId"`
	}
	if !decoded(r.log, req.Method+" params", req.Params, &p) {
		return // the agent took a change we cannot read: the record keeps what it knew
	}
	ov := state.Override{At: r.cfg.Now()}
	switch req.Method {
	case wire.SetConfigOption:
		var res wire.ConfigPayload
		if decoded(r.log, req.Method+" result", result, &res) {
			if opts, ok := wire.ParseOptions(res.ConfigOptions); ok {
				s.Rec.Live = WithOptions(s.Rec.Live, opts)
			}
		}
		ov.OptionID, ov.Value = p.ConfigID, wire.CompactJSON(p.Value)
		if o := s.Rec.Live.Option(p.ConfigID); o != nil {
			ov.Category = o.Category
		}
	case wire.SetMode:
		ov = legacyAccepted(s, "mode", p.ModeID, ov.At)
	case wire.SetModel:
		ov = legacyAccepted(s, "model", p.ModelID, ov.At)
	}
	s.Rec.Overrides = append(s.Rec.Overrides, ov)
	r.PutSession(ctx, s)
}

// legacyAccepted records a mode or model the agent accepted through the
// legacy call, and returns the override it makes. The option of the same
// category moves too: a restore reads it before the legacy value
// (replay's categoryValue), and left stale until the agent's
// config_option_update it made a rebuild the agent died under before that
// update restore the old value and report success. It moves only to a
// value it offers: codex-acp 2.6.0's legacy models name a model with its
// effort ("gpt-6-luna[high]"), which its model option does not offer, and
// its config_option_update says what the option became.
func legacyAccepted(s *Session, category, id string, at time.Time) state.Override {
	s.Rec.Live = WithLegacy(s.Rec.Live, category, id)
	ov := state.Override{OptionID: category, Category: category, Value: wire.String(id), At: at}
	if o := s.Rec.Live.ByCategory(category); o != nil && o.Offers(ov.Value) {
		o.Current = ov.Value
	}
	return ov
}

// turnEnded closes a turn with its stop reason: the turn of prompt req on
// its answer (a v1 prompt's, or a v2 prompt's refusal), or, for req "",
// the running turn on its idle state_update (v2). text is what the agent
// had streamed when the end went by (Text.TakeTurnText): the running turn's, also
// when the turn that ended is one queued behind it, which never ran.
func (r *Recorder) turnEnded(ctx context.Context, sid, req, stopReason string, failed bool, text TurnText) {
	s := r.sessions[sid]
	if s == nil {
		return
	}
	t, running := s.endTurn(req)
	if !running && s.Turn != nil {
		s.Turn.Answer += text.Answer
		if text.MessageID != "" {
			s.Turn.MessageID = text.MessageID
		}
		text = TurnText{}
	}
	if t == nil {
		return
	}
	t.StopReason = stopReason
	switch {
	case failed:
		t.Status = state.TurnFailed
	case stopReason == "cancelled":
		t.Status = state.TurnCancelled
	default:
		t.Status = state.TurnCompleted
	}
	t.Ended = r.cfg.Now()
	t.Answer += text.Answer
	if text.MessageID != "" {
		t.MessageID = text.MessageID
	}
	r.PutTurn(ctx, s, t)
	t.Answer = strings.Clone(t.Answer) // not the collecting buffer's spare room
	s.keepWhole(t)
	Lighten(t)
	s.ThinOut()
}

// queuedTurn is a turn waiting behind the running one: its prompt's
// request key, and its place in Turns.
type queuedTurn struct {
	req string
	at  int
}

// beginTurn adds t, whose prompt (request key req) is on its way to the
// agent, and returns it. It is the running turn unless one runs already;
// then it waits behind that one.
func (s *Session) beginTurn(req string, t state.Turn) *state.Turn {
	at := s.place(s.Turn)
	s.Turns = append(s.Turns, t)
	added := &s.Turns[len(s.Turns)-1]
	if at < 0 {
		s.Turn, s.turnReq = added, req
		return added
	}
	s.Turn = &s.Turns[at] // the append may have moved the turns
	s.queued = append(s.queued, queuedTurn{req: req, at: len(s.Turns) - 1})
	return added
}

// place is where t lies in Turns, or -1.
func (s *Session) place(t *state.Turn) int {
	for i := len(s.Turns) - 1; t != nil && i >= 0; i-- {
		if &s.Turns[i] == t {
			return i
		}
	}
	return -1
}

// endTurn takes the turn of prompt req out of the running ones and says
// whether it was the running turn. A req that names no queued turn ends
// the running turn, whose place the oldest queued turn takes.
func (s *Session) endTurn(req string) (t *state.Turn, running bool) {
	for i, q := range s.queued {
		if req != "" && q.req == req {
			s.queued = slices.Delete(s.queued, i, i+1)
			return &s.Turns[q.at], false
		}
	}
	if req != "" && s.turnReq != "" && req != s.turnReq {
		return nil, false // a prompt whose turn is no longer running
	}
	t = s.Turn
	s.Turn, s.turnReq = nil, ""
	if len(s.queued) > 0 {
		q := s.queued[0]
		s.queued = slices.Delete(s.queued, 0, 1)
		s.Turn, s.turnReq = &s.Turns[q.at], q.req
	}
	return t, t != nil
}

// turnOf is the running or queued turn of prompt req, or nil.
func (s *Session) turnOf(req string) *state.Turn {
	for _, q := range s.queued {
		if q.req == req {
			return &s.Turns[q.at]
		}
	}
	if s.Turn != nil && (s.turnReq == req || s.turnReq == "") {
		return s.Turn
	}
	return nil
}

// StopTurns ends the running turn and the turns queued behind it, and
// returns them, oldest first: the running one, if any, comes first. With
// keepLast, the session's last turn, when it is one of them, stays as the
// running turn: its prompt never reached the agent, and is taken back
// (DropLastTurn).
func (s *Session) StopTurns(keepLast bool) []*state.Turn {
	if s.Turn == nil {
		return nil
	}
	type running struct {
		t   *state.Turn
		req string
	}
	all := []running{{s.Turn, s.turnReq}}
	for _, q := range s.queued {
		all = append(all, running{&s.Turns[q.at], q.req})
	}
	s.Turn, s.turnReq, s.queued = nil, "", nil
	if last := all[len(all)-1]; keepLast && last.t == &s.Turns[len(s.Turns)-1] {
		s.Turn, s.turnReq = last.t, last.req
		all = all[:len(all)-1]
	}
	out := make([]*state.Turn, len(all))
	for i, r := range all {
		out[i] = r.t
	}
	return out
}

// DropLastTurn takes back the last turn while it runs or waits, as its
// prompt never reached the agent, and returns a copy of it, or nil; running
// says it was the running turn.
func (s *Session) DropLastTurn() (t *state.Turn, running bool) {
	last := len(s.Turns) - 1
	if last < 0 {
		return nil, false
	}
	switch {
	case len(s.queued) > 0 && s.queued[len(s.queued)-1].at == last:
		s.queued = s.queued[:len(s.queued)-1]
	case s.Turn == &s.Turns[last]:
		s.Turn, s.turnReq, running = nil, "", true
	default:
		return nil, false
	}
	dropped := s.Turns[last]
	s.Turns = s.Turns[:last]
	return &dropped, running
}

// MoveTurns puts turns in place of Turns, after which the turns that
// were Turns lie k places later, and keeps the running ones running.
func (s *Session) MoveTurns(turns []state.Turn, k int) {
	at := s.place(s.Turn)
	s.Turns, s.TextFrom, s.Turn = turns, 0, nil
	if at >= 0 && at+k < len(turns) {
		s.Turn = &s.Turns[at+k]
	}
	for i := range s.queued {
		s.queued[i].at += k
	}
}

// Lighten keeps in memory only what a handoff or a rollback can use of a
// turn the store already holds: not the prompt's raw blocks (an image can
// be megabytes), and no text longer than the largest handoff, which could
// never carry it anyway. A session of ten thousand turns stays small.
func Lighten(t *state.Turn) {
	t.Prompt, t.Handoff = nil, ""
	t.PromptText = capText(t.PromptText)
	t.Answer = capText(t.Answer)
}

func capText(s string) string { return clip(s, replay.MaxBudget) }

// keepText is how much turn text a session keeps in memory: twice the
// largest handoff, which picks the newest turns and the first user message.
const keepText = 2 * replay.MaxBudget

// ThinOut drops from memory the text of turns older than the newest
// keepText bytes, except the first turn's. What needs them (a rollback to
// an old turn, a fork from one, a load that replays the history) reads the
// turns from the store (fullTurns).
func (s *Session) ThinOut() {
	total := 0
	for i := len(s.Turns) - 1; i >= max(1, s.TextFrom); i-- {
		total += len(s.Turns[i].PromptText) + len(s.Turns[i].Answer)
		if total <= keepText {
			continue
		}
		for j := max(1, s.TextFrom); j <= i; j++ {
			s.Turns[j].PromptText, s.Turns[j].Answer, s.Turns[j].ToolCalls, s.Turns[j].Notices, s.Turns[j].Handoff = "", "", nil, nil, ""
		}
		s.TextFrom = i + 1
		return
	}
}

// fullTurns is the session's turns with all their text: from memory while
// none was dropped, else from the store.
func (r *Recorder) FullTurns(ctx context.Context, s *Session) []state.Turn {
	if s.TextFrom <= 1 {
		return s.Turns
	}
	turns, err := r.cfg.Store.Turns(ctx, s.Rec.ClientID)
	if err != nil {
		r.log.Warn("read turns for a handoff; using what memory holds", "session", s.Rec.ClientID, "err", err)
		return s.Turns
	}
	return turns
}

// update applies a session/update: config reports to live, the title and
// a compaction to the record, the rest to the running turn, or, between
// turns, to the turn before as its background work (turns.go); and what a
// request of the agent's asks the user to the turn it comes in.
func (r *Recorder) update(ctx context.Context, ev Event) {
	switch ev.Update {
	case updNotice, updNoticeChunk, updSessionInfo, updCompaction, updCompactionChunk:
		r.sessionNews(ctx, ev)
		return
	case updState:
		r.stateIdle(ctx, ev)
		return
	case updAgentTurn, updAsked, updBackground:
		var sid, text string
		switch ev.Update {
		case updAsked:
			sid, text = askedOf(r.log, ev.Raw)
		case updBackground:
			sid, text = backgroundText(r.log, ev.Raw)
		default:
			sid = wire.Unquote(wire.Member(ev.Raw, "params", "sessionId"))
		}
		s := r.sessions[r.led.ClientOf(sid)]
		if s == nil {
			return // a subagent's, or a session the record does not know
		}
		if ev.Update == updAgentTurn {
			r.PutTurn(ctx, s, s.agentTurn(state.Turn{Agent: r.cfg.Name, Started: r.cfg.Now()}))
			return
		}
		t, background := s.workTurn()
		if t == nil {
			return
		}
		var changed bool
		if ev.Update == updAsked {
			changed = ask(t, text)
		} else if t.Answer += text; text != "" {
			changed = true
		}
		if !changed || !background {
			return // a running turn is written whole at its end
		}
		if w := s.wholeOf(ctx, r.cfg.Store, r.log, t); w != nil {
			if ev.Update == updAsked {
				ask(w, text)
			} else {
				w.Answer += text
			}
			r.PutTurn(ctx, s, w)
		}
		return
	}
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			wire.UpdateFields
		} `json:"params"`
	}
	if err := json.Unmarshal(ev.Raw, &n); err != nil {
		// A member of another type than the recorder reads (a tool call's
		// content is a list, a chunk's one block) costs only that member:
		// encoding/json fills in the rest.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return
		}
	}
	s := r.sessions[r.led.ClientOf(n.Params.SessionID)]
	if s == nil {
		parent := r.text.parentOf(n.Params.SessionID)
		if parent != "" && (ev.Update == "tool_call" || ev.Update == "tool_call_update") {
			s = r.sessions[r.led.ClientOf(parent)] // a subagent's tool call belongs to its parent's turn
		}
	}
	if s == nil {
		return
	}
	u := n.Params.Update
	switch ev.Update {
	case "config_option_update":
		if opts, ok := wire.ParseOptions(u.ConfigOptions); ok {
			s.Rec.Live = WithOptions(s.Rec.Live, opts)
			r.PutSession(ctx, s)
		}
	case "current_mode_update":
		if u.CurrentModeID == "" {
			return // no mode id: nothing the agent reported goes into live
		}
		s.Rec.Live = WithLegacy(s.Rec.Live, "mode", u.CurrentModeID)
		r.PutSession(ctx, s)
	case "agent_message_chunk":
		if s.Turn != nil && u.Content.Type == "text" {
			s.Turn.Answer += u.Content.Text
		}
	case "tool_call", "tool_call_update":
		t, background := s.workTurn()
		if t == nil {
			return
		}
		apply := func(t *state.Turn) {
			tc := findToolCall(t, u.ToolCallID)
			if u.Title != nil {
				tc.Title = *u.Title
			}
			if u.Status != nil {
				tc.Status = *u.Status
			}
		}
		apply(t)
		if background {
			// A tool call of the turn's background work, after its answer.
			if w := s.wholeOf(ctx, r.cfg.Store, r.log, t); w != nil {
				apply(w)
				r.PutTurn(ctx, s, w)
			}
		}
	}
}

// stateIdle ends the v2 turn that Intercept saw end (turnIdle), and then
// lets the held state_update go: the client hears the turn is over once
// the record has it, as a v1 prompt's answer waits for its write.
func (r *Recorder) stateIdle(ctx context.Context, ev Event) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			wire.UpdateFields
		} `json:"params"`
	}
	decoded(r.log, "state_update", ev.Raw, &n) // an unreadable stop reason stays empty
	r.turnEnded(ctx, r.led.ClientOf(n.Params.SessionID), "", n.Params.Update.StopReason, false, ev.Text)
	if ev.Release != nil {
		r.Flush(ctx)
		ev.Release(ev.Raw)
	}
}

// sessionNews applies the updates that tell about the session rather than
// the conversation: notices, the title and compactions. A subagent's are
// not its parent's: they find no session here.
func (r *Recorder) sessionNews(ctx context.Context, ev Event) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	decoded(r.log, ev.Update, ev.Raw, &n) // without a session id it finds no session
	s := r.sessions[r.led.ClientOf(n.Params.SessionID)]
	if s == nil {
		return
	}
	changed := false
	switch ev.Update {
	case updNotice, updNoticeChunk:
		notice(r.log, s, ev) // the turn's: written with it
	case updSessionInfo:
		changed = sessionInfo(r.log, s, ev.Raw)
	default:
		changed = compaction(r.log, s, ev, answerBudget(r.cfg.HandoffBudget), r.cfg.Now())
	}
	if changed {
		r.PutSession(ctx, s)
	}
}

func findToolCall(t *state.Turn, id string) *state.ToolCall {
	for i := range t.ToolCalls {
		if t.ToolCalls[i].ID == id {
			return &t.ToolCalls[i]
		}
	}
	t.ToolCalls = append(t.ToolCalls, state.ToolCall{ID: id})
	return &t.ToolCalls[len(t.ToolCalls)-1]
}

func (r *Recorder) PutSession(ctx context.Context, s *Session) {
	s.Rec.Updated = r.cfg.Now()
	// Whatever writes the session writes it in the connection's version.
	s.Rec.Protocol = max(r.life.Caps().Protocol, int(wire.V1))
	rec := s.Rec
	rec.Original = nil // written once, by fixOriginal
	if s.Started && s.Rec.Original != nil {
		rec.Original = s.Rec.Original
	}
	err := r.cfg.Store.PutSession(ctx, &rec)
	switch {
	case errors.Is(err, state.ErrDeleted):
		// Deleted while this process held it (`acp-sidecar delete` from the
		// shell, another sidecar): the store refuses its writes, and
		// nothing here writes it back.
		sid := s.Rec.ClientID
		delete(r.sessions, sid)
		r.led.Update(func(f *ledger.Flight) { f.Sessions.Forget(sid) })
		r.log.Info("session was deleted elsewhere; no longer recorded", "session", sid)
	case err != nil && !errors.Is(err, state.ErrOriginalExists):
		r.log.Warn("record session", "session", s.Rec.ClientID, "err", err)
	}
}

func (r *Recorder) PutTurn(ctx context.Context, s *Session, t *state.Turn) {
	cp := *t
	// A prompt with a 20 MiB image is relayed whole, but the record keeps
	// its text, not its blocks: one turn must fit the store's value limit.
	if len(cp.Prompt) > maxRecordedText {
		cp.Prompt = nil
	}
	cp.PromptText = clip(cp.PromptText, maxRecordedText)
	cp.Answer = clipped(cp.Answer, answerBudget(r.cfg.HandoffBudget))
	if err := r.cfg.Store.PutTurn(ctx, s.Rec.ClientID, &cp); err != nil {
		// The store's error can quote the value; the log never holds the
		// conversation, so only the error's kind is kept.
		r.log.Warn("record turn", "session", s.Rec.ClientID, "turn", t.Index, "err", clip(err.Error(), 200))
	}
}

// maxRecordedText bounds the prompt text a turn keeps in the record.
const maxRecordedText = 1 << 20

// answerBudget bounds the agent's text a turn keeps: as much as a handoff
// (--handoff-budget) can carry, which is what the record is for. The
// turn's end is written before its response goes on (DESIGN.md
// "Processes"), so every byte kept here delays that response: a whole
// answer of megabytes held the response back by tens of milliseconds.
func answerBudget(handoffBudget int) int {
	if b := handoffBudget; b > 0 {
		return min(b, replay.MaxBudget)
	}
	return replay.DefaultBudget
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " …[cut]"
}

// flush waits, within a bound, for what was written to land.
func (r *Recorder) Flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Durable)
	defer cancel()
	if err := r.cfg.Store.Flush(ctx); err != nil {
		r.log.Warn("store did not confirm the write in time; the response goes on", "err", err)
	}
}

// decoded decodes raw into v, and logs what could not be read. Go's
// decoder keeps the fields it could read, so a caller may go on with them.
func decoded(log *slog.Logger, what string, raw json.RawMessage, v any) bool {
	if wire.IsNull(raw) {
		return true // absent: nothing to read, and nothing wrong
	}
	if err := json.Unmarshal(raw, v); err != nil {
		log.Warn("cannot read "+what+"; recording what could be read", "err", err)
		return false
	}
	return true
}

// do runs fn on the recorder's goroutine, where the sessions live, and waits
// for it. Never call it from that goroutine.
func (r *Recorder) Do(ctx context.Context, fn func(ctx context.Context)) error {
	done := make(chan struct{})
	ev := Event{Fn: func(ctx context.Context) {
		defer close(done)
		fn(ctx)
	}}
	select {
	case r.events <- ev:
	case <-r.done:
		return errors.New("the recorder has stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, fn runs; ctx no longer ends the wait. fn writes what
	// the caller reads after do returns (a snapshot), so returning before
	// fn is done would let the two race. The wait ends at the latest
	// with the recorder (r.done).
	select {
	case <-done:
		return nil
	case <-r.done:
		return errors.New("the recorder has stopped")
	}
}

// onSession runs fn on the recorder's goroutine with the session sid, or
// refuses when the recorder holds no such session.
func (r *Recorder) OnSession(ctx context.Context, sid string, fn func(ctx context.Context, s *Session)) error {
	found := false
	err := r.Do(ctx, func(ctx context.Context) {
		if s := r.sessions[sid]; s != nil {
			found = true
			fn(ctx, s)
		}
	})
	if err == nil && !found {
		err = wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
	}
	return err
}

// ParseSetting reads one --set ID=VALUE.
func ParseSetting(s string) (Setting, error) {
	id, v, ok := strings.Cut(s, "=")
	if !ok || id == "" || v == "" {
		return Setting{}, fmt.Errorf("--set %q: want ID=VALUE", s)
	}
	return Setting{ID: id, Value: v}, nil
}

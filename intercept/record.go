package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// Sidecar is what the recorder needs of the relay to act on its own: the
// sidecar's calls to the agent, and frames of its own. *proxy.Relay
// implements it.
type Sidecar interface {
	Call(ctx context.Context, method string, params, result any) error
	Send(dir proxy.Direction, line []byte) error
}

var _ Sidecar = (*proxy.Relay)(nil)

// recorded are the client requests whose outcome the record needs.
var recorded = map[string]bool{
	wire.Initialize: true, wire.Authenticate: true, wire.SessionNew: true, wire.SessionLoad: true, wire.SessionResume: true, wire.SessionFork: true,
	wire.SetMode: true, wire.SetConfigOption: true, wire.SetModel: true, wire.Prompt: true,
	wire.SessionClose: true, wire.SessionDelete: true,
}

// RecorderConfig wires a Recorder.
type RecorderConfig struct {
	Store state.Store
	// Sidecar makes the sidecar's own calls (start-up settings). Set it with
	// Recorder.Bind when the relay exists.
	Log *slog.Logger
	// Agent is the agent's command line, kept with each session.
	Agent []string
	// Name is the agent's configured name when several agents share the
	// client ("" with one): each session and turn records the agent that
	// ran it.
	Name string
	// Version is the sidecar's, advertised in initialize.
	Version string
	// Settings are applied to every new session before the client sees it.
	Settings []Setting
	// Queue bounds the events waiting for the recorder; a full queue slows
	// the relay rather than lose a frame (DESIGN.md "Speed").
	Queue int
	// Durable bounds how long a completing response waits for its write.
	Durable time.Duration
	// HandoffBudget bounds the kept-turn handoff in bytes (0: the default).
	HandoffBudget int
	// CallTimeout bounds each of the sidecar's own calls.
	CallTimeout time.Duration
	// HoldTimeout bounds how long a client request waits for a restarting
	// agent or a rebuild (0: DefaultHoldTimeout).
	HoldTimeout time.Duration
	Now         func() time.Time
}

// DefaultCallTimeout bounds each of the sidecar's own calls. Real agents
// take up to seconds for a session/new on a loaded machine (claude-agent-acp
// took 13 s at a load of 16 on two cores), and a restore that gives up too
// soon blocks the session for nothing.
const DefaultCallTimeout = 30 * time.Second

// Recorder keeps the record of every session that passes: the config layers
// and every turn. It observes off the relay's path: Intercept copies what it
// claims onto a bounded queue, and one goroutine decodes and writes it. It
// holds a response only where DESIGN.md "Processes" requires the write to
// land first: a config change accepted, a turn ended.
type Recorder struct {
	cfg    RecorderConfig
	log    *slog.Logger
	sc     Sidecar
	events chan event
	stop   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // the goroutines that make the sidecar's own calls

	mu      sync.Mutex
	answers answers    // native session id -> the running turn's text so far
	kids    children   // subagent sessions (subagents.go)
	discard *answerBuf // full from the start: where a child's chunks go
	chunks  chunkCache // the agent pump's own; see collect

	led   *ledger.Ledger
	life  *life.Life
	ready *life.Signal    // fires when the agent's phase or a rebuild changes
	quit  chan struct{}   // closed when Close begins: nobody waits any longer
	watch *watch          // waits on life, woken by ready
	gate  *ChunkGate      // shared by the stages gated for chunks
	eng   *engine         // builds native sessions and restores their config
	agent *Agent          // the agent's life as the supervisor tells it
	rb    *rebuilder      // carries out the rebuilds (Run)
	ops   *Sessions       // what the sidecar does to sessions
	ctx   context.Context // for the goroutines the recorder owns; set by Start

	// Owned by the run goroutine.
	sessions map[string]*session
	params   map[string]json.RawMessage // client request id -> its params, until its response
}

// Setting is one start-up --set ID=VALUE. ID is an option id, or the
// category "model" or "mode".
type Setting struct {
	ID    string
	Value string
}

// request is a client request the recorder waits to see answered.
type request struct {
	id     string
	method string
	params json.RawMessage
	sid    string
}

// event is one unit of the recorder's work, in relay order.
type event struct {
	dir    proxy.Direction
	method string
	update string
	raw    []byte
	req    *request // for responses: what they answer
	// release, when set, lets a held response go once the event is written.
	release func(lines ...[]byte)
	// fn, when set, runs on the recorder goroutine instead (internal events).
	fn func(ctx context.Context)
	// handoff is set on a prompt that carries the kept turns.
	handoff *replay.Handoff
	// life is the agent's life a response came from: a session it opened
	// is stale at once when that agent has died since (ledger Remap).
	life uint64
}

// session is the recorder's working copy of one session's record.
type session struct {
	rec     state.Session
	turns   []state.Turn
	turn    *state.Turn // the running turn
	started bool        // the original has been written
	// textFrom is the first turn (after the first) whose text is still in
	// memory; before it, only the store has the text (see thinOut).
	textFrom int
}

// NewRecorder builds a recorder. Start runs it; Bind gives it the relay.
func NewRecorder(cfg RecorderConfig) *Recorder {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	if cfg.Durable <= 0 {
		cfg.Durable = 2 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = DefaultHoldTimeout
	}
	ready := life.NewSignal()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Recorder{
		cfg: cfg, log: cfg.Log,
		events:   make(chan event, cfg.Queue),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		answers:  answers{},
		kids:     children{},
		sessions: map[string]*session{},
		params:   map[string]json.RawMessage{},
		led:      ledger.New(ready.Fire),
		life:     life.New(ready),
		ready:    ready,
		quit:     make(chan struct{}),
		ctx:      context.Background(),
	}
	r.discard = &answerBuf{}
	r.discard.full.Store(true)
	r.watch = &watch{life: r.life, ready: ready, quit: r.quit, timeout: cfg.HoldTimeout}
	r.eng = &engine{led: r.led, life: r.life, watch: r.watch, log: cfg.Log, callTimeout: cfg.CallTimeout}
	r.gate = &ChunkGate{led: r.led}
	r.rb = &rebuilder{rec: r, eng: r.eng, led: r.led, life: r.life, watch: r.watch, log: cfg.Log, cfg: &r.cfg}
	r.ops = &Sessions{rec: r, rb: r.rb, eng: r.eng, led: r.led, life: r.life, log: cfg.Log, cfg: &r.cfg}
	r.agent = &Agent{life: r.life, led: r.led, turns: r.ops, log: cfg.Log, callTimeout: cfg.CallTimeout}
	return r
}

// Stages are the chain's stages for one agent. cmd lists them in chain
// order (buildChain): the lifeline first, to gate requests on the agent's
// life; the sidecar's own surfaces (what they answer is never recorded nor
// sent on); the record itself; the session-id mapping, which must see
// client ids on their way in and give agent frames their client ids on
// their way out; and the tracker last, to note only what really reaches
// the agent.
type Stages struct {
	Lifeline, Commands, Record, IDs, Tracker Interceptor
}

// Stages builds the chain's stages, each from only what it uses of the
// owners they share.
func (r *Recorder) Stages() Stages {
	return Stages{
		Lifeline: newLifeline(r.life, r.led, r.watch, r.gate, r.ops, r.log),
		Commands: newCommands(r.ops, r.led, r.life, r.cfg.Version),
		Record:   r,
		IDs:      newIDs(r.led, r.gate),
		Tracker:  newTracker(r.led),
	}
}

// Bind gives the recorder the relay it acts through. Call it before frames flow.
func (r *Recorder) Bind(sc Sidecar) { r.sc, r.eng.sc, r.agent.sc = sc, sc, sc }

// Agent is the agent's life, which the supervisor moves.
func (r *Recorder) Agent() *Agent { return r.agent }

// Sessions is what the sidecar does to sessions, for the switchboard.
func (r *Recorder) Sessions() *Sessions { return r.ops }

// Start runs the recorder's goroutine until Close.
func (r *Recorder) Start(ctx context.Context) {
	r.ctx = context.WithoutCancel(ctx)
	go r.run(r.ctx)
}

// Close lets the recorder finish the events already queued, writes what it
// holds, and waits for its goroutine.
func (r *Recorder) Close(ctx context.Context) error {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
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
		q, ok := r.led.Request(ledger.Key(env.ID))
		return ok && q.Recorded
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification && env.MethodIs(wire.Update):
		switch string(env.Update) {
		case "config_option_update", "current_mode_update", updSubagent:
			return true
		case "agent_message_chunk", "tool_call", "tool_call_update":
			return r.led.Running()
		}
	}
	return false
}

// Intercept copies the frame to the recorder, and holds the responses whose
// write must land before the client sees them.
func (r *Recorder) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindNotification && isMessageChunk(f.Env.Update) {
		r.collect(f)
		return proxy.Verdict{}, nil
	}
	if f.Dir == proxy.AgentToClient && string(f.Env.Update) == updSubagent {
		if child, parent, ok := childOf(f, r.log); ok {
			r.mu.Lock()
			if _, known := r.kids[child]; !known {
				r.kids[child] = parent
			}
			r.mu.Unlock()
		}
		return proxy.Verdict{}, nil
	}
	ev := event{dir: f.Dir, method: string(f.Env.Method), update: string(f.Env.Update), raw: append([]byte(nil), f.Raw...)}
	if f.Dir == proxy.ClientToAgent && f.Env.Kind == proxy.KindRequest {
		// The params are decoded on the recorder's goroutine, off the
		// relay's path; only the session id is read here, from its span.
		req := &request{id: ledger.Key(f.Env.ID), method: ev.method, sid: wire.SessionIDOf(f)}
		native := req.sid
		if ev.method == wire.SessionLoad || ev.method == wire.SessionResume {
			native = r.led.NativeOf(req.sid)
		}
		r.led.Update(func(f *ledger.Flight) {
			f.Record(req.id, req.method, req.sid)
			switch ev.method {
			case wire.SessionLoad, wire.SessionResume:
				f.Opening(native)
			case wire.Prompt:
				if h, ok := f.CarriedBy(req.sid); ok {
					ev.handoff = &h
				}
			}
		})
		ev.req = req
	}
	if f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindResponse {
		id := ledger.Key(f.Env.ID)
		var q ledger.Request
		var ok bool
		r.led.Update(func(f *ledger.Flight) { q, ok = f.Answered(id) })
		if ok && q.Recorded {
			// The params are the record goroutine's own (apply); the
			// response finds them there by the request's id.
			ev.req = &request{id: id, method: q.Method, sid: q.Session}
		}
		ev.life = r.life.Gen()
		if ev.req != nil && holds(ev.req.method) {
			return r.holdFor(ev), nil
		}
	}
	r.enqueue(ev)
	return proxy.Verdict{}, nil
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
		return true // the sidecar's command list follows the response (open.go)
	}
	return false
}

// holdFor keeps a response's place until its event is written: the
// recorder calls the event's release once, with what goes to the client in
// the response's place (the response, and whatever the sidecar adds after
// it).
func (r *Recorder) holdFor(ev event) proxy.Verdict {
	lines := make(chan [][]byte, 1)
	var once sync.Once
	ev.release = func(l ...[]byte) { once.Do(func() { lines <- l }) }
	raw := ev.raw
	r.enqueue(ev)
	return proxy.Verdict{Do: proxy.Hold, Later: func(ctx context.Context) proxy.Decision {
		select {
		case l := <-lines:
			return proxy.Decision{Forward: l}
		case <-ctx.Done():
			return proxy.Decision{Forward: [][]byte{raw}} // the relay is stopping: the response goes as it came
		}
	}}
}

func (r *Recorder) enqueue(ev event) {
	select {
	case r.events <- ev:
	case <-r.done:
		if ev.release != nil {
			ev.release(ev.raw)
		}
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
					r.flush(ctx)
					return
				}
			}
		}
	}
}

func (r *Recorder) apply(ctx context.Context, ev event) {
	defer func() {
		if p := recover(); p != nil {
			// A frame the recorder cannot digest must not take the relay down.
			r.log.Error("recorder failed on a frame; it was relayed unchanged", "method", ev.method, "panic", fmt.Sprint(p))
			if ev.release != nil {
				ev.release(ev.raw)
			}
		}
	}()
	switch {
	case ev.fn != nil:
		ev.fn(ctx)
	case ev.dir == proxy.ClientToAgent && ev.req != nil:
		var msg struct {
			Params json.RawMessage `json:"params"`
		}
		// A frame that scanned is a JSON object, and any member decodes
		// as raw JSON.
		_ = json.Unmarshal(ev.raw, &msg)
		ev.req.params = msg.Params
		r.params[ev.req.id] = msg.Params
		r.clientRequest(ctx, ev)
	case ev.dir == proxy.ClientToAgent:
		// A session/cancel: the turn's status comes from its stop reason,
		// as a cancel is only a request, and the agent may finish anyway.
	case ev.req != nil:
		ev.req.params = r.params[ev.req.id]
		delete(r.params, ev.req.id)
		r.response(ctx, ev)
	default:
		r.update(ctx, ev)
	}
}

// clientRequest notes a request before the agent sees it. The first change
// or prompt the client makes fixes the original: the agent's defaults and
// the start-up settings have settled by then.
func (r *Recorder) clientRequest(ctx context.Context, ev event) {
	switch ev.method {
	case wire.Initialize, wire.Authenticate:
		r.life.Told(ev.method == wire.Initialize, wire.CompactJSON(ev.req.params))
	case wire.SetMode, wire.SetConfigOption, wire.SetModel:
		r.fixOriginal(ctx, ev.req.sid)
	case wire.Prompt:
		s := r.sessions[ev.req.sid]
		if s == nil {
			return
		}
		r.fixOriginal(ctx, ev.req.sid)
		blocks, text := wire.PromptContent(ev.req.params, ev.handoff != nil)
		t := state.Turn{
			Index: len(s.turns) + 1, Prompt: blocks, PromptText: text, NativeID: s.rec.NativeID,
			Status: state.TurnRunning, Agent: r.cfg.Name, Started: r.cfg.Now(),
			HandoffDelivered: ev.handoff != nil,
		}
		if h := ev.handoff; h != nil {
			s.rec.HandoffPending = false
			s.rec.Handoff = &state.Handoff{NativeID: s.rec.NativeID, Turn: t.Index, Kept: h.Kept, Omitted: h.Omitted, At: t.Started}
			r.putSession(ctx, s)
		}
		// The turn is written when it ends. A sidecar killed mid-turn
		// leaves no half-written turn behind: it is absent, never a
		// completed turn with half an answer.
		s.turns = append(s.turns, t)
		s.turn = &s.turns[len(s.turns)-1]
	}
}

func (r *Recorder) fixOriginal(ctx context.Context, sid string) {
	s := r.sessions[sid]
	if s == nil || s.started {
		return
	}
	s.started = true
	s.rec.Original = cloneConfig(s.rec.Live)
	r.putSession(ctx, s)
}

// response records what a request achieved, then lets a held response go.
func (r *Recorder) response(ctx context.Context, ev event) {
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(ev.raw, &msg) // a scanned object's members decode as raw JSON
	failed := !wire.IsNull(msg.Error)
	req := ev.req
	switch req.method {
	case wire.SessionNew, wire.SessionLoad, wire.SessionResume, wire.SessionFork:
		if !failed {
			// The config the agent's own load, resume or fork may drop: the
			// session's (a load or resume of a session this process knows)
			// or the parent's (a fork).
			var before *state.Config
			if prev := r.sessions[req.sid]; prev != nil && req.method != wire.SessionNew {
				before = cloneConfig(r.led.TargetOr(req.sid, prev.rec.Live))
			}
			s := r.sessionResult(ctx, req, msg.Result, ev.life)
			if s != nil && ev.release != nil {
				if req.method == wire.SessionNew && len(r.cfg.Settings) > 0 {
					// The response waits until the start-up settings are in.
					applySettings(r.rb, ctx, s, ev)
					return
				}
				opened(r.rb, ctx, s, req, ev, msg.Result, before)
				return
			}
		}
	case wire.SetConfigOption, wire.SetMode, wire.SetModel:
		if !failed {
			r.configAccepted(ctx, req, msg.Result)
		} else if ev.release != nil && errorCodeOf(msg.Error) == proxy.CodeMethodNotFound && translate(r.rb, ctx, ev) {
			return
		}
	case wire.Prompt:
		r.turnEnded(ctx, req.sid, msg.Result, failed)
	case wire.SessionClose:
		if !failed {
			r.ops.markClosed(ctx, req.sid)
		}
	case wire.SessionDelete:
		if !failed {
			if err := r.ops.forget(ctx, req.sid); err != nil {
				// The agent deleted it; the record could not follow. Say so
				// in the log, where the user looks when `show` still has it.
				r.log.Error("the agent deleted the session, the record did not", "session", req.sid, "err", err)
			}
		}
	}
	if ev.release != nil {
		r.flush(ctx)
		ev.release(ev.raw)
	}
}

// sessionResult starts or refreshes a session's record from a session result.
func (r *Recorder) sessionResult(ctx context.Context, req *request, result json.RawMessage, life uint64) *session {
	var ids struct {
		SessionID string `json:"sessionId"`
	}
	decoded(r.log, req.method+" result", result, &ids) // without an id, the request names the session
	sid := ids.SessionID
	if sid == "" {
		sid = req.sid // load and resume answer without the id
	}
	if sid == "" {
		return nil
	}
	var p struct {
		Cwd                   string          `json:"cwd"`
		McpServers            json.RawMessage `json:"mcpServers"`
		AdditionalDirectories []string        `json:"additionalDirectories"`
	}
	decoded(r.log, req.method+" params", req.params, &p) // what decoded is kept; a bad field stays empty
	cfg := wire.ConfigFromResult(result)
	s := r.sessions[sid]
	if s == nil {
		s = &session{}
		if old, err := r.cfg.Store.Session(ctx, sid); err == nil {
			// A session recorded without an original keeps having none:
			// nothing reconstructs one from mutable data.
			s.rec = *old
			s.started = true
			if turns, err := r.cfg.Store.Turns(ctx, sid); err == nil {
				s.turns = turns
			}
		}
		r.sessions[sid] = s
	}
	now := r.cfg.Now()
	// A new session or a fork has the id the agent gave it. A load or a
	// resume went to the native session the client id maps to, which a
	// rebuild may have replaced.
	native := sid
	if req.method == wire.SessionLoad || req.method == wire.SessionResume {
		native = r.led.NativeOf(sid)
	}
	s.rec.ClientID, s.rec.NativeID = sid, native
	if len(s.rec.NativeHistory) == 0 || s.rec.NativeHistory[len(s.rec.NativeHistory)-1] != native {
		s.rec.NativeHistory = append(s.rec.NativeHistory, native)
	}
	s.rec.Agent, s.rec.AgentName, s.rec.Cwd = r.cfg.Agent, r.cfg.Name, p.Cwd
	s.rec.McpServers, s.rec.AdditionalDirectories = wire.CompactJSON(p.McpServers), p.AdditionalDirectories
	if s.rec.Created.IsZero() {
		s.rec.Created = now
	}
	reopened(&s.rec)
	if s.rec.Baseline == nil {
		s.rec.Baseline = cloneConfig(cfg)
	}
	if req.method == wire.SessionLoad || req.method == wire.SessionResume {
		cfg = carryLegacy(cfg, s.rec.Live)
	}
	s.rec.Live = cfg
	r.led.Update(func(f *ledger.Flight) { f.Remap(sid, native, life) })
	if req.method == wire.SessionFork && req.sid != "" {
		s.rec.Lineage = &state.Lineage{ParentID: req.sid, ForkTurn: len(keptTurns(r.sessions[req.sid])) + 1}
	}
	r.putSession(ctx, s)
	return s
}

func keptTurns(s *session) []state.Turn {
	if s == nil {
		return nil
	}
	var out []state.Turn
	for _, t := range s.turns {
		if t.Status != state.TurnRolledBack {
			out = append(out, t)
		}
	}
	return out
}

// configAccepted records a client change the agent accepted: into live, as
// the agent reported it, and into the overrides.
func (r *Recorder) configAccepted(ctx context.Context, req *request, result json.RawMessage) {
	s := r.sessions[req.sid]
	if s == nil {
		return
	}
	var p struct {
		ConfigID string          `json:"configId"`
		Value    json.RawMessage `json:"value"`
		ModeID   string          `json:"modeId"`
		ModelID  string          `json:"modelId"`
	}
	if !decoded(r.log, req.method+" params", req.params, &p) {
		return // the agent took a change we cannot read: the record keeps what it knew
	}
	ov := state.Override{At: r.cfg.Now()}
	switch req.method {
	case wire.SetConfigOption:
		var res wire.ConfigPayload
		if decoded(r.log, req.method+" result", result, &res) {
			if opts, ok := wire.ParseOptions(res.ConfigOptions); ok {
				s.rec.Live = withOptions(s.rec.Live, opts)
			}
		}
		ov.OptionID, ov.Value = p.ConfigID, wire.CompactJSON(p.Value)
		if o := s.rec.Live.Option(p.ConfigID); o != nil {
			ov.Category = o.Category
		}
	case wire.SetMode:
		s.rec.Live = withLegacy(s.rec.Live, "mode", p.ModeID)
		ov.OptionID, ov.Category = "mode", "mode"
		ov.Value = wire.String(p.ModeID)
	case wire.SetModel:
		s.rec.Live = withLegacy(s.rec.Live, "model", p.ModelID)
		ov.OptionID, ov.Category = "model", "model"
		ov.Value = wire.String(p.ModelID)
		if o := s.rec.Live.ByCategory("model"); o != nil {
			o.Current = ov.Value // the same model, accepted through the legacy call
		}
	}
	s.rec.Overrides = append(s.rec.Overrides, ov)
	r.putSession(ctx, s)
}

// turnEnded closes the running turn with its stop reason.
func (r *Recorder) turnEnded(ctx context.Context, sid string, result json.RawMessage, failed bool) {
	s := r.sessions[sid]
	if s == nil || s.turn == nil {
		return
	}
	t := s.turn
	var res struct {
		StopReason string `json:"stopReason"`
	}
	decoded(r.log, "session/prompt result", result, &res) // an unreadable stopReason stays empty
	t.StopReason = res.StopReason
	switch {
	case failed:
		t.Status = state.TurnFailed
	case res.StopReason == "cancelled":
		t.Status = state.TurnCancelled
	default:
		t.Status = state.TurnCompleted
	}
	t.Ended = r.cfg.Now()
	t.Answer += r.takeAnswer(t.NativeID)
	r.putTurn(ctx, s, t)
	lighten(t)
	t.Answer = strings.Clone(t.Answer) // not the collecting buffer's spare room
	thinOut(s)
	s.turn = nil
}

// lighten keeps in memory only what a handoff or a rollback can use of a
// turn the store already holds: not the prompt's raw blocks (an image can
// be megabytes), and no text longer than the largest handoff, which could
// never carry it anyway. A session of ten thousand turns stays small.
func lighten(t *state.Turn) {
	t.Prompt = nil
	t.PromptText = capText(t.PromptText)
	t.Answer = capText(t.Answer)
}

func capText(s string) string { return clip(s, replay.MaxBudget) }

// keepText is how much turn text a session keeps in memory: twice the
// largest handoff, which picks the newest turns and the first user message.
const keepText = 2 * replay.MaxBudget

// thinOut drops from memory the text of turns older than the newest
// keepText bytes, except the first turn's. What needs them (a rollback to
// an old turn, a fork from one, a load that replays the history) reads the
// turns from the store (fullTurns).
func thinOut(s *session) {
	total := 0
	for i := len(s.turns) - 1; i >= max(1, s.textFrom); i-- {
		total += len(s.turns[i].PromptText) + len(s.turns[i].Answer)
		if total <= keepText {
			continue
		}
		for j := max(1, s.textFrom); j <= i; j++ {
			s.turns[j].PromptText, s.turns[j].Answer, s.turns[j].ToolCalls = "", "", nil
		}
		s.textFrom = i + 1
		return
	}
}

// fullTurns is the session's turns with all their text: from memory while
// none was dropped, else from the store.
func (r *Recorder) fullTurns(ctx context.Context, s *session) []state.Turn {
	if s.textFrom <= 1 {
		return s.turns
	}
	turns, err := r.cfg.Store.Turns(ctx, s.rec.ClientID)
	if err != nil {
		r.log.Warn("read turns for a handoff; using what memory holds", "session", s.rec.ClientID, "err", err)
		return s.turns
	}
	return turns
}

// update applies a session/update: config reports to live, the rest to the
// running turn.
func (r *Recorder) update(ctx context.Context, ev event) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			wire.UpdateFields
		} `json:"params"`
	}
	if err := json.Unmarshal(ev.raw, &n); err != nil {
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
		r.mu.Lock()
		parent := r.kids[n.Params.SessionID]
		r.mu.Unlock()
		if parent != "" && (ev.update == "tool_call" || ev.update == "tool_call_update") {
			s = r.sessions[r.led.ClientOf(parent)] // a subagent's tool call belongs to its parent's turn
		}
	}
	if s == nil {
		return
	}
	u := n.Params.Update
	switch ev.update {
	case "config_option_update":
		if opts, ok := wire.ParseOptions(u.ConfigOptions); ok {
			s.rec.Live = withOptions(s.rec.Live, opts)
			r.putSession(ctx, s)
		}
	case "current_mode_update":
		if u.CurrentModeID == "" {
			return // no mode id: nothing the agent reported goes into live
		}
		s.rec.Live = withLegacy(s.rec.Live, "mode", u.CurrentModeID)
		r.putSession(ctx, s)
	case "agent_message_chunk":
		if s.turn != nil && u.Content.Type == "text" {
			s.turn.Answer += u.Content.Text
		}
	case "tool_call", "tool_call_update":
		if s.turn == nil {
			return
		}
		tc := findToolCall(s.turn, u.ToolCallID)
		if u.Title != nil {
			tc.Title = *u.Title
		}
		if u.Status != nil {
			tc.Status = *u.Status
		}
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

func (r *Recorder) putSession(ctx context.Context, s *session) {
	s.rec.Updated = r.cfg.Now()
	rec := s.rec
	rec.Original = nil // written once, by fixOriginal
	if s.started && s.rec.Original != nil {
		rec.Original = s.rec.Original
	}
	err := r.cfg.Store.PutSession(ctx, &rec)
	switch {
	case errors.Is(err, state.ErrDeleted):
		// Deleted while this process held it (`acp-sidecar delete` from the
		// shell, another sidecar): the store refuses its writes, and
		// nothing here writes it back.
		sid := s.rec.ClientID
		delete(r.sessions, sid)
		r.led.Update(func(f *ledger.Flight) { f.Forget(sid) })
		r.log.Info("session was deleted elsewhere; no longer recorded", "session", sid)
	case err != nil && !errors.Is(err, state.ErrOriginalExists):
		r.log.Warn("record session", "session", s.rec.ClientID, "err", err)
	}
}

func (r *Recorder) putTurn(ctx context.Context, s *session, t *state.Turn) {
	cp := *t
	// A prompt with a 20 MiB image is relayed whole, but the record keeps
	// its text, not its blocks: one turn must fit the store's value limit.
	if len(cp.Prompt) > maxRecordedText {
		cp.Prompt = nil
	}
	cp.PromptText = clip(cp.PromptText, maxRecordedText)
	cp.Answer = clipped(cp.Answer, answerBudget(r.cfg.HandoffBudget))
	if err := r.cfg.Store.PutTurn(ctx, s.rec.ClientID, &cp); err != nil {
		// The store's error can quote the value; the log never holds the
		// conversation, so only the error's kind is kept.
		r.log.Warn("record turn", "session", s.rec.ClientID, "turn", t.Index, "err", clip(err.Error(), 200))
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
func (r *Recorder) flush(ctx context.Context) {
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
func (r *Recorder) do(ctx context.Context, fn func(ctx context.Context)) error {
	done := make(chan struct{})
	ev := event{fn: func(ctx context.Context) {
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

func (r *Recorder) snapshot(ctx context.Context, sid string) (snapshot, error) {
	var snap snapshot
	err := r.onSession(ctx, sid, func(_ context.Context, s *session) { snap = snapshotOf(s) })
	return snap, err
}

// onSession runs fn on the recorder's goroutine with the session sid, or
// refuses when the recorder holds no such session.
func (r *Recorder) onSession(ctx context.Context, sid string, fn func(ctx context.Context, s *session)) error {
	found := false
	err := r.do(ctx, func(ctx context.Context) {
		if s := r.sessions[sid]; s != nil {
			found = true
			fn(ctx, s)
		}
	})
	if err == nil && !found {
		err = refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid)
	}
	return err
}

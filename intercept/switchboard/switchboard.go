package switchboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// How frames go (proxy.ClientPort draws the same):
//
//	client ─► port ─► clientFrame ─► agent a's relay (Feed) ─► chain ─► agent a
//	                              └► agent b's relay (Feed) ─► chain ─► agent b
//	client ◄─ port ◄─ a's slot.Egress ◄─ chain ◄─ agent a
//	               ◄─ b's slot.Egress ◄─ chain ◄─ agent b
//
// A client frame is read and scanned once, by the port, and handed to its
// agent's relay as it is. What an agent's relay writes to the client goes
// straight to the port through that agent's Egress, which does the
// switchboard's part: request ids of its own for the agents but the default
// one, the selector in config option lists and /agent in command lists,
// what the switchboard learns from responses, and no late frames of a
// session that moved away.

// SelectorID is the config option the sidecar adds to every configOptions
// list when several agents are configured: the agent the session runs on.
// Custom categories start with an underscore, as the protocol requires.
const SelectorID = "_sidecar_agent"

const (
	selectorCategory = "_agent"
	// askPrefix starts the ids the switchboard gives requests of agents
	// other than the default one, so the client never sees two pending
	// requests with the same id.
	askPrefix = `"acp-sidecar-agent:`
)

// Relay is what the switchboard needs of an agent's relay: a
// *proxy.Relay whose client side is the switchboard's port.
type Relay interface {
	// Feed hands the relay one client frame.
	Feed(ctx context.Context, f *proxy.Frame) error
	// CallAsClient sends a request of the switchboard's own through the
	// relay's chain, as the client's, and waits for its result.
	CallAsClient(ctx context.Context, method string, params, result any) error
}

var _ Relay = (*proxy.Relay)(nil)

// Backend is one running agent behind the switchboard.
type Backend struct {
	Rec   Recorder
	Relay Relay
	// Done is closed once the agent's relay has ended and its recorder
	// has finished.
	Done <-chan struct{}
	// Stop shuts the agent down, as the client's EOF does, and returns
	// once Done is closed.
	Stop func()
}

// AgentRef names one configured agent.
type AgentRef struct {
	Name    string
	Command []string
}

// Config wires a Switchboard.
type Config struct {
	// Agents in the order the selector lists them.
	Agents  []AgentRef
	Default string
	// Port is the client's side, which every agent's relay shares.
	Port *proxy.ClientPort
	// Start starts an agent with its relay and recorder. The relay's client
	// side is Port, and out is its Egress: what the relay writes to the
	// client goes through it. The switchboard initializes the agent
	// (except the default agent's first start, which the client
	// initializes).
	Start func(ctx context.Context, name string, out proxy.Egress) (*Backend, error)
	Store state.Store
	// Idle stops an agent no session uses after this long; 0 never does.
	Idle time.Duration
	// CallTimeout bounds the switchboard's own requests (an initialize);
	// 0 means intercept.DefaultCallTimeout.
	CallTimeout time.Duration
	Log         *slog.Logger
	// Strict makes an answer of the switchboard's own to a request an
	// agent owes the answer to a panic instead of a logged error, for
	// tests (proxy.Config.Strict).
	Strict bool
}

// Switchboard puts several agents behind one client.
type Switchboard struct {
	cfg Config
	log *slog.Logger
	ctx context.Context
	wg  sync.WaitGroup // the backends' watchers, the moves in progress, the store writes

	// route keeps the client's frames in order while a move finishes:
	// deciding where a frame goes and handing it over happen under it.
	route sync.Mutex

	seq atomic.Uint64

	// bound is the agent each client session runs on. It is never changed
	// in place: setBound replaces it, under mu, so an agent's frames read
	// it without the lock (boundNow).
	boundNow atomic.Pointer[map[string]string]

	mu         sync.Mutex
	slots      map[string]*slot
	bound      map[string]string       // client session id -> agent name; see boundNow
	moves      map[string]*pendingMove // sessions being moved
	pending    map[string]pendingReq   // client request id -> where it went
	asked      map[string]agentAsk     // our id for an agent's request -> whose and its own id
	initParams json.RawMessage
	closed     bool

	// answers holds each client request to one answer, the switchboard's
	// own and its agents' alike, by the ledger's Respond, as each agent's
	// chain holds the answers behind it (intercept.Chain.WithAnswers).
	answers *ledger.Ledger
}

// pendingMove is a session on its way to another agent.
type pendingMove struct {
	to     string
	queued [][]byte // the client's frames for the session, which wait for it
}

type pendingReq struct {
	agent, method, sid string
}

type agentAsk struct {
	agent string
	id    []byte
}

// New builds a switchboard; Run starts it.
func New(cfg Config) *Switchboard {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = intercept.DefaultCallTimeout
	}
	sw := &Switchboard{
		cfg: cfg, log: cfg.Log, ctx: context.Background(), slots: map[string]*slot{}, bound: map[string]string{},
		moves: map[string]*pendingMove{}, pending: map[string]pendingReq{}, asked: map[string]agentAsk{},
		answers: ledger.New(nil),
	}
	sw.boundNow.Store(&sw.bound)
	for _, a := range cfg.Agents {
		sw.slots[a.Name] = &slot{sw: sw, name: a.Name, command: a.Command}
	}
	return sw
}

// Run starts the default agent and relays until the client's input ends;
// then every agent is stopped and Run returns once they have ended.
func (sw *Switchboard) Run(ctx context.Context) error {
	sw.ctx = ctx
	if _, err := sw.ensure(ctx, sw.cfg.Default); err != nil {
		return fmt.Errorf("start %s: %w", sw.cfg.Default, err)
	}
	idleDone := make(chan struct{})
	idleCtx, stopIdle := context.WithCancel(ctx)
	go func() {
		defer close(idleDone)
		sw.idleLoop(idleCtx)
	}()
	err := sw.cfg.Port.Run(ctx, sw.clientFrame)
	if err != nil {
		err = fmt.Errorf("read the client: %w", err)
	}
	stopIdle()
	<-idleDone
	sw.mu.Lock()
	sw.closed = true // no agent starts from here on
	sw.mu.Unlock()
	for _, a := range sw.cfg.Agents {
		sl := sw.slots[a.Name]
		sl.start.Lock() // a start under way (a move's) ends first
		sw.mu.Lock()
		b := sl.b
		sw.mu.Unlock()
		if b != nil {
			b.Stop() // the client's EOF, as each relay expects it
		}
		sl.start.Unlock()
	}
	sw.wg.Wait()
	return errors.Join(err, sw.cfg.Port.Flush())
}

// respond is the one way the switchboard answers a client request it took
// itself: the answer and what goes with it (a move's update and reply
// text), as one run. A request the switchboard handed to an agent is that
// agent's to answer, through its relay, which holds it to one answer; the
// switchboard answering it too would be a second answer, so it is dropped
// and reported as the bug it is.
func (sw *Switchboard) respond(id []byte, lines ...[]byte) {
	key := ledger.Key(id)
	if q, ok := sw.answers.Request(key); ok && q.State == ledger.Sent {
		sw.bug("the switchboard answered a request an agent owes the answer to; its answer is dropped", id)
		return
	}
	if _, first := sw.answers.Respond(key); !first {
		sw.bug("the switchboard answered a request that had its answer already; its answer is dropped", id)
		return
	}
	for _, l := range lines {
		sw.send(l)
	}
}

// bug reports a broken rule of one answer per request: logged, or under
// Strict a panic.
func (sw *Switchboard) bug(msg string, id []byte) {
	if sw.cfg.Strict {
		panic(fmt.Sprintf("acp-sidecar: %s (id %s)", msg, id))
	}
	sw.log.Error(msg, "id", string(id))
}

// send writes one frame of the switchboard's own to the client.
func (sw *Switchboard) send(line []byte) {
	if err := sw.cfg.Port.Send(line); err != nil {
		sw.log.Warn("write to the client failed", "err", err)
	}
}

// setBound binds a client session to an agent. Called with sw.mu held.
func (sw *Switchboard) setBound(sid, agent string) {
	next := make(map[string]string, len(sw.bound)+1)
	for k, v := range sw.bound {
		next[k] = v
	}
	next[sid] = agent
	sw.bound = next
	sw.boundNow.Store(&next)
	for _, sl := range sw.slots {
		n := 0
		for _, a := range next {
			if a != sl.name {
				n++
			}
		}
		sl.elsewhere.Store(int32(n))
	}
}

func (sw *Switchboard) bind(sid, agent string) {
	if sid == "" {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.setBound(sid, agent)
}

// ensure returns the agent's running backend, starting and initializing
// it first when it is not running.
func (sw *Switchboard) ensure(ctx context.Context, name string) (*Backend, error) {
	sw.mu.Lock()
	sl := sw.slots[name]
	if sl == nil {
		sw.mu.Unlock()
		return nil, fmt.Errorf("no agent named %q", name)
	}
	if b := sl.b; b != nil {
		sw.mu.Unlock()
		return b, nil
	}
	sw.mu.Unlock()
	sl.start.Lock()
	defer sl.start.Unlock()
	sw.mu.Lock()
	if b := sl.b; b != nil || sw.closed {
		sw.mu.Unlock()
		if b == nil {
			return nil, errors.New("the sidecar is stopping")
		}
		return b, nil
	}
	initParams := sw.initParams
	sw.mu.Unlock()
	b, err := sw.cfg.Start(ctx, name, sl)
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", name, err)
	}
	sw.mu.Lock()
	sl.b, sl.used = b, time.Now()
	var sessions []string
	for sid, a := range sw.bound {
		if a == name {
			sessions = append(sessions, sid)
		}
	}
	sw.mu.Unlock()
	sw.wg.Go(func() { sw.watch(sl, b) })
	sw.log.Info("agent started", "agent", name)
	if initParams != nil {
		// The client initialized the agents before; this one gets the
		// same initialize, through its chain, so its recorder keeps it
		// for its restarts.
		var res json.RawMessage
		callCtx, cancel := context.WithTimeout(ctx, sw.cfg.CallTimeout)
		err := b.Relay.CallAsClient(callCtx, wire.Initialize, initParams, &res)
		cancel()
		if err != nil {
			b.Stop()
			return nil, fmt.Errorf("initialize agent %s: %w", name, err)
		}
		sw.learned(ctx, sl, res)
	}
	sw.mu.Lock()
	sl.used = time.Now() // the idle clock starts once the agent is ready
	sw.mu.Unlock()
	slices.Sort(sessions)
	for _, sid := range sessions {
		if err := b.Rec.Revive(ctx, sid); err != nil {
			sw.log.Warn("session not revived on the restarted agent", "agent", name, "session", sid, "err", err)
		}
	}
	return b, nil
}

// watch notes when a backend has ended, so whatever needs the agent next
// starts it again.
func (sw *Switchboard) watch(sl *slot, b *Backend) {
	<-b.Done
	sw.mu.Lock()
	if sl.b == b {
		sl.b = nil
	}
	sw.mu.Unlock()
	sw.log.Info("agent's relay ended", "agent", sl.name)
}

// learned keeps an agent's initialize result, in memory and in the store,
// so a later run can promise the client what every agent supports without
// starting them all.
func (sw *Switchboard) learned(ctx context.Context, sl *slot, res json.RawMessage) {
	res = bytes.Clone(res) // it may point into a reader's buffer
	sw.mu.Lock()
	sl.init = res
	sw.mu.Unlock()
	// Off the path of the frame that brought it: nothing waits for the cache.
	info := &state.AgentInfo{Name: sl.name, Command: sl.command, Init: res, Learned: time.Now()}
	sw.wg.Go(func() {
		if err := sw.cfg.Store.PutAgent(ctx, info); err != nil {
			sw.log.Warn("agent capabilities not cached", "agent", sl.name, "err", err)
		}
	})
}

func (sw *Switchboard) names() []string {
	out := make([]string, len(sw.cfg.Agents))
	for i, a := range sw.cfg.Agents {
		out[i] = a.Name
	}
	return out
}

// The agents' side: what each agent's relay writes to the client.

// agentFrame decides what the client sees of one agent frame; nil is
// nothing.
func (sw *Switchboard) agentFrame(ctx context.Context, sl *slot, f *proxy.Frame) []byte {
	env, line := &f.Env, f.Raw
	switch env.Kind {
	case proxy.KindResponse:
		sw.mu.Lock()
		req, ok := sw.pending[string(env.ID)]
		if ok {
			delete(sw.pending, string(env.ID))
		}
		sw.mu.Unlock()
		if ok {
			// The agent's chain held it to one answer already; the
			// switchboard's own answers meet the same ledger.
			if _, first := sw.answers.Respond(ledger.Key(env.ID)); !first {
				sw.bug("an agent answered a request the switchboard had answered; the agent's answer is dropped", env.ID)
				return nil
			}
		}
		if !ok || env.Error {
			return line
		}
		return sw.answered(ctx, sl, req, line)
	case proxy.KindRequest:
		if sl.name == sw.cfg.Default {
			return line
		}
		ask := askPrefix + strconv.FormatUint(sw.seq.Add(1), 10) + `"`
		out, err := wire.SetPath(line, []byte(ask), "id")
		if err != nil {
			sw.log.Warn("cannot give an agent's request an id of the switchboard's; dropped", "agent", sl.name, "err", err)
			return nil
		}
		sw.mu.Lock()
		sw.asked[ask] = agentAsk{agent: sl.name, id: bytes.Clone(env.ID)}
		sw.mu.Unlock()
		return out
	}
	if !env.MethodIs(wire.Update) {
		return line
	}
	if sw.late(sl, f) {
		return nil // a late frame of a native session the session left behind
	}
	switch string(env.Update) {
	case "config_option_update":
		return sw.withSelector(line, sl.name, "params", "update", "configOptions")
	case "available_commands_update":
		if out, err := wire.InsertArray(line, false, [][]byte{agentCommandJSON(sw.names())}, "params", "update", "availableCommands"); err == nil {
			return out
		}
	}
	return line
}

// late says whether an update is for a session bound to another agent that
// it is not joining: the frame comes from the native session the session
// left behind, which the client must not see.
func (sw *Switchboard) late(sl *slot, f *proxy.Frame) bool {
	if sl.elsewhere.Load() == 0 {
		return false
	}
	bound := *sw.boundNow.Load()
	var owner string
	var isBound bool
	if sid, plain := plainSessionID(f); plain {
		owner, isBound = bound[string(sid)] // no copy for the look-up
	} else {
		owner, isBound = bound[wire.SessionIDOf(f)]
	}
	if !isBound || owner == sl.name {
		return false
	}
	sid := wire.SessionIDOf(f)
	sw.mu.Lock()
	m := sw.moves[sid]
	owner = sw.bound[sid]
	sw.mu.Unlock()
	joining := m != nil && m.to == sl.name // the fresh native session's first frames
	return owner != sl.name && !joining
}

// answered adjusts the response to a client request the switchboard
// follows: it learns which agent a session runs on and shows the selector.
func (sw *Switchboard) answered(ctx context.Context, sl *slot, req pendingReq, line []byte) []byte {
	switch req.method {
	case wire.Initialize:
		sw.learned(ctx, sl, wire.Member(line, "result"))
		return sw.intersect(ctx, line)
	case wire.SessionNew, wire.SessionFork, wire.ExtFork:
		var res struct {
			Result struct {
				SessionID string `json:"sessionId"`
			} `json:"result"`
		}
		// A result without a string sessionId binds nothing.
		_ = json.Unmarshal(line, &res)
		sw.bind(res.Result.SessionID, sl.name)
	case wire.SessionLoad, wire.SessionResume:
		sw.bind(req.sid, sl.name)
	case wire.SetConfigOption:
	default:
		return line
	}
	return sw.withSelector(line, sl.name, "result", "configOptions")
}

// selectorJSON is the agent selector with current selected.
func (sw *Switchboard) selectorJSON(current string) []byte {
	opts := make([]map[string]any, 0, len(sw.cfg.Agents))
	for _, a := range sw.cfg.Agents {
		opts = append(opts, map[string]any{"value": a.Name, "name": a.Name, "description": strings.Join(a.Command, " ")})
	}
	b := wire.Encode(map[string]any{
		"id": SelectorID, "name": "Agent", "description": "acp-sidecar: the agent this session runs on; switching keeps the conversation",
		"category": selectorCategory, "type": "select", "currentValue": current, "options": opts,
	})
	return b
}

// withSelector appends the selector to the configOptions list at path, when
// there is one: an agent without config options keeps its legacy modes and
// models, which a list of the selector alone would hide in some editors.
func (sw *Switchboard) withSelector(line []byte, current string, path ...string) []byte {
	start, end, ok := wire.Find(line, path...)
	if !ok || wire.IsNull(line[start:end]) {
		return line
	}
	out, err := wire.InsertArray(line, false, [][]byte{sw.selectorJSON(current)}, path...)
	if err != nil {
		return line
	}
	return out
}

// The client's side: where each client frame goes.

// clientFrame decides where one client frame goes; it is the port's route.
// The frame was scanned once, by the port, and goes on to its agent's relay
// as it is.
func (sw *Switchboard) clientFrame(ctx context.Context, f *proxy.Frame) {
	env := &f.Env
	if env.Kind == proxy.KindResponse {
		sw.clientResponse(ctx, f)
		return
	}
	line := f.Raw
	sid := wire.SessionIDOf(f)
	method := string(env.Method)
	isReq := env.Kind == proxy.KindRequest
	if isReq {
		sw.answers.Take(ledger.Key(env.ID), method, sid)
		switch method {
		case wire.Initialize:
			var p struct {
				Params json.RawMessage `json:"params"`
			}
			// A frame that scanned is valid JSON, and params of any
			// shape decode into a RawMessage.
			_ = json.Unmarshal(line, &p)
			sw.mu.Lock()
			sw.initParams = wire.CompactJSON(p.Params)
			sw.mu.Unlock()
		case wire.SetConfigOption:
			if id, value, ok := selectorChoice(line); ok && id == SelectorID {
				sw.startMove(ctx, env.ID, sid, value, false)
				return
			}
		case wire.Prompt:
			if name, ok := agentSlash(line); ok {
				sw.startMove(ctx, env.ID, sid, name, true)
				return
			}
		case wire.ExtAgent:
			var p struct {
				Params struct {
					Agent string `json:"agent"`
				} `json:"params"`
			}
			// A params member that is no object leaves Agent empty,
			// which the move refuses by name.
			_ = json.Unmarshal(line, &p)
			sw.startMove(ctx, env.ID, sid, p.Params.Agent, false)
			return
		}
	}
	var recorded string
	if isReq && (method == wire.SessionLoad || method == wire.SessionResume) {
		recorded = sw.recordedAgent(ctx, sid)
	}
	sw.route.Lock()
	defer sw.route.Unlock()
	sw.mu.Lock()
	if m := sw.moves[sid]; m != nil {
		m.queued = append(m.queued, bytes.Clone(line))
		sw.mu.Unlock()
		return
	}
	target := sw.targetOf(method, sid, line, recorded)
	sw.mu.Unlock()
	if isReq && method == wire.Prompt {
		if err := sw.checkContent(target, line); err != nil {
			sw.respond(env.ID, proxy.ErrorResponse(env.ID, proxy.CodeInvalidParams, err.Error()))
			return
		}
	}
	var req *pendingReq
	if isReq {
		req = &pendingReq{agent: target, method: method, sid: sid}
	}
	sw.toAgent(ctx, target, f, req)
}

// targetOf is the agent a client request or notification goes to;
// recorded is the agent the record names for a session being loaded.
// Called with sw.mu held.
func (sw *Switchboard) targetOf(method, sid string, line []byte, recorded string) string {
	if method == "$/cancel_request" {
		var p struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		// Without a readable requestId the default agent gets it.
		_ = json.Unmarshal(line, &p)
		if r, ok := sw.pending[string(wire.CompactJSON(p.Params.RequestID))]; ok {
			return r.agent
		}
		return sw.cfg.Default
	}
	if a, ok := sw.bound[sid]; ok && sid != "" {
		return a
	}
	if recorded != "" {
		return recorded
	}
	return sw.cfg.Default
}

// recordedAgent is the configured agent the record says a session runs
// on, "" when there is none: a session this process has not seen goes
// there, and one whose agent is no longer configured goes to the default
// agent, whose recorder rebuilds it with a handoff.
func (sw *Switchboard) recordedAgent(ctx context.Context, sid string) string {
	sw.mu.Lock()
	_, bound := sw.bound[sid]
	sw.mu.Unlock()
	if bound || sid == "" {
		return ""
	}
	rec, err := sw.cfg.Store.Session(ctx, sid)
	if err != nil {
		return ""
	}
	if sw.slots[rec.AgentName] == nil {
		sw.log.Info("the session's recorded agent is not configured; it goes to the default agent", "session", sid, "recorded", rec.AgentName)
		return ""
	}
	return rec.AgentName
}

// clientResponse sends the client's answer to the agent that asked.
func (sw *Switchboard) clientResponse(ctx context.Context, f *proxy.Frame) {
	if !bytes.HasPrefix(f.Env.ID, []byte(askPrefix)) {
		sw.toAgent(ctx, sw.cfg.Default, f, nil)
		return
	}
	sw.mu.Lock()
	a, ok := sw.asked[string(f.Env.ID)]
	delete(sw.asked, string(f.Env.ID))
	sw.mu.Unlock()
	if !ok {
		sw.log.Warn("client answered a request nobody is waiting for; dropped")
		return
	}
	out, err := wire.SetPath(f.Raw, a.id, "id")
	if err != nil {
		sw.log.Warn("cannot give a client answer its agent's id back; dropped", "err", err)
		return
	}
	env, err := proxy.Scan(out)
	if err != nil {
		sw.log.Warn("a client answer with its agent's id back is not valid; dropped", "err", err)
		return
	}
	sw.toAgent(ctx, a.agent, &proxy.Frame{Dir: proxy.ClientToAgent, Raw: out, Env: env}, nil)
}

// toAgent hands a client frame to an agent's relay, starting the agent if
// it is not running. A request that cannot be delivered is answered.
func (sw *Switchboard) toAgent(ctx context.Context, name string, f *proxy.Frame, req *pendingReq) {
	var id []byte
	if req != nil {
		id = f.Env.ID
	}
	var err error
	for try := 0; try < 2; try++ {
		// The request counts as in flight before the agent is looked up,
		// so the idle stop passes the agent over from here on.
		sw.mu.Lock()
		if id != nil {
			sw.pending[string(id)] = *req
			sw.atAgent(id, req, ledger.Sent)
		}
		if sl := sw.slots[name]; sl != nil {
			sl.used = time.Now()
		}
		sw.mu.Unlock()
		var b *Backend
		if b, err = sw.ensure(ctx, name); err == nil {
			if err = b.Relay.Feed(ctx, f); err == nil {
				return
			}
		}
		if id != nil {
			sw.mu.Lock()
			delete(sw.pending, string(id))
			sw.atAgent(id, req, ledger.Taken)
			sw.mu.Unlock()
		}
		if !errors.Is(err, proxy.ErrClosed) {
			break // a closed relay is an agent stopped meanwhile: start it again once
		}
	}
	if id != nil {
		sw.respond(id, proxy.ErrorResponse(id, proxy.CodeAgentGone, fmt.Sprintf("acp-sidecar: agent %s is not running: %v", name, err)))
	}
}

// atAgent notes in the answers whether the client request under id is an
// agent's to answer (ledger.Sent) or the switchboard's (ledger.Taken).
func (sw *Switchboard) atAgent(id []byte, req *pendingReq, st ledger.State) {
	sw.answers.Update(func(f *ledger.Flight) { f.Requests.Note(ledger.Key(id), req.method, req.sid).State = st })
}

// Moves: a session from one agent to another (/agent, the selector).

// startMove runs a move on a goroutine of its own, so the client's other
// sessions go on meanwhile; the moving session's frames wait for it.
func (sw *Switchboard) startMove(ctx context.Context, id []byte, sid, name string, slash bool) {
	id = append([]byte(nil), id...)
	var update []byte // what the client must be told of the session's options after a move
	reply := func(text string, result []byte, err error) {
		switch {
		case slash:
			if err != nil {
				text = "acp-sidecar: /agent failed: " + err.Error()
			}
			var lines [][]byte
			if update != nil {
				lines = append(lines, update)
			}
			lines = append(lines,
				wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}),
				wire.Response(id, []byte(`{"stopReason":"end_turn"}`)))
			sw.respond(id, lines...)
		case err != nil:
			sw.respond(id, proxy.ErrorResponse(id, wire.CodeOf(err), "acp-sidecar: "+err.Error()))
		default:
			sw.respond(id, wire.Response(id, result))
		}
	}
	if slash && name == "" {
		sw.mu.Lock()
		cur := sw.bound[sid]
		sw.mu.Unlock()
		reply(fmt.Sprintf("acp-sidecar: this session runs on %s. Agents: %s. Send /agent NAME to move it; the kept turns go with it.", cur, strings.Join(sw.names(), ", ")), nil, nil)
		return
	}
	switch {
	case sid == "":
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: a switch of agent needs a sessionId"))
		return
	case sw.slots[name] == nil:
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "Invalid params: no agent named %q; the agents are %s", name, strings.Join(sw.names(), ", ")))
		return
	}
	sw.mu.Lock()
	from, known := sw.bound[sid]
	_, busy := sw.moves[sid]
	if known && !busy {
		sw.moves[sid] = &pendingMove{to: name} // from here on, settleMove must run
	}
	sw.mu.Unlock()
	switch {
	case !known:
		reply("", nil, wire.Refuse(proxy.CodeInvalidParams, "acp-sidecar knows no session %q", sid))
		return
	case busy:
		reply("", nil, wire.Refuse(proxy.CodeBusy, "this session is already moving to another agent"))
		return
	}
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		rep, err := sw.move(ctx, sid, from, name)
		sw.settleMove(ctx, sid)
		if err != nil {
			sw.log.Error("agent switch failed; the session stays where it was", "session", sid, "from", from, "to", name, "err", err)
			reply("", nil, err)
			return
		}
		text := rep.Text(from)
		if from == name {
			text = "acp-sidecar: this session already runs on " + name + "."
		}
		opts := sw.optionsWithSelector(rep.Options, name)
		result := wire.Encode(map[string]any{"configOptions": opts, "_meta": map[string]any{"acp-sidecar": rep}})
		// A set_config_option answer carries the new list; a slash
		// command's answer cannot, so the list goes out as an update.
		update = wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "config_option_update", "configOptions": opts})
		reply(text, result, nil)
	}()
}

// move takes sid from one agent to another: the target is started if it
// must be, the source lends the session, the target adopts it, and only
// then does the session's traffic go to the target. A failure leaves the
// session where it was.
func (sw *Switchboard) move(ctx context.Context, sid, from, to string) (rebuild.SwitchReport, error) {
	// Both agents' idle clocks start again once the move is over.
	defer func() {
		sw.mu.Lock()
		sw.slots[from].used, sw.slots[to].used = time.Now(), time.Now()
		sw.mu.Unlock()
	}()
	target, err := sw.ensure(ctx, to)
	if err != nil {
		return rebuild.SwitchReport{}, err
	}
	if from == to {
		opts, err := target.Rec.ConfigOptions(ctx, sid)
		return rebuild.SwitchReport{SessionID: sid, Agent: to, Options: opts}, err
	}
	if err := sw.mcpFits(ctx, sid, to); err != nil {
		return rebuild.SwitchReport{}, err
	}
	done := func(bool) {}
	sw.mu.Lock()
	source := sw.slots[from].b
	sw.mu.Unlock()
	if source != nil {
		if done, err = source.Rec.Lend(ctx, sid); err != nil {
			return rebuild.SwitchReport{}, err
		}
	}
	rep, err := target.Rec.Adopt(ctx, sid)
	done(err == nil)
	if err != nil {
		return rebuild.SwitchReport{}, err
	}
	sw.mu.Lock()
	sw.setBound(sid, to)
	sw.mu.Unlock()
	sw.log.Info("session moved", "session", sid, "from", from, "to", to)
	return rep, nil
}

// settleMove lets the frames that waited for a move go on, in order, to
// wherever the session is now.
func (sw *Switchboard) settleMove(ctx context.Context, sid string) {
	sw.route.Lock()
	defer sw.route.Unlock()
	sw.mu.Lock()
	queued := sw.moves[sid].queued
	delete(sw.moves, sid)
	target := sw.bound[sid]
	sw.mu.Unlock()
	for _, line := range queued {
		// Scanned once on its way in; the copy that waited is scanned
		// again, as the envelope pointed into the port's buffer.
		env, err := proxy.Scan(line)
		if err != nil {
			continue
		}
		var req *pendingReq
		if env.Kind == proxy.KindRequest {
			req = &pendingReq{agent: target, method: string(env.Method), sid: sid}
		}
		sw.toAgent(ctx, target, &proxy.Frame{Dir: proxy.ClientToAgent, Raw: line, Env: env}, req)
	}
}

// optionsWithSelector is an agent's configOptions list with the selector
// last; a list the agent does not have is the selector alone, since the
// client that asked uses config options.
func (sw *Switchboard) optionsWithSelector(opts json.RawMessage, current string) json.RawMessage {
	var list []json.RawMessage
	// A list that is not one (or none) leaves the selector alone.
	_ = json.Unmarshal(opts, &list)
	list = append(list, sw.selectorJSON(current))
	b := wire.Encode(list)
	return b
}

// initOf is what an agent said in its initialize: from this run, else from
// the store when the same command said it before, else from a start now.
func (sw *Switchboard) initOf(ctx context.Context, name string) (json.RawMessage, error) {
	sw.mu.Lock()
	sl := sw.slots[name]
	init := sl.init
	sw.mu.Unlock()
	if init != nil {
		return init, nil
	}
	if info, err := sw.cfg.Store.Agent(ctx, name); err == nil && slices.Equal(info.Command, sl.command) && len(info.Init) > 0 {
		return info.Init, nil
	}
	if _, err := sw.ensure(ctx, name); err != nil {
		return nil, err
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sl.init == nil {
		return nil, fmt.Errorf("agent %s did not say what it supports", name)
	}
	return sl.init, nil
}

// intersect makes the client's initialize result promise only what every
// configured agent supports, so a session can move anywhere; it also names
// the agents for orchestrators.
func (sw *Switchboard) intersect(ctx context.Context, line []byte) []byte {
	all := promised{prompt: map[string]bool{}, mcp: map[string]bool{}}
	for _, k := range promptKinds {
		all.prompt[k] = true
	}
	for _, k := range mcpKinds {
		all.mcp[k] = true
	}
	for _, a := range sw.cfg.Agents {
		init, err := sw.initOf(ctx, a.Name)
		if err != nil {
			sw.log.Warn("agent capabilities unknown; promising the client none of the optional ones", "agent", a.Name, "err", err)
		}
		p := promisedBy(init)
		for _, k := range promptKinds {
			all.prompt[k] = all.prompt[k] && p.prompt[k]
		}
		for _, k := range mcpKinds {
			all.mcp[k] = all.mcp[k] && p.mcp[k]
		}
	}
	mine := promisedBy(wire.Member(line, "result"))
	out := line
	for _, k := range promptKinds {
		if mine.prompt[k] && !all.prompt[k] {
			out = setOr(out, []byte("false"), "result", "agentCapabilities", "promptCapabilities", k)
		}
	}
	for _, k := range mcpKinds {
		if mine.mcp[k] && !all.mcp[k] {
			out = setOr(out, []byte("false"), "result", "agentCapabilities", "mcpCapabilities", k)
		}
	}
	names := wire.Encode(sw.names())
	out = setOr(out, names, "result", "agentCapabilities", "_meta", "acp-sidecar", "agents")
	if more, err := wire.InsertArray(out, false, [][]byte{[]byte(`"` + wire.ExtAgent + `"`)}, "result", "agentCapabilities", "_meta", "acp-sidecar", "methods"); err == nil {
		out = more
	}
	def := wire.Encode(sw.cfg.Default)
	return setOr(out, def, "result", "agentCapabilities", "_meta", "acp-sidecar", "defaultAgent")
}

// checkContent refuses a prompt whose content the agent cannot take, with a
// clear error, rather than let the agent drop it silently.
func (sw *Switchboard) checkContent(agent string, line []byte) error {
	sw.mu.Lock()
	init := sw.slots[agent].init
	sw.mu.Unlock()
	if init == nil {
		return nil // not known yet: the agent answers for itself
	}
	caps := promisedBy(init)
	var p struct {
		Params struct {
			Prompt []struct {
				Type string `json:"type"`
			} `json:"prompt"`
		} `json:"params"`
	}
	// A prompt whose blocks cannot be read goes on; its agent answers it.
	_ = json.Unmarshal(line, &p)
	for _, b := range p.Params.Prompt {
		need := map[string]string{"image": "image", "audio": "audio", "resource": "embeddedContext"}[b.Type]
		if need != "" && !caps.prompt[need] {
			return wire.Refuse(proxy.CodeInvalidParams, "Invalid params: acp-sidecar: agent %s does not accept %s content (promptCapabilities.%s); the prompt was not sent", agent, b.Type, need)
		}
	}
	return nil
}

// mcpFits refuses a move to an agent that cannot connect the session's MCP
// servers by their transport.
func (sw *Switchboard) mcpFits(ctx context.Context, sid, agent string) error {
	rec, err := sw.cfg.Store.Session(ctx, sid)
	if err != nil {
		return nil // the adopting recorder reports a missing record
	}
	var servers []struct {
		Type string `json:"type"`
	}
	// Servers that cannot be read are none the move must check.
	_ = json.Unmarshal(rec.McpServers, &servers)
	init, err := sw.initOf(ctx, agent)
	if err != nil {
		return err
	}
	caps := promisedBy(init)
	for _, s := range servers {
		if (s.Type == "http" || s.Type == "sse") && !caps.mcp[s.Type] {
			return wire.Refuse(proxy.CodeInvalidParams, "agent %s cannot connect this session's %s MCP servers (mcpCapabilities.%s); the session stays where it is", agent, s.Type, s.Type)
		}
	}
	return nil
}

// Idle agents: stopped once no session has used them for a while.

// idleLoop stops agents that no session uses, once they have been unused
// for the idle time; they start again when something needs them.
func (sw *Switchboard) idleLoop(ctx context.Context) {
	if sw.cfg.Idle <= 0 {
		return
	}
	tick := time.NewTicker(min(max(sw.cfg.Idle/4, 10*time.Millisecond), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, sl := range sw.idle(time.Now()) {
			sw.stop(sl)
		}
	}
}

// idle lists the running agents with no session, no request in flight and
// no traffic for the idle time.
func (sw *Switchboard) idle(now time.Time) []*slot {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	used := map[string]bool{}
	for _, a := range sw.bound {
		used[a] = true
	}
	for _, r := range sw.pending {
		used[r.agent] = true
	}
	for _, m := range sw.moves {
		used[m.to] = true // the agent a session leaves is still its bound one
	}
	var out []*slot
	for _, sl := range sw.slots {
		if sl.b != nil && !used[sl.name] && now.Sub(sl.used) >= sw.cfg.Idle {
			out = append(out, sl)
		}
	}
	return out
}

func (sw *Switchboard) stop(sl *slot) {
	sl.start.Lock()
	defer sl.start.Unlock()
	sw.mu.Lock()
	b := sl.b
	sl.b = nil // whatever needs the agent from now on waits for a fresh start
	sw.mu.Unlock()
	if b == nil {
		return
	}
	sw.log.Info("stopping an agent no session uses", "agent", sl.name, "idle", sw.cfg.Idle.String())
	b.Stop()
}

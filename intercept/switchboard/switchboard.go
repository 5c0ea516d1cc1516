package switchboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// One conversation can move between agents (Claude to draft, Codex to
// review) while the editor sees one agent and one session. Each configured
// agent runs behind a relay and a recorder of its own, exactly as a single
// agent would: the switchboard is their one client. It routes the editor's
// frames by session to the agent the session runs on, merges the agents'
// frames back into one stream, keeps their request ids apart, and moves a
// session when the client picks another agent.

// SelectorID is the config option the sidecar adds to every configOptions
// list when several agents are configured: the agent the session runs on.
// Custom categories start with an underscore, as the protocol requires.
const SelectorID = "_sidecar_agent"

const (
	selectorCategory = "_agent"
	// Ids of the switchboard's own requests to an agent's relay, and the
	// ids it gives requests of agents other than the default one, so the
	// client never sees two pending requests with the same id.
	ownSwitchPrefix = `"acp-sidecar-switch:`
	askPrefix       = `"acp-sidecar-agent:`
)

// Backend is one running agent behind the switchboard.
type Backend struct {
	Rec Recorder
	// In is the backend relay's client input; Out is what that relay
	// writes to its client, and ends when the relay has ended.
	In  io.WriteCloser
	Out io.Reader
	// Stop shuts the agent down, as the client's EOF does, and returns
	// once its relay has ended.
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
	// Start starts an agent with its relay and recorder. The switchboard
	// initializes it (except the default agent's first start, which the
	// client initializes).
	Start func(ctx context.Context, name string) (*Backend, error)
	Store state.Store
	// Idle stops an agent no session uses after this long; 0 never does.
	Idle time.Duration
	// CallTimeout bounds the switchboard's own requests (an initialize);
	// 0 means intercept.DefaultCallTimeout.
	CallTimeout time.Duration
	MaxFrame    int
	Log         *slog.Logger
}

// Switchboard puts several agents behind one client.
type Switchboard struct {
	cfg Config
	log *slog.Logger
	ctx context.Context
	wg  sync.WaitGroup // the agents' readers and the moves in progress

	outMu sync.Mutex
	out   io.Writer

	// route keeps the client's frames in order while a move finishes:
	// deciding where a frame goes and writing it happen under it.
	route sync.Mutex

	seq atomic.Uint64

	mu         sync.Mutex
	slots      map[string]*slot
	bound      map[string]string       // client session id -> agent name
	moves      map[string]*pendingMove // sessions being moved
	pending    map[string]pendingReq   // client request id -> where it went
	asked      map[string]agentAsk     // our id for an agent's request -> whose and its own id
	calls      map[string]chan []byte
	initParams json.RawMessage
	closed     bool
}

// slot is one configured agent, running or not.
type slot struct {
	name    string
	command []string
	start   sync.Mutex // one start or stop at a time

	// Guarded by Switchboard.mu.
	b    *Backend
	init json.RawMessage // its initialize result, once known
	used time.Time       // the last time a frame went to it or a session left it
	done chan struct{}   // closed when the running backend's reader ends
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
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = proxy.DefaultMaxFrame
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = intercept.DefaultCallTimeout
	}
	sw := &Switchboard{
		cfg: cfg, log: cfg.Log, slots: map[string]*slot{}, bound: map[string]string{}, moves: map[string]*pendingMove{},
		pending: map[string]pendingReq{}, asked: map[string]agentAsk{}, calls: map[string]chan []byte{},
	}
	for _, a := range cfg.Agents {
		sw.slots[a.Name] = &slot{name: a.Name, command: a.Command}
	}
	return sw
}

// Run starts the default agent and relays until the client's input ends;
// then every agent is stopped and Run returns once their relays have ended.
func (sw *Switchboard) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	sw.ctx, sw.out = ctx, out
	if _, err := sw.ensure(ctx, sw.cfg.Default); err != nil {
		return fmt.Errorf("start %s: %w", sw.cfg.Default, err)
	}
	idleDone := make(chan struct{})
	idleCtx, stopIdle := context.WithCancel(ctx)
	go func() {
		defer close(idleDone)
		sw.idleLoop(idleCtx)
	}()
	err := sw.fromClient(ctx, in)
	stopIdle()
	<-idleDone
	sw.mu.Lock()
	sw.closed = true
	var running []*slot
	for _, sl := range sw.slots {
		if sl.b != nil {
			running = append(running, sl)
		}
	}
	sw.mu.Unlock()
	for _, sl := range running {
		sw.mu.Lock()
		b, done := sl.b, sl.done
		sw.mu.Unlock()
		if b == nil {
			continue
		}
		b.In.Close() // the client's EOF, as each relay expects it
		<-done
	}
	sw.wg.Wait()
	return err
}

// fromClient reads the editor's frames until its input ends.
func (sw *Switchboard) fromClient(ctx context.Context, in io.Reader) error {
	// Lines a little longer than the limit still reach a relay, which
	// answers them with its own clear error; longer ones are answered here.
	lr := proxy.NewLineReader(in, sw.cfg.MaxFrame+1<<20)
	for {
		line, err := lr.Next()
		if err != nil {
			var tooLarge *proxy.TooLargeError
			if errors.As(err, &tooLarge) {
				env := proxy.ScanPrefix(tooLarge.Head)
				if env.Kind == proxy.KindRequest {
					sw.send(proxy.ErrorResponse(env.ID, proxy.CodeInvalidRequest, fmt.Sprintf("Invalid request: frame of %d bytes exceeds the sidecar's limit of %d bytes (--max-frame)", tooLarge.Size, sw.cfg.MaxFrame)))
				}
				continue
			}
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read the client: %w", err)
		}
		sw.clientFrame(ctx, line)
	}
}

// clientFrame decides where one client frame goes.
func (sw *Switchboard) clientFrame(ctx context.Context, line []byte) {
	env, err := proxy.Scan(line)
	if err != nil {
		// The default agent's relay answers it with a parse error, as it
		// does for a single agent; nothing malformed reaches an agent.
		sw.toAgent(ctx, sw.cfg.Default, line, nil)
		return
	}
	if env.Kind == proxy.KindResponse {
		sw.clientResponse(ctx, line, &env)
		return
	}
	f := &proxy.Frame{Dir: proxy.ClientToAgent, Raw: line, Env: env}
	sid := wire.SessionIDOf(f)
	method := string(env.Method)
	isReq := env.Kind == proxy.KindRequest
	if isReq {
		switch method {
		case wire.Initialize:
			var p struct {
				Params json.RawMessage `json:"params"`
			}
			json.Unmarshal(line, &p)
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
			json.Unmarshal(line, &p)
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
			sw.send(proxy.ErrorResponse(env.ID, proxy.CodeInvalidParams, err.Error()))
			return
		}
	}
	var req *pendingReq
	if isReq {
		req = &pendingReq{agent: target, method: method, sid: sid}
	}
	sw.toAgent(ctx, target, line, req)
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
		json.Unmarshal(line, &p)
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
func (sw *Switchboard) clientResponse(ctx context.Context, line []byte, env *proxy.Envelope) {
	if !bytes.HasPrefix(env.ID, []byte(askPrefix)) {
		sw.toAgent(ctx, sw.cfg.Default, line, nil)
		return
	}
	sw.mu.Lock()
	a, ok := sw.asked[string(env.ID)]
	delete(sw.asked, string(env.ID))
	sw.mu.Unlock()
	if !ok {
		sw.log.Warn("client answered a request nobody is waiting for; dropped")
		return
	}
	out, err := wire.SetPath(line, a.id, "id")
	if err != nil {
		sw.log.Warn("cannot give a client answer its agent's id back; dropped", "err", err)
		return
	}
	sw.toAgent(ctx, a.agent, out, nil)
}

// toAgent writes a client frame to an agent's relay, starting the agent if
// it is not running. A request that cannot be delivered is answered.
func (sw *Switchboard) toAgent(ctx context.Context, name string, line []byte, req *pendingReq) {
	var id []byte
	if req != nil {
		env, _ := proxy.Scan(line)
		id = env.ID
	}
	var err error
	for try := 0; try < 2; try++ {
		// The request counts as in flight before the agent is looked up,
		// so the idle stop passes the agent over from here on.
		sw.mu.Lock()
		if id != nil {
			sw.pending[string(id)] = *req
		}
		if sl := sw.slots[name]; sl != nil {
			sl.used = time.Now()
		}
		sw.mu.Unlock()
		var b *Backend
		if b, err = sw.ensure(ctx, name); err == nil {
			if err = writeLine(b.In, line); err == nil {
				return
			}
		}
		if id != nil {
			sw.mu.Lock()
			delete(sw.pending, string(id))
			sw.mu.Unlock()
		}
		if !errors.Is(err, io.ErrClosedPipe) {
			break // a closed pipe is an agent stopped meanwhile: start it again once
		}
	}
	if id != nil {
		sw.send(proxy.ErrorResponse(id, proxy.CodeAgentGone, fmt.Sprintf("acp-sidecar: agent %s is not running: %v", name, err)))
	}
}

func writeLine(w io.Writer, line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	_, err := w.Write(buf)
	return err
}

// send writes one frame to the client.
func (sw *Switchboard) send(line []byte) {
	sw.outMu.Lock()
	defer sw.outMu.Unlock()
	if err := writeLine(sw.out, line); err != nil {
		sw.log.Warn("write to the client failed", "err", err)
	}
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
	b, err := sw.cfg.Start(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", name, err)
	}
	done := make(chan struct{})
	sw.mu.Lock()
	sl.b, sl.done, sl.used = b, done, time.Now()
	var sessions []string
	for sid, a := range sw.bound {
		if a == name {
			sessions = append(sessions, sid)
		}
	}
	sw.mu.Unlock()
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		defer close(done)
		sw.fromAgent(ctx, sl, b)
	}()
	sw.log.Info("agent started", "agent", name)
	if initParams != nil {
		// The client initialized the agents before; this one gets the
		// same initialize, and its recorder keeps it for its restarts.
		res, err := sw.call(ctx, b, wire.Initialize, initParams)
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

// call sends the switchboard's own request to an agent's relay and waits
// for its result.
func (sw *Switchboard) call(ctx context.Context, b *Backend, method string, params json.RawMessage) (json.RawMessage, error) {
	id := ownSwitchPrefix + strconv.FormatUint(sw.seq.Add(1), 10) + `"`
	ch := make(chan []byte, 1)
	sw.mu.Lock()
	sw.calls[id] = ch
	sw.mu.Unlock()
	defer func() {
		sw.mu.Lock()
		delete(sw.calls, id)
		sw.mu.Unlock()
	}()
	req, _ := wire.MarshalNoEscape(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": json.RawMessage(params)})
	if err := writeLine(b.In, req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, sw.cfg.CallTimeout)
	defer cancel()
	select {
	case line := <-ch:
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: %s (%d)", method, resp.Error.Message, resp.Error.Code)
		}
		return resp.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// fromAgent relays one agent's frames to the client until its relay ends.
func (sw *Switchboard) fromAgent(ctx context.Context, sl *slot, b *Backend) {
	lr := proxy.NewLineReader(b.Out, sw.cfg.MaxFrame+1<<20)
	for {
		line, err := lr.Next()
		if err != nil {
			var tooLarge *proxy.TooLargeError
			if errors.As(err, &tooLarge) {
				continue // the agent's relay passed it; nothing waits that can be named
			}
			break
		}
		if out := sw.agentFrame(ctx, sl, line); out != nil {
			sw.send(out)
		}
	}
	sw.mu.Lock()
	if sl.b == b {
		sl.b = nil
	}
	sw.mu.Unlock()
	sw.log.Info("agent's relay ended", "agent", sl.name)
}

// agentFrame decides what the client sees of one agent frame; nil is nothing.
func (sw *Switchboard) agentFrame(ctx context.Context, sl *slot, line []byte) []byte {
	env, err := proxy.Scan(line)
	if err != nil {
		return nil // a relay never writes one; nothing malformed reaches the client
	}
	switch env.Kind {
	case proxy.KindResponse:
		id := string(env.ID)
		if strings.HasPrefix(id, ownSwitchPrefix) {
			sw.mu.Lock()
			ch := sw.calls[id]
			sw.mu.Unlock()
			if ch != nil {
				ch <- bytes.Clone(line)
			}
			return nil
		}
		sw.mu.Lock()
		req, ok := sw.pending[id]
		delete(sw.pending, id)
		sw.mu.Unlock()
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
	f := &proxy.Frame{Raw: line, Env: env}
	sid := wire.SessionIDOf(f)
	sw.mu.Lock()
	owner, isBound := sw.bound[sid]
	m := sw.moves[sid]
	joining := m != nil && m.to == sl.name // the fresh native session's first frames
	sw.mu.Unlock()
	if isBound && owner != sl.name && !joining {
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
		json.Unmarshal(line, &res)
		sw.bind(res.Result.SessionID, sl.name)
	case wire.SessionLoad, wire.SessionResume:
		sw.bind(req.sid, sl.name)
	case wire.SetConfigOption:
	default:
		return line
	}
	return sw.withSelector(line, sl.name, "result", "configOptions")
}

func (sw *Switchboard) bind(sid, agent string) {
	if sid == "" {
		return
	}
	sw.mu.Lock()
	sw.bound[sid] = agent
	sw.mu.Unlock()
}

func (sw *Switchboard) names() []string {
	out := make([]string, len(sw.cfg.Agents))
	for i, a := range sw.cfg.Agents {
		out[i] = a.Name
	}
	return out
}

// selectorJSON is the agent selector with current selected.
func (sw *Switchboard) selectorJSON(current string) []byte {
	opts := make([]map[string]any, 0, len(sw.cfg.Agents))
	for _, a := range sw.cfg.Agents {
		opts = append(opts, map[string]any{"value": a.Name, "name": a.Name, "description": strings.Join(a.Command, " ")})
	}
	b, _ := wire.MarshalNoEscape(map[string]any{
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

// agentCommandJSON is the /agent entry of a command list.
func agentCommandJSON(names []string) []byte {
	b, _ := wire.MarshalNoEscape(map[string]any{
		"name":        "agent",
		"description": "acp-sidecar: move this session to another agent (" + strings.Join(names, ", ") + "); the kept turns go with it",
		"input":       map[string]any{"hint": "NAME"},
	})
	return b
}

// selectorChoice reads a set_config_option's configId and string value.
func selectorChoice(line []byte) (id, value string, ok bool) {
	var p struct {
		Params struct {
			ConfigID string          `json:"configId"`
			Value    json.RawMessage `json:"value"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &p) != nil {
		return "", "", false
	}
	return p.Params.ConfigID, wire.Unquote(p.Params.Value), true
}

package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

var (
	_ acp.Agent                  = (*agent)(nil)
	_ acp.AgentLoader            = (*agent)(nil)
	_ acp.ExtensionMethodHandler = (*agent)(nil)
)

// ThreadNotFound is the error a prompt on a session the agent resumed
// without knowing it gets (-resume-lies), as codex-acp 2.6.0 answers it.
func ThreadNotFound(sid string) *acp.RequestError {
	return &acp.RequestError{Code: -32603, Message: "Internal error", Data: map[string]any{"details": "thread not found: " + sid}}
}

// agent is one fake agent process, as the SDK connection sees it: the ACP
// methods on sessions, and what goes out with each answer (frameLine). The
// rest has owners of its own, which newAgent wires together:
//
//	sessions  every session, and -state (store.go, state.go, delete.go)
//	flight    the client's requests not answered yet (inflight.go)
//	queue     prompts waiting behind their session's turn (queue.go)
//	turns     session/prompt and its quirks (prompt.go)
//	peer      what the client's initialize said (peer.go)
//	crash     abrupt exits (die.go)
//	v2        ACP v2 at the stdio edges (v2.go)
//	w         stdout, one whole line at a time (wire.go)
//
// and the stdin reader (wire.go), which Main starts, feeds them all.
type agent struct {
	cfg    config
	cat    *catalog
	conn   *acp.AgentSideConnection // set by connect, before stdin is read
	w      *lineWriter
	calls  callLog
	stderr io.Writer

	sessions *sessionStore
	flight   *inflight
	queue    *promptQueue
	turns    *turnRunner
	peer     *peer
	crash    *crasher
	v2       *v2adapter // speaks ACP v2 at the stdio edges when the client asks (-v2)
}

func newAgent(cfg config, w *lineWriter, calls callLog, stderr io.Writer) *agent {
	cat := &catalog{f: cfg.Features, acceptUnknown: cfg.AcceptUnknown, defaultModel: cfg.DefaultModel, defaultMode: cfg.DefaultMode}
	a := &agent{
		cfg:      cfg,
		cat:      cat,
		w:        w,
		calls:    calls,
		stderr:   stderr,
		sessions: newSessionStore(cfg, cat, stderr),
		flight:   newInflight(),
		peer:     &peer{},
		crash:    newCrasher(cfg, w, stderr),
	}
	var inResult json.RawMessage
	if cfg.CommandsInResult && cfg.Commands {
		inResult = v2CommandList(stderr)
	}
	a.v2 = newV2Adapter(cfg.V2, inResult, w, a.sessions, stderr)
	a.v2.lateAccept = cfg.LateAccept
	a.queue = newPromptQueue(cfg.QueuePrompts, a.flight, w, a.v2)
	a.turns = &turnRunner{cfg: cfg, cat: cat, sessions: a.sessions, peer: a.peer, w: w, crash: a.crash, v2: a.v2,
		stderr: stderr, cancels: map[int]context.CancelFunc{}}
	w.frame = a.frame
	return a
}

// connect hands the agent, and its turns, the SDK connection that serves
// it, before the stdin reader starts.
func (a *agent) connect(conn *acp.AgentSideConnection) {
	a.conn = conn
	a.turns.conn = conn
}

// stdinReader is the reader of stdin that hands lines on to the SDK
// through sdk, and to which the prompt queue hands the prompts it held
// back. Main makes it once, before it reads.
func (a *agent) stdinReader(sdk *io.PipeWriter) *stdinReader {
	r := &stdinReader{
		sdk:          sdk,
		maxSDKLine:   a.cfg.MaxSDKLine,
		ignoreEOF:    a.cfg.IgnoreEOF,
		queuePrompts: a.cfg.QueuePrompts,
		delete:       a.cfg.Delete,
		calls:        a.calls,
		w:            a.w,
		crash:        a.crash,
		gate:         &initGate{strict: a.cfg.StrictInit, w: a.w},
		queue:        a.queue,
		v2:           a.v2,
		flight:       a.flight,
		sessions:     a.sessions,
		peer:         a.peer,
		turns:        a.turns,
		stderr:       a.stderr,
	}
	a.queue.feed(r.handOn)
	return r
}

// frameLine sees every line written to stdout, under the writer's lock,
// just before it is written. For a response to a tracked request it returns
// the session's post-response updates (the config_option_update "that
// follows" a set_model, the available_commands_update after session/new), to
// be written right after the response under the same lock. They are taken
// from the session before the response goes out: once the client has the
// response it may send the next request on the session, whose own post
// updates must wait for that request's response. The initialize response
// is rewritten to carry what the SDK's types lack (withDeleteCapability).
// The returned done runs
// after the lock is released: it forgets the request, lets a drain at stdin
// EOF finish, and counts prompt answers for -die-after. frameLine runs
// inside the SDK's write lock, so it never calls the SDK connection.
func (a *agent) frameLine(line []byte) (out []byte, follow [][]byte, done func(error)) {
	if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`)) {
		return nil, nil, nil // a notification or a request of ours: nothing to match
	}
	var env envelope
	if json.Unmarshal(line, &env) != nil || env.Method != "" || !env.hasID() {
		return nil, nil, nil
	}
	key := idKey(env.ID)
	req := a.flight.get(key)
	if req == nil {
		return nil, nil, nil
	}
	if req.method == acp.AgentMethodInitialize && a.cfg.Delete {
		out = withDeleteCapability(line, a.stderr)
	}
	sid := req.sessionID
	if req.method == acp.AgentMethodSessionNew || req.method == acp.AgentMethodSessionFork {
		sid = sessionIDOf(env.Result)
	}
	post, after := a.sessions.takeFollowUps(sid, req.method == acp.AgentMethodSessionPrompt)

	if a.cfg.AnswerTwice.has(req.method) {
		follow = append(follow, SecondAnswerLine(env.ID))
	}

	for _, u := range post {
		l, err := notificationLine(acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u})
		if err != nil {
			fmt.Fprintf(a.stderr, "fakeagent: %v\n", err)
			continue
		}
		follow = append(follow, l)
	}
	if req.method == acp.AgentMethodInitialize && a.cfg.AuthNotice {
		follow = append(follow, AuthStatusLine())
	}
	return out, follow, func(err error) {
		if err != nil && !errors.Is(err, errStopped) {
			fmt.Fprintf(a.stderr, "fakeagent: %v\n", err)
		}
		prompts := a.flight.answered(key, req)
		prompt := req.method == acp.AgentMethodSessionPrompt
		if prompt && a.cfg.DieAfter > 0 && prompts == a.cfg.DieAfter {
			a.crash.die(a.cfg.DieCode)
			return
		}
		if prompt {
			a.queue.ended(req.sessionID)
		}
		for _, fn := range after {
			go fn()
		}
	}
}

func commandsUpdate() acp.SessionUpdate {
	return acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{
		SessionUpdate: "available_commands_update",
		AvailableCommands: []acp.AvailableCommand{
			{Name: "fake-help", Description: "Describe the fake agent's prompt quirks"},
			{Name: "fake-echo", Description: "Echo every text block", Input: &acp.AvailableCommandInput{
				Unstructured: &acp.UnstructuredCommandInput{Hint: "text to echo"}}},
		},
	}}
}

func configUpdate(opts []acp.SessionConfigOption) acp.SessionUpdate {
	return acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{SessionUpdate: "config_option_update", ConfigOptions: opts}}
}

func modeUpdate(mode string) acp.SessionUpdate {
	return acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{SessionUpdate: "current_mode_update", CurrentModeId: acp.SessionModeId(mode)}}
}

// Initialize implements acp.Agent.
func (a *agent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.peer.setCaps(p.ClientCapabilities)
	f := a.cfg.Features
	caps := acp.AgentCapabilities{
		LoadSession:        f.Load,
		PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true, Image: !a.cfg.NoImage},
	}
	if f.Resume {
		caps.SessionCapabilities.Resume = &acp.SessionResumeCapabilities{}
	}
	if f.List {
		caps.SessionCapabilities.List = &acp.SessionListCapabilities{}
	}
	if f.Fork {
		caps.SessionCapabilities.Fork = &acp.SessionForkCapabilities{}
	}
	if f.Close {
		caps.SessionCapabilities.Close = &acp.SessionCloseCapabilities{}
	}
	v := p.ProtocolVersion
	if v > acp.ProtocolVersionNumber || v < 1 {
		v = acp.ProtocolVersionNumber
	}
	return acp.InitializeResponse{
		ProtocolVersion:   v,
		AgentCapabilities: caps,
		AgentInfo:         &acp.Implementation{Name: a.cfg.agentName(), Version: a.cfg.agentVersion()},
		AuthMethods:       []acp.AuthMethod{},
	}, nil
}

// Authenticate implements acp.Agent; no method is advertised, so any call
// just succeeds.
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession implements acp.Agent.
func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.sessions.mu.Lock()
	s := a.sessions.createLocked(p.Cwd)
	st := s.st
	if a.cfg.Commands && !a.cfg.EarlyUpdates {
		s.post = append(s.post, commandsUpdate())
	}
	a.sessions.persistLocked()
	a.sessions.mu.Unlock()
	if a.cfg.EarlyUpdates {
		// Like agents that announce commands while still creating the
		// session: the client sees a session id it was not told yet.
		early := []acp.SessionUpdate{commandsUpdate()}
		if a.cfg.ConfigOptions {
			early = append(early, configUpdate(a.cat.options(st)))
		}
		for _, u := range early {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: acp.SessionId(s.id), Update: u}); err != nil {
				return acp.NewSessionResponse{}, fmt.Errorf("early update for %s: %w", s.id, err)
			}
		}
	}
	opts, modes, models := a.cat.surfaces(st)
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.id), ConfigOptions: opts, Modes: modes, Models: models}, nil
}

// LoadSession implements acp.AgentLoader: it replays the session's history
// as user_message_chunk / agent_message_chunk updates, then answers.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if !a.baseline(a.cfg.Load) { // in v2 only the adapter sends it, for a resume that replays
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	if a.cfg.LoadFails {
		return acp.LoadSessionResponse{}, &acp.RequestError{Code: -32603, Message: "Internal error: load failed (fake-agent -load-fails)"}
	}
	a.sessions.mu.Lock()
	s, err := a.sessions.session(p.SessionId)
	if err == nil && s.phantom {
		err = ThreadNotFound(string(p.SessionId)) // nothing to load: it was never there
	}
	if err != nil {
		a.sessions.mu.Unlock()
		return acp.LoadSessionResponse{}, err
	}
	if a.cfg.FreshLoadFails && !s.made.IsZero() && time.Since(s.made) < FreshLoadWindow {
		a.sessions.mu.Unlock()
		return acp.LoadSessionResponse{}, &acp.RequestError{Code: -32603, Message: "Internal error"}
	}
	if !a.cfg.LoadKeepsConfig {
		s.st = a.cat.fresh() // like claude-agent-acp, codex-acp, gemini-cli
	}
	if p.Cwd != "" {
		s.cwd = p.Cwd
	}
	a.sessions.persistLocked()
	history := append([]turn(nil), s.history...)
	if a.cfg.LoadLag && s.unlisted != 0 {
		history = nil // its transcript has not landed: nothing to replay yet
	}
	st := s.st
	if a.cfg.Commands {
		s.post = append(s.post, commandsUpdate())
	}
	a.sessions.mu.Unlock()
	replayed := 0
	for i, t := range history {
		var updates []acp.SessionUpdate
		for _, b := range t.user {
			updates = append(updates, acp.UpdateUserMessage(b))
		}
		updates = append(updates, a.turns.agentText(string(p.SessionId), i+1, t.agent))
		for _, u := range updates {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
				return acp.LoadSessionResponse{}, fmt.Errorf("replay %s: %w", p.SessionId, err)
			}
			replayed++
			if replayed == 1 && a.cfg.DieMidLoad && a.crash.scripted("-die-mid-load") {
				<-a.crash.stopped // never answer; Main has returned
				return acp.LoadSessionResponse{}, errStopped
			}
		}
	}
	opts, modes, models := a.reopenSurfaces(st)
	return acp.LoadSessionResponse{ConfigOptions: opts, Modes: modes, Models: models}, nil
}

// ResumeSession implements acp.Agent: like load, without the replay.
func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	if !a.baseline(a.cfg.Resume) {
		return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
	}
	a.sessions.mu.Lock()
	s, err := a.sessions.session(p.SessionId)
	if err != nil && a.cfg.ResumeLies {
		// codex-acp 2.6.0 with its thread gone: the resume is accepted,
		// and the session cannot run a prompt (prompt.go).
		s, err = a.sessions.phantomLocked(string(p.SessionId), p.Cwd), nil
	}
	if err != nil {
		a.sessions.mu.Unlock()
		return acp.ResumeSessionResponse{}, err
	}
	model := s.st.Model
	a.sessions.mu.Unlock()
	if a.cfg.ResumeNotes {
		note := ResumeNote(model)
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.UpdateAgentMessageText(note)}); err != nil {
			return acp.ResumeSessionResponse{}, fmt.Errorf("resume note %s: %w", p.SessionId, err)
		}
	}
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	if !a.cfg.LoadKeepsConfig {
		s.st = a.cat.fresh()
	}
	a.sessions.persistLocked()
	opts, modes, models := a.reopenSurfaces(s.st)
	return acp.ResumeSessionResponse{ConfigOptions: opts, Modes: modes, Models: models}, nil
}

// reopenSurfaces is what a session/load or session/resume result carries:
// the profile's surfaces, without the legacy ones under
// -reopen-drops-legacy (codex-acp 2.6.0 answers session/resume with
// configOptions alone, though its session/new has modes and models too).
func (a *agent) reopenSurfaces(st settings) ([]acp.SessionConfigOption, *acp.SessionModeState, *acp.SessionModelState) {
	opts, modes, models := a.cat.surfaces(st)
	if a.cfg.ReopenDropsLegacy {
		return opts, nil, nil
	}
	return opts, modes, models
}

// ListSessions implements acp.Agent. Sessions come in creation order; the
// title is the first prompt's text, and there is no updatedAt (no clock)
// unless -info-updates, which reports the fake one of the last turn. Under
// -list-lag N a session appears only once it has a finished turn and N
// session/list calls have left it out since (see session.unlisted): a
// count, not a clock, so a test of the lag is deterministic.
func (a *agent) ListSessions(_ context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	if !a.baseline(a.cfg.List) {
		return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
	}
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, s := range a.sessions.inOrderLocked() {
		if s.unlisted != 0 {
			if s.unlisted > 0 {
				s.unlisted--
			}
			continue
		}
		if p.Cwd != nil && *p.Cwd != s.cwd {
			continue
		}
		info := acp.SessionInfo{SessionId: acp.SessionId(s.id), Cwd: s.cwd, Title: sessionTitle(s.history)}
		if a.cfg.InfoUpdates && len(s.history) > 0 {
			info.UpdatedAt = acp.Ptr(updatedAt(len(s.history)))
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// UnstableForkSession implements the unstable session/fork: a new session
// with a copy of the parent's history and settings.
func (a *agent) UnstableForkSession(_ context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	if !a.cfg.Fork {
		return acp.UnstableForkSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionFork)
	}
	if a.cfg.ForkFails {
		return acp.UnstableForkSessionResponse{}, &acp.RequestError{Code: -32603, Message: "Internal error: fork failed (fake-agent -fork-fails)"}
	}
	a.sessions.mu.Lock()
	parent, err := a.sessions.session(p.SessionId)
	if err != nil {
		a.sessions.mu.Unlock()
		return acp.UnstableForkSessionResponse{}, err
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = parent.cwd
	}
	history := parent.history
	if at, ok := forkPoint(p.Meta); ok && a.cfg.ForkAtMessage {
		i := slices.IndexFunc(history, func(t turn) bool { return t.msgID == at || t.msgID == strings.TrimSuffix(at, segmentOf(at)) })
		if i < 0 {
			a.sessions.mu.Unlock()
			return acp.UnstableForkSessionResponse{}, invalid("messageId", at, "Fork point message "+at+" was not found in session "+parent.id)
		}
		history = history[:i+1]
	}
	child := a.sessions.createLocked(cwd)
	child.st = parent.st
	child.history = append([]turn(nil), history...)
	if len(child.history) > 0 {
		child.unlisted = 0 // the parent's turns are on disk already
	}
	st := child.st
	a.sessions.persistLocked()
	a.sessions.mu.Unlock()
	opts, modes, models := a.cat.surfaces(st)
	res := acp.UnstableForkSessionResponse{SessionId: acp.SessionId(child.id), Modes: modes}
	// The fork result uses the SDK's unstable twins of the stable types;
	// they share the wire shape, so convert through JSON.
	if err := convert(opts, &res.ConfigOptions); err != nil {
		return res, err
	}
	if models != nil {
		if err := convert(models, &res.Models); err != nil {
			return res, err
		}
	}
	return res, nil
}

func convert(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("convert %T: %w", src, err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("convert %T to %T: %w", src, dst, err)
	}
	return nil
}

// CloseSession implements acp.Agent. The session stays loadable: the fake
// agent has no disk, and a real agent's closed session is still on disk.
func (a *agent) CloseSession(_ context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	if !a.baseline(a.cfg.Close) {
		return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
	}
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	if _, err := a.sessions.session(p.SessionId); err != nil {
		return acp.CloseSessionResponse{}, err
	}
	return acp.CloseSessionResponse{}, nil
}

// Cancel implements acp.Agent. The SDK already cancelled the prompt's
// context; the prompt answers with stopReason cancelled.
func (a *agent) Cancel(context.Context, acp.CancelNotification) error { return nil }

// SetSessionMode implements acp.Agent. Like claude-agent-acp and codex-acp
// it answers {} and is followed by current_mode_update and, when config
// options are exposed, config_option_update. It answers even without legacy
// modes, as opencode does.
func (a *agent) SetSessionMode(_ context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	s, err := a.sessions.session(p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	st, err := a.cat.withMode(s.st, string(p.ModeId))
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	s.st = st
	a.sessions.persistLocked()
	s.post = append(s.post, modeUpdate(st.Mode))
	if a.cfg.ConfigOptions {
		s.post = append(s.post, configUpdate(a.cat.options(st)))
	}
	return acp.SetSessionModeResponse{}, nil
}

// SetSessionConfigOption implements acp.Agent: it answers the full option
// list. A mode change is followed by current_mode_update when legacy modes
// are exposed (claude does this); a model change that alters other options
// is followed by config_option_update (opencode does this).
func (a *agent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if !a.cfg.ConfigOptions {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, invalid("type", "boolean", "the fake agent has no boolean options")
	}
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	s, err := a.sessions.session(p.ValueId.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	if a.cfg.BrokenSetConfig {
		return acp.SetSessionConfigOptionResponse{ConfigOptions: a.cat.options(s.st)}, nil
	}
	before := s.st
	st, err := a.cat.withOption(before, string(p.ValueId.ConfigId), string(p.ValueId.Value))
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	s.st = st
	a.sessions.persistLocked()
	if st.Mode != before.Mode && a.cfg.LegacyModes {
		s.post = append(s.post, modeUpdate(st.Mode))
	}
	if st.Model != before.Model && a.cat.dependentChanged(before, st) {
		s.post = append(s.post, configUpdate(a.cat.options(st)))
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: a.cat.options(st)}, nil
}

// UnstableSetSessionModel implements the legacy session/set_model. It
// answers {}; with config options exposed, the new list follows as
// config_option_update, since nothing else tells the client about it.
//
// Under -effort-models the list comes before the answer instead, as
// codex-acp 2.6.0 sends it: a record that took the legacy id for the model
// option's value after that report would hold a value the option lacks.
func (a *agent) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	if !a.cfg.LegacyModels {
		return acp.UnstableSetSessionModelResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetModel)
	}
	a.sessions.mu.Lock()
	s, err := a.sessions.session(p.SessionId)
	if err != nil {
		a.sessions.mu.Unlock()
		return acp.UnstableSetSessionModelResponse{}, err
	}
	st, err := a.cat.withLegacyModel(s.st, string(p.ModelId))
	if err != nil {
		a.sessions.mu.Unlock()
		return acp.UnstableSetSessionModelResponse{}, err
	}
	s.st = st
	a.sessions.persistLocked()
	before := a.cfg.ConfigOptions && a.cfg.EffortModels
	if a.cfg.ConfigOptions && !before {
		s.post = append(s.post, configUpdate(a.cat.options(st)))
	}
	a.sessions.mu.Unlock()
	if before {
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: configUpdate(a.cat.options(st))}); err != nil {
			return acp.UnstableSetSessionModelResponse{}, fmt.Errorf("config_option_update %s: %w", p.SessionId, err)
		}
	}
	return acp.UnstableSetSessionModelResponse{}, nil
}

// HandleExtensionMethod answers `_fake/echo` with its params, byte for byte
// as far as the SDK allows (it compacts them). Other extension requests get
// -32601; extension notifications are ignored.
func (a *agent) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method == "_fake/echo" {
		if len(params) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return params, nil
	}
	return nil, acp.NewMethodNotFound(method)
}

package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/rebuild"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
)

// The sidecar's own surfaces (DESIGN.md "Surfaces"): slash commands for
// editors that stay unchanged, `_sidecar/*` methods for orchestrators, the
// capability advertisement in initialize, and the gate that keeps a prompt
// away from a session whose config could not be restored.

// extMethods are advertised in initialize.
var extMethods = []string{wire.ExtReset, wire.ExtRollback, wire.ExtFork, wire.ExtRestoreOriginal, wire.ExtAcceptConfig, wire.ExtStatus}

// slashCommand is one command the sidecar adds to the agent's list.
type slashCommand struct {
	name, description, hint string
}

var slashCommands = []slashCommand{
	{"rewind", "acp-sidecar: take back the last n turns (default 1); the agent keeps the rest", "[n]"},
	{"reset", "acp-sidecar: start a fresh context with the same model, mode and options", ""},
	{"restore-original", "acp-sidecar: put back the config this session started with", ""},
	{"accept-config", "acp-sidecar: continue on the config the agent has now, after a failed restore", ""},
	{"sidecar-status", "acp-sidecar: show the session's native id, config and turns", ""},
}

// commandsJSON renders the sidecar's commands as availableCommands entries
// in version v: v2 names each entry's kind and its input's.
func commandsJSON(v wire.Version) [][]byte {
	out := make([][]byte, 0, len(slashCommands))
	for _, c := range slashCommands {
		m := map[string]any{"name": c.name, "description": c.description}
		input := map[string]any{"hint": c.hint}
		if v >= wire.V2 {
			m["type"], input["type"] = "command", "text"
		}
		if c.hint != "" {
			m["input"] = input
		}
		b := wire.Encode(m)
		out = append(out, b)
	}
	return out
}

// commands is the front interceptor: it runs before the recorder, so what
// it answers itself is never recorded as a turn nor reaches the agent.
type commands struct {
	ops     CommandOps
	led     *ledger.Ledger
	life    *life.Life // what the agent can do, learnt from its initialize result
	version string
	// spoken is the highest ACP version offered to the agent.
	spoken wire.Version
	log    *slog.Logger
}

// NewCommands builds the sidecar's own surfaces over the session
// operations they run, the ledger, and the agent's life, whose initialize
// result they extend with the capabilities the sidecar adds; version is
// the sidecar's, advertised there; spoken is the highest ACP version it
// lets the client and the agent agree on (SpokenVersion, or less where
// --max-protocol says so); log says what the stage changed.
func NewCommands(ops CommandOps, led *ledger.Ledger, lf *life.Life, version string, spoken wire.Version, log *slog.Logger) Interceptor {
	return &commands{ops: ops, led: led, life: lf, version: version, spoken: max(spoken, wire.V1), log: log}
}

// CommandOps is what the sidecar's commands run on a session (Sessions):
// the rebuilds, the rollbacks and the reports, as slash commands and as
// `_sidecar/*` methods alike. Each runs in a deferred decision, off the
// relay's path; an error is the command's answer.
type CommandOps interface {
	Reset(ctx context.Context, sid string) (rebuild.Report, error)
	RestoreOriginal(ctx context.Context, sid string) (rebuild.Report, error)
	AcceptConfig(ctx context.Context, sid string) error
	Rewind(ctx context.Context, sid string, n int) (rebuild.RollbackReport, error)
	Rollback(ctx context.Context, sid string, keep int) (rebuild.RollbackReport, error)
	Fork(ctx context.Context, parent string, at int) (rebuild.Report, error)
	Status(ctx context.Context, sid string) (map[string]any, error)
	StatusText(ctx context.Context, sid string) (string, error)
}

// Claims takes prompts (for the gate and slash commands), `_sidecar/*`
// requests from either side, initialize and its response, and the agent's
// command lists.
func (c *commands) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	switch {
	case env.Kind == proxy.KindRequest && strings.HasPrefix(string(env.Method), wire.ExtPrefix):
		return true
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification && strings.HasPrefix(string(env.Method), wire.ExtPrefix):
		return true
	case dir == proxy.ClientToAgent && env.Kind == proxy.KindRequest:
		return env.MethodIs(wire.Prompt) || env.MethodIs(wire.Initialize)
	case dir == proxy.AgentToClient && env.Kind == proxy.KindResponse:
		return true // Intercept tells initialize's from what the chain took out (ledger.AnsweredOf)
	case dir == proxy.AgentToClient && env.Kind == proxy.KindNotification:
		switch string(env.Update) {
		case "available_commands_update", "session_info_update", updUserMessage, updUserChunk:
			return true
		}
	}
	return false
}

// The user's message as the agent echoes it: v2 inserts every prompt as a
// user_message, and a replay sends the user's part of each turn as
// user_message_chunk (v2 after a user_message). Both carry the handoff the
// sidecar put before a prompt, which is not the user's (handoffEcho).
const (
	updUserMessage = "user_message"
	updUserChunk   = "user_message_chunk"
)

// Intercept answers or rewrites a claimed frame.
func (c *commands) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	id := append([]byte(nil), f.Env.ID...)
	switch {
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindRequest:
		// The sidecar's methods belong to the client side alone.
		return answer(proxy.ErrorResponse(id, proxy.CodeMethodNotFound, "Method not found: "+string(f.Env.Method)+" is acp-sidecar's, and only the client may call it")), nil
	case f.Dir == proxy.AgentToClient && f.Env.Kind == proxy.KindNotification && strings.HasPrefix(string(f.Env.Method), wire.ExtPrefix):
		// Nobody to answer; the client must never take it for the sidecar's.
		return proxy.Verdict{Do: proxy.Drop}, nil
	case f.Env.Kind == proxy.KindRequest && strings.HasPrefix(string(f.Env.Method), wire.ExtPrefix):
		return c.extension(ctx, id, string(f.Env.Method), f.Raw)
	case f.Env.MethodIs(wire.Initialize):
		return c.offerVersion(f.Raw), nil
	case f.Env.MethodIs(wire.Prompt):
		return c.prompt(ctx, id, wire.SessionIDOf(f), f.Raw)
	case f.Env.Kind == proxy.KindResponse:
		q, ok := ledger.AnsweredOf(ctx)
		switch {
		case !ok:
			return proxy.Verdict{}, nil
		case q.Method == wire.Initialize:
			return c.advertise(f.Raw)
		case opensSession(q.Method) && !f.Env.Error && wire.Version(c.life.Caps().Protocol) >= wire.V2:
			return c.resultCommands(q, f.Raw)
		}
		return proxy.Verdict{}, nil
	case string(f.Env.Update) == "session_info_update":
		return c.title(wire.SessionIDOf(f), f.Raw), nil
	case string(f.Env.Update) == updUserMessage || string(f.Env.Update) == updUserChunk:
		return handoffEcho(f.Raw), nil
	default:
		return c.mergeCommands(wire.SessionIDOf(f), f.Raw)
	}
}

// handoffEcho takes the sidecar's handoff out of the agent's echo of the
// user's message: the editor shows the message as the user wrote it, as a
// v1 agent, which echoes nothing live, leaves it. A chunk that is the
// handoff is dropped; a whole message loses the handoff's block. Anything
// else passes as it is.
func handoffEcho(raw []byte) proxy.Verdict {
	isHandoff := func(b json.RawMessage) bool {
		var blk struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		return json.Unmarshal(b, &blk) == nil && blk.Type == "text" && strings.HasPrefix(blk.Text, replay.HandoffTag)
	}
	content := wire.Member(raw, "params", "update", "content")
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		if isHandoff(content) {
			return proxy.Verdict{Do: proxy.Drop} // a chunk: one block
		}
		return proxy.Verdict{}
	}
	kept := blocks[:0:0]
	for _, b := range blocks {
		if !isHandoff(b) {
			kept = append(kept, b)
		}
	}
	if len(kept) == len(blocks) {
		return proxy.Verdict{}
	}
	line, err := wire.SetPath(raw, wire.Encode(kept), "params", "update", "content")
	if err != nil {
		return proxy.Verdict{Do: proxy.Drop} // it scanned, so this cannot be; the handoff must not pass
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}
}

// title takes out of a session_info_update of native session native a
// title that is not the session's, so the editor keeps the title the
// session had; the record, which sees the update after this stage, keeps
// it too. Two are not the session's:
//   - a title the agent made from the handoff that led a fresh native
//     session's first prompt (claude-agent-acp 0.101.0 and codex-acp 2.6.0
//     both do), not "[acp-sidecar] What follows is the earlier …";
//   - the title the agent gives a native session a rebuild made for a
//     session that has a title of its own (ledger Flight.AgentTitled):
//     after /reset it is the next prompt's, after a native rewind the
//     agent's "… (fork)".
//
// The rest of the update goes on; an update's omitted field leaves the
// client's value as it was.
func (c *commands) title(native string, raw []byte) proxy.Verdict {
	var n struct {
		Params struct {
			Update struct {
				Title json.RawMessage `json:"title"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil || n.Params.Update.Title == nil {
		return proxy.Verdict{} // no title to judge: it passes as it is
	}
	var title *string
	if !wire.IsNull(n.Params.Update.Title) {
		var t string
		if json.Unmarshal(n.Params.Update.Title, &t) != nil {
			return proxy.Verdict{} // not a string: the client judges it
		}
		title = &t
	}
	handoff := title != nil && strings.HasPrefix(strings.TrimSpace(*title), strings.TrimSpace(replay.HandoffTag))
	sessions := true
	if !handoff {
		sid := c.led.ClientOf(native)
		c.led.Update(func(f *ledger.Flight) { sessions = f.Sessions.AgentTitled(sid, title) })
	}
	if sessions && !handoff {
		return proxy.Verdict{}
	}
	line, err := wire.Delete(raw, "params", "update", "title")
	if err != nil {
		return proxy.Verdict{Do: proxy.Drop} // it scanned, so this cannot be; the title must not pass
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}
}

func answer(line []byte) proxy.Verdict { return proxy.Verdict{Do: proxy.Answer, Line: line} }

// SpokenVersion is the highest ACP protocol version the sidecar speaks and
// keeps its promises in, and offers the agent by default. A client that
// offers more is passed on as this version: the agent answers in a version
// the sidecar reads, and the client, told so in the initialize result,
// decides whether to go on, as the spec's negotiation has it. The
// connection then speaks what the agent chose (docs/v2.md).
const SpokenVersion = wire.V2

// offerVersion passes on an initialize whose protocolVersion is above the
// highest version the sidecar speaks as that version; any other passes as
// it came. A client that asks for 3 gets an agent that answers in a
// version the sidecar can read.
func (c *commands) offerVersion(raw []byte) proxy.Verdict {
	n, err := strconv.Atoi(string(wire.Member(raw, "params", "protocolVersion")))
	if err != nil || n <= int(c.spoken) {
		return proxy.Verdict{} // not a version number the sidecar can compare: the agent judges it
	}
	line, err := wire.SetPath(raw, []byte(strconv.Itoa(int(c.spoken))), "params", "protocolVersion")
	if err != nil {
		return proxy.Verdict{}
	}
	c.log.Info("the client offered a protocol version the sidecar does not speak; asking the agent for the one it speaks, and the client decides", "offered", n, "asked", int(c.spoken))
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}
}

// advertise adds the sidecar's methods to the initialize result, under
// agentCapabilities._meta, the place the protocol leaves for extensions.
func (c *commands) advertise(raw []byte) (proxy.Verdict, error) {
	if _, _, ok := wire.Find(raw, "result"); !ok {
		return proxy.Verdict{}, nil // an error response passes as it is
	}
	// The agent's own capabilities decide how sessions are rebuilt; what
	// the client is promised below includes what the sidecar emulates.
	caps := parseCaps(wire.Member(raw, "result"))
	c.life.LearnCaps(caps)
	meta := wire.Encode(map[string]any{"version": c.version, "methods": extMethods})
	if wire.Version(caps.Protocol) >= wire.V2 {
		line, err := advertiseV2(raw, meta, caps)
		if err != nil {
			return proxy.Verdict{}, fmt.Errorf("advertise in initialize: %w", err)
		}
		return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
	}
	line, err := wire.SetPath(raw, meta, "result", "agentCapabilities", "_meta", "acp-sidecar")
	if err != nil {
		return proxy.Verdict{}, fmt.Errorf("advertise in initialize: %w", err)
	}
	// What the sidecar emulates where the agent cannot is promised too
	// (protocol.md §8, 17): loading any recorded session, resuming,
	// listing, closing and deleting (DESIGN.md "A session's whole life").
	line, err = wire.SetPath(line, []byte("true"), "result", "agentCapabilities", "loadSession")
	if err != nil {
		return proxy.Verdict{}, fmt.Errorf("advertise in initialize: %w", err)
	}
	for _, c := range []struct {
		name string
		has  bool
	}{{"resume", caps.Resume}, {"list", caps.List}, {"fork", caps.Fork}, {"close", caps.Close}, {"delete", caps.Delete}} {
		if !c.has {
			if line, err = wire.SetPath(line, []byte("{}"), "result", "agentCapabilities", "sessionCapabilities", c.name); err != nil {
				return proxy.Verdict{}, fmt.Errorf("advertise in initialize: %w", err)
			}
		}
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
}

// advertiseV2 is advertise in v2's shape: the sidecar's methods under
// capabilities._meta, and what it emulates as session capabilities. v2 has
// no session/load (a resume with replayFrom replaces it), and list, resume
// and close are the baseline of any agent with a session capability, which
// the sidecar promises whatever the agent said.
func advertiseV2(raw, meta []byte, caps life.Caps) ([]byte, error) {
	line, err := wire.SetPath(raw, meta, "result", "capabilities", "_meta", "acp-sidecar")
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		has  bool
	}{{"fork", caps.Fork}, {"delete", caps.Delete}} {
		if !c.has {
			if line, err = wire.SetPath(line, []byte("{}"), "result", "capabilities", "session", c.name); err != nil {
				return nil, err
			}
		}
	}
	return line, nil
}

// mergeCommands adds the sidecar's commands to the agent's list. In v2 the
// agent's list is kept too, for the sidecar's own lists (ownCommands).
func (c *commands) mergeCommands(sid string, raw []byte) (proxy.Verdict, error) {
	v := wire.Version(c.life.Caps().Protocol)
	var agents []json.RawMessage
	if v >= wire.V2 {
		agents = wire.CommandList(wire.Member(raw, "params", "update", "availableCommands"))
	}
	c.led.Update(func(f *ledger.Flight) {
		f.Natives.SawCommands(sid)
		if v >= wire.V2 {
			f.Natives.AgentCommands(sid, agents)
		}
	})
	line, err := wire.InsertArray(raw, false, commandsJSON(v), "params", "update", "availableCommands")
	if err != nil {
		return proxy.Verdict{}, fmt.Errorf("merge commands: %w", err)
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
}

// opensSession says whether a method's result opens a session for the
// client, with the agent's commands in it in v2.
func opensSession(method string) bool {
	switch method {
	case wire.SessionNew, wire.SessionResume, wire.SessionFork, wire.SessionLoad:
		return true
	}
	return false
}

// resultCommands adds the sidecar's commands to the list a v2 agent gives
// in the result of an open (q), which replaces the client's list as an
// update does: the client then has both, and the sidecar sends no list of
// its own after the open. The agent's list is kept for later ones.
func (c *commands) resultCommands(q ledger.Request, raw []byte) (proxy.Verdict, error) {
	list := wire.Member(raw, "result", "availableCommands")
	if list == nil {
		return proxy.Verdict{}, nil // none: the sidecar's own list follows the open
	}
	native := c.led.NativeOf(q.Session)
	if q.Method == wire.SessionNew || q.Method == wire.SessionFork {
		native = wire.Unquote(wire.Member(raw, "result", "sessionId"))
	}
	agents := wire.CommandList(list)
	c.led.Update(func(f *ledger.Flight) {
		f.Natives.SawCommands(native)
		f.Natives.AgentCommands(native, agents)
	})
	line, err := wire.InsertArray(raw, false, commandsJSON(wire.V2), "result", "availableCommands")
	if err != nil {
		return proxy.Verdict{}, fmt.Errorf("merge commands into the %s result: %w", q.Method, err)
	}
	return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
}

// ownCommands is the command list the sidecar sends after an open of the
// native session native, in case the agent never sends one: none when the
// agent's own list (with the sidecar's merged in) already went out, because
// each list replaces the one before.
func ownCommands(led *ledger.Ledger, lf *life.Life, native, client string) [][]byte {
	if led.CommandsSent(native) {
		return nil
	}
	return [][]byte{ownCommandsUpdate(wire.Version(lf.Caps().Protocol), client, led.AgentCommandsOf(native))}
}

// ownCommandsUpdate is the sidecar's own command list for a session, after
// agents, the agent's own list as it last gave it (v2).
func ownCommandsUpdate(v wire.Version, sessionID string, agents []json.RawMessage) []byte {
	b := wire.Encode(map[string]any{
		"jsonrpc": "2.0", "method": wire.Update,
		"params": map[string]any{"sessionId": sessionID, "update": map[string]any{
			"sessionUpdate": "available_commands_update", "availableCommands": append(slices.Clip(agents), rawList(commandsJSON(v))...),
		}},
	})
	return b
}

func rawList(items [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, b := range items {
		out[i] = b
	}
	return out
}

// prompt lets a prompt through, answers a slash command, or refuses the
// prompt of a blocked or busy session.
func (c *commands) prompt(ctx context.Context, id []byte, sid string, raw []byte) (proxy.Verdict, error) {
	if name, args, ok := slashOf(raw); ok {
		// The command's work (a rebuild) is slow: the relay runs it off its
		// goroutine, and nothing waits for it but this prompt's answer.
		// raw lies in the relay's read buffer, which the client's next
		// frame overwrites meanwhile; the command's turn echoes the
		// prompt (v2), so it takes a copy.
		prompt := bytes.Clone(wire.Member(raw, "params", "prompt"))
		done := c.announce(sid, name != "sidecar-status")
		return proxy.Verdict{Do: proxy.Defer, Later: func(ctx context.Context) proxy.Decision {
			d := answerWith(c.slash(ctx, id, sid, name, args, prompt)...)
			d.Placed = done
			return d
		}}, nil
	}
	if what := c.led.BusyWith(sid); what != "" {
		return answer(proxy.ErrorResponse(id, proxy.CodeBusy, fmt.Sprintf("acp-sidecar is running a %s on this session; send the prompt again when it has finished", what))), nil
	}
	if b := c.led.BlockedOf(sid); b != nil {
		return answer(blockedError(id, b.Fields, b.Reason)), nil
	}
	var h replay.Handoff
	var ok bool
	if c.led.Update(func(f *ledger.Flight) { h, ok = f.Sessions.TakeHandoff(sid) }); ok {
		block := wire.Encode(map[string]string{"type": "text", "text": h.Text})
		line, err := wire.InsertArray(raw, true, [][]byte{block}, "params", "prompt")
		if err != nil {
			return proxy.Verdict{}, fmt.Errorf("hand over kept turns: %w", err)
		}
		return proxy.Verdict{Do: proxy.Rewrite, Line: line}, nil
	}
	return proxy.Verdict{}, nil
}

// announce marks session sid busy from now, when changes, until done: the
// operation just taken (a slash command, a `_sidecar/*` method) runs on a
// goroutine of its own, and its rebuild marks the session busy only once
// it begins. A prompt the client sends after it would pass the lifeline
// before that, and meet the mark here, to be sent back (-32011) for a
// rebuild that began after it; announced, it waits for the operation
// instead, as DESIGN.md "While the agent's side is being rebuilt, the
// client waits" has it. done goes with the operation's answer
// (Decision.Placed): what waited goes on once that answer has its place
// in the output, so the client never has the next prompt's answer before
// the command's.
func (c *commands) announce(sid string, changes bool) (done func()) {
	if !changes || sid == "" {
		return func() {}
	}
	c.led.Update(func(f *ledger.Flight) { f.Sessions.Announce(sid) })
	return func() { c.led.Update(func(f *ledger.Flight) { f.Sessions.Announced(sid) }) }
}

func blockedError(id []byte, fields []string, reason string) []byte {
	msg := fmt.Sprintf("acp-sidecar: this session's config could not be restored (%s), so the prompt was not sent. "+
		"Send /reset to try again, or /accept-config to continue on the agent's current config. Details: %s",
		strings.Join(fields, ", "), reason)
	data := wire.Encode(map[string]any{"fields": fields, "reason": reason, "commands": []string{"/reset", "/accept-config"}})
	return errorWithData(id, proxy.CodeBlocked, msg, data)
}

func errorWithData(id []byte, code int, msg string, data []byte) []byte {
	line := proxy.ErrorResponse(id, code, msg)
	out, err := wire.SetPath(line, data, "error", "data")
	if err != nil {
		return line
	}
	return out
}

// slashOf finds one of the sidecar's commands in a prompt of one text block.
func slashOf(raw []byte) (name, args string, ok bool) {
	text, ok := wire.OnlyText(raw)
	if !ok {
		return "", "", false
	}
	return parseSlash(text)
}

// parseSlash reads "/name args" when name is one of the sidecar's commands.
func parseSlash(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	name, args, _ = strings.Cut(text[1:], " ")
	for _, c := range slashCommands {
		if c.name == name {
			return name, strings.TrimSpace(args), true
		}
	}
	return "", "", false
}

// slash runs a command and answers the prompt (whose content blocks are
// prompt) as the agent would, in the connection's version: a message that
// says what happened, and the turn's end (wire.OwnTurn).
func (c *commands) slash(ctx context.Context, id []byte, sid, name, args string, prompt json.RawMessage) [][]byte {
	var text string
	var err error
	switch name {
	case "reset":
		var rep rebuild.Report
		rep, err = c.ops.Reset(ctx, sid)
		text = rep.Text("reset")
	case "restore-original":
		var rep rebuild.Report
		rep, err = c.ops.RestoreOriginal(ctx, sid)
		text = rep.Text("restore-original")
	case "accept-config":
		err = c.ops.AcceptConfig(ctx, sid)
		text = "acp-sidecar: the session continues on the agent's current config; prompts go through again."
	case "sidecar-status":
		text, err = c.ops.StatusText(ctx, sid)
	case "rewind":
		n := 1
		if args != "" {
			// The whole argument, or nothing: Sscanf would take "1x" as 1.
			v, serr := strconv.Atoi(args)
			if serr != nil {
				err = fmt.Errorf("%q is not a number of turns", args)
				break
			}
			n = v
		}
		var rep rebuild.RollbackReport
		rep, err = c.ops.Rewind(ctx, sid, n)
		text = rep.Text()
	}
	if err != nil {
		text = "acp-sidecar: /" + name + " failed: " + err.Error()
	}
	return wire.OwnTurn(wire.Version(c.life.Caps().Protocol), sid, id, prompt, text)
}

// result runs a `_sidecar/*` operation and is its answer to request id.
func (c *commands) result(ctx context.Context, id []byte, fn func(ctx context.Context) (any, error)) []byte {
	res, err := fn(ctx)
	if err != nil {
		return proxy.ErrorResponse(id, wire.CodeOf(err), err.Error())
	}
	b, err := wire.Marshal(res)
	if err != nil {
		return proxy.ErrorResponse(id, proxy.CodeInternalError, "Internal error: encode the result: "+err.Error())
	}
	return wire.Response(id, b)
}

// extension answers a `_sidecar/*` request.
func (c *commands) extension(ctx context.Context, id []byte, method string, raw []byte) (proxy.Verdict, error) {
	var msg struct {
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Params.SessionID == "" {
		return answer(proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: "+method+" needs a sessionId")), nil
	}
	sid := msg.Params.SessionID
	run := func(fn func(ctx context.Context) (any, error)) (proxy.Verdict, error) {
		// Status and fork leave the session as it is; the others change it.
		done := c.announce(sid, method != wire.ExtStatus && method != wire.ExtFork)
		return proxy.Verdict{Do: proxy.Defer, Later: func(ctx context.Context) proxy.Decision {
			d := answerWith(c.result(ctx, id, fn))
			d.Placed = done
			return d
		}}, nil
	}
	switch method {
	case wire.ExtReset:
		return run(func(ctx context.Context) (any, error) {
			rep, err := c.ops.Reset(ctx, sid)
			return rep, err
		})
	case wire.ExtRestoreOriginal:
		return run(func(ctx context.Context) (any, error) {
			rep, err := c.ops.RestoreOriginal(ctx, sid)
			return rep, err
		})
	case wire.ExtAcceptConfig:
		return run(func(ctx context.Context) (any, error) {
			return map[string]any{"sessionId": sid}, c.ops.AcceptConfig(ctx, sid)
		})
	case wire.ExtStatus:
		return run(func(ctx context.Context) (any, error) { return c.ops.Status(ctx, sid) })
	case wire.ExtRollback, wire.ExtFork:
		var p struct {
			Params struct {
				KeepTurns *int `json:"keepTurns"`
				AtTurn    int  `json:"atTurn"`
			} `json:"params"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return answer(proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: "+method+": "+err.Error())), nil
		}
		if method == wire.ExtFork {
			return run(func(ctx context.Context) (any, error) {
				rep, err := c.ops.Fork(ctx, sid, p.Params.AtTurn)
				return rep, err
			})
		}
		if p.Params.KeepTurns == nil {
			return answer(proxy.ErrorResponse(id, proxy.CodeInvalidParams, "Invalid params: "+method+" needs keepTurns")), nil
		}
		return run(func(ctx context.Context) (any, error) {
			rep, err := c.ops.Rollback(ctx, sid, *p.Params.KeepTurns)
			return rep, err
		})
	}
	return answer(proxy.ErrorResponse(id, proxy.CodeMethodNotFound, "Method not found: "+method)), nil
}

// ChunkPolicy: the commands never claim a chunk.
func (c *commands) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: true} }

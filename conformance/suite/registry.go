package suite

import (
	"context"
	"encoding/json"
)

// Tier says what a check's failure means, as the official ACP test kit has
// it.
type Tier string

const (
	// Mandatory checks hold for every agent.
	Mandatory Tier = "mandatory"
	// Capability checks run when the agent advertises what they need, and
	// are skipped with the reason otherwise.
	Capability Tier = "capability"
	// Advisory checks are reported (a failure is a warn) and never fail
	// the run.
	Advisory Tier = "advisory"
)

// check is one conformance check. run returns nil for pass, a skipError
// for skip (with the reason), anything else for fail (with the detail; warn
// for an advisory check).
type check struct {
	id    string
	title string
	tier  Tier
	// needs, for a capability check, returns why the agent cannot be
	// checked ("" when it can); the check is then skipped without
	// starting anything.
	needs func(pr probeResult) string
	run   func(ctx context.Context, r *checkRun, pr probeResult) error
	// afterAll: the check judges what the others saw (schema), so it
	// starts once every other check of the run has ended.
	afterAll bool
}

func checks() []check {
	return []check{
		// What the agent must do by the spec, judged directly and through
		// the sidecar alike (spec.go): the sidecar must never turn a
		// passing agent check into a failing one.
		{id: "initialize", title: "initialize answers the protocol version asked for and well-formed capabilities", tier: Mandatory, run: bothWays(specInitialize)},
		{id: "session-new", title: "session/new answers a session id and a well-formed config", tier: Mandatory, run: bothWays(specSessionNew)},
		{id: "session-load", title: "session/load of a session with a turn replays its prompt and answers", tier: Capability, needs: needLoad, run: bothWays(specSessionLoad)},
		{id: "load-replay", title: "session/load replays the agent's reply too, the whole conversation", tier: Advisory, needs: needLoad, run: bothWays(specLoadReplay)},
		{id: "session-resume", title: "session/resume of a session answers, and a prompt follows", tier: Capability, needs: needSession("resume"), run: bothWays(specSessionResume)},
		{id: "session-list", title: "session/list lists the session just used, with its cwd", tier: Capability, needs: needSession("list"), run: bothWays(specSessionList)},
		{id: "session-close", title: "session/close answers success", tier: Capability, needs: needSession("close"), run: bothWays(specSessionClose)},
		{id: "session-fork", title: "session/fork answers a new session that takes a prompt", tier: Capability, needs: needSession("fork"), run: bothWays(specSessionFork)},
		{id: "cancel", title: "session/cancel during a prompt ends it with stopReason cancelled", tier: Mandatory, run: bothWays(specCancel)},
		{id: "set-config-option", title: "session/set_config_option answers the complete option list", tier: Capability, needs: needOptions, run: bothWays(specSetConfigOption)},
		{id: "jsonrpc", title: "unknown method -32601, bad params -32602, and ids of every type come back as sent", tier: Mandatory, run: bothWays(specJSONRPC)},
		{id: "eof", title: "the agent exits when its stdin closes", tier: Advisory, run: checkEOF},
		// What the sidecar promises (checks.go, promises.go).
		{id: "transparency", title: "the same exchange directly and through the sidecar gives the same frames", tier: Mandatory, run: checkTransparency},
		{id: "record", title: "after each change, `show --json` live matches what the agent reported", tier: Capability, needs: needConfig, run: checkRecord},
		{id: "reset", title: "every option set to a non-default value survives /reset", tier: Capability, needs: needConfig, run: checkReset},
		{id: "restore-order", title: "a restore calls model, then mode, then options by id, re-reading the catalog after the model", tier: Capability, needs: needConfig, run: checkRestoreOrder},
		{id: "fail-closed", title: "a start-up --set value the agent does not offer is reported and never sent", tier: Capability, needs: needConfig, run: checkFailClosed},
		{id: "rollback", title: "/rewind: a fresh native session, the config held, the kept turns handed over once without the rewound turn (or the agent's own fork at a message, with none)", tier: Mandatory, run: checkRollback},
		{id: "rewind-native", title: "/rewind on an agent the sidecar knows to fork at a message: the agent's fork at the last kept message, no handoff, the rewound turn gone", tier: Capability, needs: needForkAtMessage, run: checkRewindNative},
		{id: "crash", title: "the agent killed between turns: the prompt sent right after ends end_turn on the recorded config, with no retry", tier: Mandatory, run: checkCrash},
		{id: "reset-kill", title: "the agent killed during /reset: no prompt runs on a partial config", tier: Capability, needs: needConfig, run: checkResetKill},
		{id: "load", title: "session/load after a sidecar restart replays the turns and answers", tier: Mandatory, run: checkLoad},
		{id: "reopen-config", title: "the config is kept after the agent's own session/load and session/resume", tier: Capability, needs: needReopen, run: checkReopenConfig},
		{id: "close", title: "session/close: never rebuilt behind the client's back, reopened from the record", tier: Mandatory, run: checkClose},
		{id: "delete", title: "session/delete: the record gone, an unknown session deleted too", tier: Mandatory, run: checkDelete},
		{id: "commands", title: "the sidecar's commands reach the client after session/new, load, resume and fork", tier: Mandatory, run: checkCommands},
		{id: "hostile", title: "not JSON, invalid UTF-8, 100k nesting, a frame over --max-frame: an error with the right id, never the agent's", tier: Mandatory, run: checkHostile},
		// What every other check's client received (schema.go).
		{id: "schema", title: "every frame the client received, directly and through the sidecar, is valid by the ACP schema (--schema)", tier: Mandatory, run: checkSchema, afterAll: true},
	}
}

// agentCaps is the part of agentCapabilities the checks branch on. In v2
// (proto.go, readInit) capabilities.session fills SessionCapabilities, with
// list, resume and close, which are baseline there; LoadSession is false.
type agentCaps struct {
	LoadSession         bool                       `json:"loadSession"`
	SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
	proto               int                        // 2 when read from a v2 result
}

// history reports whether the agent reopens a session with its history
// replayed: v1's loadSession; in v2 session/resume with replayFrom, which
// every agent with the session capability serves.
func (c agentCaps) history() bool {
	if c.proto >= protoV2 {
		return c.SessionCapabilities != nil
	}
	return c.LoadSession
}

// session reports whether sessionCapabilities advertises name.
func (c agentCaps) session(name string) bool {
	v, ok := c.SessionCapabilities[name]
	return ok && string(v) != "null"
}

const noConfig = "agent has no config options (no configOptions, modes or models)"

func needConfig(pr probeResult) string {
	if pr.cfg.empty() {
		return noConfig
	}
	return ""
}

func needOptions(pr probeResult) string {
	if pr.cfg == nil || len(pr.cfg.Options) == 0 {
		return "the agent's session/new result has no configOptions"
	}
	return ""
}

// noHistory says why an agent cannot reopen a session with its history.
func noHistory(pr probeResult) string {
	if pr.can.proto >= protoV2 {
		return "the agent does not advertise capabilities.session (whose session/resume replays with replayFrom)"
	}
	return "the agent does not advertise loadSession"
}

func needLoad(pr probeResult) string {
	if !pr.can.history() {
		return noHistory(pr)
	}
	return ""
}

func needSession(name string) func(probeResult) string {
	return func(pr probeResult) string {
		if !pr.can.session(name) {
			return "the agent does not advertise " + sessionCapName(pr.can.proto, name)
		}
		return ""
	}
}

// needReopen: the agent's own load or resume, whose config the sidecar
// puts back.
func needReopen(pr probeResult) string {
	if pr.cfg.empty() {
		return noConfig
	}
	if !pr.can.history() && !pr.can.session("resume") {
		if pr.can.proto >= protoV2 {
			return noHistory(pr)
		}
		return "the agent advertises neither loadSession nor sessionCapabilities.resume"
	}
	return ""
}

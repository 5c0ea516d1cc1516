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
}

func checks() []check {
	return []check{
		// What the agent must do by the spec, judged directly and through
		// the sidecar alike (spec.go): the sidecar must never turn a
		// passing agent check into a failing one.
		{"initialize", "initialize answers protocol version 1 and well-formed capabilities", Mandatory, nil, bothWays(specInitialize)},
		{"session-new", "session/new answers a session id and a well-formed config", Mandatory, nil, bothWays(specSessionNew)},
		{"session-load", "session/load of a session with a turn replays its prompt and answers", Capability, needLoad, bothWays(specSessionLoad)},
		{"load-replay", "session/load replays the agent's reply too, the whole conversation", Advisory, needLoad, bothWays(specLoadReplay)},
		{"session-resume", "session/resume of a session answers, and a prompt follows", Capability, needSession("resume"), bothWays(specSessionResume)},
		{"session-list", "session/list lists the session just used, with its cwd", Capability, needSession("list"), bothWays(specSessionList)},
		{"session-close", "session/close answers success", Capability, needSession("close"), bothWays(specSessionClose)},
		{"session-fork", "session/fork answers a new session that takes a prompt", Capability, needSession("fork"), bothWays(specSessionFork)},
		{"cancel", "session/cancel during a prompt ends it with stopReason cancelled", Mandatory, nil, bothWays(specCancel)},
		{"set-config-option", "session/set_config_option answers the complete option list", Capability, needOptions, bothWays(specSetConfigOption)},
		{"jsonrpc", "unknown method -32601, bad params -32602, and ids of every type come back as sent", Mandatory, nil, bothWays(specJSONRPC)},
		{"eof", "the agent exits when its stdin closes", Advisory, nil, checkEOF},
		// What the sidecar promises (checks.go, promises.go).
		{"transparency", "the same exchange directly and through the sidecar gives the same frames", Mandatory, nil, checkTransparency},
		{"record", "after each change, `show --json` live matches what the agent reported", Capability, needConfig, checkRecord},
		{"reset", "every option set to a non-default value survives /reset", Capability, needConfig, checkReset},
		{"restore-order", "a restore calls model, then mode, then options by id, re-reading the catalog after the model", Capability, needConfig, checkRestoreOrder},
		{"fail-closed", "a start-up --set value the agent does not offer is reported and never sent", Capability, needConfig, checkFailClosed},
		{"rollback", "/rewind: a fresh native session, the config held, the kept turns handed over once without the rewound turn (or the agent's own fork at a message, with none)", Mandatory, nil, checkRollback},
		{"rewind-native", "/rewind on an agent the sidecar knows to fork at a message: the agent's fork at the last kept message, no handoff, the rewound turn gone", Capability, needForkAtMessage, checkRewindNative},
		{"crash", "the agent killed between turns: the prompt sent right after ends end_turn on the recorded config, with no retry", Mandatory, nil, checkCrash},
		{"reset-kill", "the agent killed during /reset: no prompt runs on a partial config", Capability, needConfig, checkResetKill},
		{"load", "session/load after a sidecar restart replays the turns and answers", Mandatory, nil, checkLoad},
		{"reopen-config", "the config is kept after the agent's own session/load and session/resume", Capability, needReopen, checkReopenConfig},
		{"close", "session/close: never rebuilt behind the client's back, reopened from the record", Mandatory, nil, checkClose},
		{"delete", "session/delete: the record gone, an unknown session deleted too", Mandatory, nil, checkDelete},
		{"commands", "the sidecar's commands reach the client after session/new, load, resume and fork", Mandatory, nil, checkCommands},
		{"hostile", "not JSON, invalid UTF-8, 100k nesting, a frame over --max-frame: an error with the right id, never the agent's", Mandatory, nil, checkHostile},
	}
}

// agentCaps is the part of agentCapabilities the checks branch on.
type agentCaps struct {
	LoadSession         bool                       `json:"loadSession"`
	SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
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

func needLoad(pr probeResult) string {
	if !pr.can.LoadSession {
		return "the agent does not advertise loadSession"
	}
	return ""
}

func needSession(name string) func(probeResult) string {
	return func(pr probeResult) string {
		if !pr.can.session(name) {
			return "the agent does not advertise sessionCapabilities." + name
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
	if !pr.can.LoadSession && !pr.can.session("resume") {
		return "the agent advertises neither loadSession nor sessionCapabilities.resume"
	}
	return ""
}

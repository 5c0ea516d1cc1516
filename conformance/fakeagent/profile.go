package fakeagent

import (
	"sort"
	"strings"
)

// Features are the switches a profile presets. Each has a flag of the same
// meaning; a flag given on the command line wins over the profile.
type Features struct {
	ConfigOptions     bool // configOptions in session results; session/set_config_option answers
	LegacyModes       bool // `modes` in session results
	LegacyModels      bool // `models` in session results; session/set_model answers (else -32601)
	ModelDependent    bool // effort exists only for some models and its values change per model
	Load              bool // agentCapabilities.loadSession
	Resume            bool // sessionCapabilities.resume
	List              bool // sessionCapabilities.list
	Fork              bool // sessionCapabilities.fork (unstable)
	Close             bool // sessionCapabilities.close
	Delete            bool // sessionCapabilities.delete; session/delete answers (else -32601)
	ReopenDropsLegacy bool // session/load and session/resume results carry configOptions only, no modes or models
	ResumeNotes       bool // an agent_message_chunk about the model before the session/resume result (like codex-acp 2.6.0)
	Commands          bool // available_commands_update after session/new and session/load
	EarlyUpdates      bool // session/update for a new session before the session/new response
	BrokenSetConfig   bool // set_config_option succeeds but changes nothing
	IgnoreEOF         bool // keep running after stdin EOF until ctx ends (or the process is killed)
	MessageIDs        bool // every agent_message_chunk carries a messageId, one per turn
	InfoUpdates       bool // session_info_update and usage_update end every turn; session/list has updatedAt
	AuthNotice        bool // an `_auth/status_update` notification follows the initialize response
	Subagents         bool // the prompt "subagent" opens a child session, if the client advertised subagents
	StrictInit        bool // a request before initialize gets -32600 (NotInitializedLine); notifications and responses before it are ignored
	ForkAtMessage     bool // session/fork honours _meta.jetbrains.air.fork.messageId: the fork keeps the turns up to that message (like claude-agent-acp 0.101.0, codex-acp 2.6.0)
	EffortModels      bool // legacy models name each model with each of its efforts ("deep-3[max]"), and set_model takes such an id and sets both (like codex-acp 2.6.0)
	FreshLoadFails    bool // session/load of a session this process made less than FreshLoadWindow ago answers -32603 "Internal error" (like gemini-cli 0.61.0)
	V2                bool // a client whose initialize asks protocolVersion >= 2 gets ACP v2 (v2.go); one that asks 1 gets v1, unchanged
	QueuePrompts      bool // a prompt that comes while a turn of its session runs waits and runs after it; session/cancel ends the waiting ones too (like claude-agent-acp 0.101.0, which advertises _meta.claudeCode.promptQueueing)
	CommandsInResult  bool // with V2 and Commands, in v2: the command list goes in every session result and no available_commands_update is sent (like codex-acp 2.6.0)
	LateAccept        bool // with V2, in v2: a prompt's answer ({messageId}) comes after its turn's idle state_update, not at its insertion
	ResumeLies        bool // session/resume of a session the agent does not know succeeds, and a prompt on it fails -32603 "thread not found" (like codex-acp 2.6.0 with its thread gone)
	// Name and Version are the initialize result's agentInfo ("" for
	// fake-agent 1): the sidecar knows some agents by it.
	Name, Version string
}

// profile is one named preset. The table below is the only place presets are
// defined, so the help text and the tests read the same data.
type profile struct {
	name string
	doc  string
	f    Features
}

// profiles returns the preset table. It is a function, not a package
// variable, so no caller can change what another one sees.
func profiles() []profile {
	base := Features{ConfigOptions: true, LegacyModes: true, LegacyModels: true, ModelDependent: true, Load: true, Commands: true}
	with := func(mod func(*Features)) Features {
		f := base
		mod(&f)
		return f
	}
	// claude is claude-current, which v2-current extends.
	claude := with(func(f *Features) {
		f.LegacyModels, f.ModelDependent = false, false
		f.Resume, f.List, f.Close, f.Delete, f.Fork = true, true, true, true, true
		f.MessageIDs, f.InfoUpdates, f.AuthNotice = true, true, true
		f.StrictInit, f.QueuePrompts = true, true
	})
	withV2 := func(f Features) Features {
		f.V2 = true
		return f
	}
	return []profile{
		{"default", "configOptions + legacy modes + models, model-dependent effort, loadSession", base},
		{"legacy-only", "legacy modes + models only; set_config_option answers -32601 (like gemini-cli)",
			with(func(f *Features) { f.ConfigOptions = false })},
		{"config-options-only", "configOptions only (static effort); no modes/models, set_model answers -32601",
			with(func(f *Features) { f.LegacyModes, f.LegacyModels, f.ModelDependent = false, false, false })},
		{"model-dependent", "configOptions only; effort appears, disappears and changes values per model, announced by config_option_update (like opencode)",
			with(func(f *Features) {
				f.LegacyModes, f.LegacyModels = false, false
				f.Resume, f.List, f.Fork, f.Close = true, true, true, true
			})},
		{"no-load", "default without loadSession", with(func(f *Features) { f.Load = false })},
		{"ignores-eof", "default, but keeps running after stdin EOF (like claude-agent-acp, codex-acp)",
			with(func(f *Features) { f.IgnoreEOF = true })},
		{"early-updates", "default, but sends available_commands_update and config_option_update before the session/new response",
			with(func(f *Features) { f.EarlyUpdates = true })},
		{"broken-set-config", "default, but set_config_option answers success with the unchanged options",
			with(func(f *Features) { f.BrokenSetConfig = true })},
		{"forks-at-message", "default with fork and message ids, and session/fork at a message (_meta.jetbrains.air.fork); agentInfo @agentclientprotocol/claude-agent-acp 0.101.0, which the sidecar knows forks at a message",
			with(func(f *Features) {
				f.Fork, f.MessageIDs, f.ForkAtMessage = true, true, true
				f.Name, f.Version = "@agentclientprotocol/claude-agent-acp", "0.101.0"
			})},
		{"gemini-like", "like gemini-cli 0.61.0: legacy modes + models only, loadSession and nothing else (no close, resume, list, fork); a load in the first minute of a session answers -32603; agentInfo gemini-cli 0.61.0",
			with(func(f *Features) {
				f.ConfigOptions, f.ModelDependent = false, false
				f.FreshLoadFails = true
				f.Name, f.Version = "gemini-cli", "0.61.0"
			})},
		// The two below follow shared/acp/agents.md, "The packages editors
		// install today". Neither ignores stdin EOF, though both agents do:
		// add -ignore-eof for that.
		{"claude-current", "like claude-agent-acp 0.101.0: configOptions (static effort) + legacy modes, no legacy models; loadSession, resume, list, close, delete, fork; message ids, info updates, auth notice; strict init; queues a prompt sent while a turn runs",
			claude},
		// claude-agent-acp 0.101.0 speaks v2 to a client that asks for it
		// (testdata/v2); its agentInfo stays fake-agent's, since the
		// sidecar must not need to know an agent by name to speak v2.
		{"v2-current", "claude-current plus -v2: a client whose initialize asks for protocolVersion 2 gets ACP v2, as claude-agent-acp 0.101.0 answers it; one that asks for 1 gets claude-current byte for byte",
			withV2(claude)},
		{"codex-current", "like codex-acp 2.6.0: configOptions (model-dependent effort) + legacy modes and models at session/new; resume without loadSession, list, close, delete, fork; reopen drops legacy; legacy models named model[effort]; subagents; message ids, info updates, auth notice; strict init",
			with(func(f *Features) {
				// agents.md does not say whether codex-acp 2.6.0
				// advertises loadSession; resume without it is the
				// harder case for the sidecar.
				f.Load = false
				f.Resume, f.List, f.Close, f.Delete, f.Fork = true, true, true, true, true
				f.ReopenDropsLegacy, f.Subagents, f.EffortModels = true, true, true
				f.MessageIDs, f.InfoUpdates, f.AuthNotice = true, true, true
				f.StrictInit = true
			})},
	}
}

// ProfileNames lists the presets -profile accepts, sorted.
func ProfileNames() []string {
	var names []string
	for _, p := range profiles() {
		names = append(names, p.name)
	}
	sort.Strings(names)
	return names
}

func lookupProfile(name string) (Features, bool) {
	for _, p := range profiles() {
		if p.name == name {
			return p.f, true
		}
	}
	return Features{}, false
}

func profileHelp() string {
	var b strings.Builder
	for _, p := range profiles() {
		b.WriteString("  " + p.name + ": " + p.doc + "\n")
	}
	return b.String()
}

package life

import (
	"strconv"
	"strings"
	"time"
)

// Some of what an agent does is advertised by no capability, and a sidecar
// that knows the agent can work around it. The agent is known by the
// agentInfo of its initialize result, its name and version; the table
// below is the only place such knowledge lives, and docs/agents.md lists
// the same rows.

// Habits are what the sidecar knows of the agent beyond its capabilities.
type Habits struct {
	// LosesFreshLoads: the agent's session/load of a session it created
	// within the last minute fails (gemini-cli answers -32603 "Internal
	// error"; its tracker has it as #28693 and #28775). A rebuild does not
	// ask it to load such a session, and goes straight to a fresh one with
	// the handoff.
	LosesFreshLoads bool
	// ForksAtMessage: the agent's session/fork honours
	// `_meta.jetbrains.air.fork` {version 1, messageId}, keeping its
	// history up to that message of its own (claude-agent-acp
	// dist/fork-session.js; codex-acp src/SessionFork.ts). A rewind is
	// then such a fork, which keeps the real history (tool results, file
	// contents) where a handoff carries text.
	ForksAtMessage bool
	// WarnsInText: to a client that declares no session.notices, the agent
	// sends its warnings as agent_message_chunk text with no messageId,
	// "Warning: …" or "Config warning: …" (codex-acp 2.6.0, whose own
	// chunks of a message always carry one). The record keeps them as the
	// turn's notices, not its answer.
	WarnsInText bool
}

// FreshLoadWindow is how long after a session's creation an agent with
// LosesFreshLoads fails to load it.
const FreshLoadWindow = time.Minute

// knownAgent is one row of the table: the agents named name (the last
// path element of agentInfo.name, so "@agentclientprotocol/codex-acp" is
// "codex-acp"), of version since or later ("" for any), have habits.
type knownAgent struct {
	name, since string
	habits      Habits
}

// knownAgents is the table. It is a function, so nothing can change what
// another caller reads.
func knownAgents() []knownAgent {
	return []knownAgent{
		{name: "gemini-cli", habits: Habits{LosesFreshLoads: true}},
		{name: "claude-agent-acp", since: "0.101.0", habits: Habits{ForksAtMessage: true}},
		{name: "codex-acp", since: "2.6.0", habits: Habits{ForksAtMessage: true, WarnsInText: true}},
	}
}

// HabitsOf is what the table says of the agent named name at version.
func HabitsOf(name, version string) Habits {
	var h Habits
	short := name[strings.LastIndexByte(name, '/')+1:]
	for _, k := range knownAgents() {
		if k.name != short || k.since != "" && !versionAtLeast(version, k.since) {
			continue
		}
		h.LosesFreshLoads = h.LosesFreshLoads || k.habits.LosesFreshLoads
		h.ForksAtMessage = h.ForksAtMessage || k.habits.ForksAtMessage
		h.WarnsInText = h.WarnsInText || k.habits.WarnsInText
	}
	return h
}

// versionAtLeast compares dotted release numbers ("0.101.0"), ignoring a
// pre-release or build suffix; a version it cannot read is not at least
// anything, so an unknown build gets no habit it may not have.
func versionAtLeast(v, min string) bool {
	a, ok := numbers(v)
	b, okMin := numbers(min)
	if !ok || !okMin {
		return false
	}
	for i := range max(len(a), len(b)) {
		x, y := at(a, i), at(b, i)
		if x != y {
			return x > y
		}
	}
	return true
}

func numbers(v string) ([]int, bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	if v == "" {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func at(n []int, i int) int {
	if i < len(n) {
		return n[i]
	}
	return 0
}

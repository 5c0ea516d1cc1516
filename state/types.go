package state

import (
	"encoding/json"
	"time"
)

// Session is the record of one client-facing session (DESIGN.md, "The state
// model"). The client id is the key and never changes; everything the agent said
// about its configuration is kept in the agent's own words, as raw JSON next to
// the few fields the sidecar needs to reason about.
type Session struct {
	// ClientID is the session id the client knows. It is stable across rebuilds.
	ClientID string `json:"clientId"`
	// NativeID is the agent's id for the native session currently behind ClientID.
	NativeID string `json:"nativeId,omitempty"`
	// NativeHistory lists every native id this session has had, oldest first,
	// including NativeID. The store maps each of them back to ClientID, so a late
	// frame from an old native session is still attributed correctly.
	NativeHistory []string `json:"nativeHistory,omitempty"`
	// Natives says, oldest first, each time a native session was put behind
	// ClientID, why, and how the agent gave it: a crash the agent's resume
	// came back from under the same id is an entry too, so the list can be
	// longer than NativeHistory. Records written before it existed have
	// none (docs/record.md, "Native sessions"). Behind keeps it and
	// NativeHistory together.
	Natives []Native `json:"natives,omitempty"`
	// Agent is the agent command line (argv) the session ran under.
	Agent []string `json:"agent,omitempty"`
	// AgentName is the configured name of the agent the session runs on now
	// (AgentInfo.Name): the sidecar can switch a session between agents, and a
	// rebuild must start the one it was on. "" in records written before agents
	// had names.
	AgentName string `json:"agentName,omitempty"`
	// Protocol is the ACP version the session was last recorded in (1 or
	// 2): the record is one format for both, and a session recorded in one
	// version can be reopened in the other. 0 in records written before it
	// existed, which were all v1.
	Protocol int    `json:"protocol,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
	// McpServers is the client's mcpServers array as it sent it: a rebuild must
	// pass the same servers, and the sidecar has no reason to understand them.
	McpServers            json.RawMessage `json:"mcpServers,omitempty"`
	AdditionalDirectories []string        `json:"additionalDirectories,omitempty"`
	// Meta is the _meta of the client's request that made the session
	// (session/new, or session/fork without the fork point), or of the
	// load or resume that last opened it with one, as the client sent it:
	// clients pass creation options there (claude-agent-acp's systemPrompt,
	// allowed tools, which settings to read), and every native session the
	// sidecar makes or climbs to for the session must get them again.
	// Nothing the sidecar itself adds to a request is in it. nil when the
	// client sent none.
	Meta json.RawMessage `json:"meta,omitempty"`
	// NewParams are the other members of the client's session/new params,
	// the ones the sidecar has no field for (ACP's systemPrompt, and what
	// the protocol adds later), as an object of the members as the client
	// sent them: every native session the sidecar makes for the session
	// gets them again, as it gets Meta. nil when there were none.
	NewParams json.RawMessage `json:"newParams,omitempty"`
	Created   time.Time       `json:"created"`
	Updated   time.Time       `json:"updated"`

	// Baseline is the config the agent reported when the native session was
	// created. Display and comparison only; never restored.
	Baseline *Config `json:"baseline,omitempty"`
	// Original is the effective config once the agent's defaults and the
	// sidecar's start-up --set values have settled. The store writes it once and
	// refuses a different one later (ErrOriginalExists); a nil Original in a put
	// leaves the stored one alone. restore-original is its only reader.
	Original *Config `json:"original,omitempty"`
	// Live is what the agent last accepted. Only the agent's own reports go here.
	Live *Config `json:"live,omitempty"`
	// Overrides are the client's explicit, accepted selections, in order.
	Overrides []Override `json:"overrides,omitempty"`

	Lineage *Lineage `json:"lineage,omitempty"`
	// Blocked is set while a rebuild failed to restore the config; the next
	// prompt is refused until the user resets or accepts (DESIGN.md "Fail closed").
	Blocked *Blocked `json:"blocked,omitempty"`
	// SetErrors are the start-up --set values the agent did not accept. `show`
	// displays them; they do not block the session.
	SetErrors []SetError `json:"setErrors,omitempty"`
	// Handoff records the last delivery of kept turns to a fresh native session.
	Handoff *Handoff `json:"handoff,omitempty"`
	// ContextFrom is the index of the first turn the current conversation
	// holds: a reset clears the context on purpose, so the turns before it
	// are kept in the record but never handed to a fresh native session.
	ContextFrom int `json:"contextFrom,omitempty"`
	// Closed is when the client closed the session (session/close); nil
	// while it is open. A closed session is never rebuilt, resumed or
	// loaded behind the client's back; the client's own load or resume
	// reopens it.
	Closed *time.Time `json:"closed,omitempty"`
	// HandoffPending says the current native session lacks the kept turns
	// (it replaced one after a rollback, a crash or a fork), so the next
	// prompt carries them once.
	HandoffPending bool `json:"handoffPending,omitempty"`
	// Title is the title the agent last gave the session
	// (session_info_update): `sessions`, `show` and the session/list the
	// sidecar answers show it. "" when the agent gave none, or cleared it
	// (a title of null).
	Title string `json:"title,omitempty"`
	// Compaction is the agent's latest completed compaction of the
	// session's context that left a summary; nil when there was none.
	// A handoff after it hands over the summary in place of the turns
	// before it (docs/sessions.md, "Compaction").
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Native is one time a native session was put behind a client session
// (Session.Natives).
type Native struct {
	ID string `json:"id"`
	// Event is why: one of the Made* constants.
	Event string `json:"event"`
	// Path is how the agent gave it: "new", "fork", "load" or "resume"
	// (a session it brought back).
	Path string `json:"path,omitempty"`
	// Host is the host of the sidecar that put it there ("" unknown): a
	// reopen on another host of a fleet is a failover.
	Host string    `json:"host,omitempty"`
	At   time.Time `json:"at"`
	// Handoff is the kept-turn handoff this native session got with a
	// prompt, nil for none; the text is that turn's (Turn.Handoff).
	Handoff *Handoff `json:"handoff,omitempty"`
}

// The events that put a native session behind a client session
// (Native.Event).
const (
	MadeNew    = "new"    // the client's session/new
	MadeFork   = "fork"   // a fork: the client's session/fork, or the sidecar's own
	MadeOpen   = "open"   // the client's own session/load or session/resume, answered by the agent
	MadeReset  = "reset"  // /reset: a new conversation on the same config
	MadeRewind = "rewind" // a rollback of the last turns
	MadeCrash  = "crash"  // the agent died, and the crash ladder brought the session back
	// MadeReopen: the client's load or resume of a session not live in this
	// sidecar (it restarted), brought back by the ladder.
	MadeReopen = "reopen"
	// MadeFailover: a reopen or an open on another host than the one the
	// session ran on last, in a fleet.
	MadeFailover = "failover"
	// MadeAbsorbed: the agent failed the client's load or resume, and the
	// record answered it on a fresh native session.
	MadeAbsorbed = "absorbed"
	MadeSwitch   = "switch" // the session moved to another agent
)

// Behind puts native session n behind s: it becomes s's current native
// session, NativeHistory names it (once, when it is not the last already)
// and Natives says why. A reopen or an open on another host than the one
// the session last ran on, both known, is a failover.
func (s *Session) Behind(n Native) {
	if last := s.LastNative(); (n.Event == MadeReopen || n.Event == MadeOpen) && last != nil && last.Host != "" && n.Host != "" && last.Host != n.Host {
		n.Event = MadeFailover
	}
	s.NativeID = n.ID
	if len(s.NativeHistory) == 0 || s.NativeHistory[len(s.NativeHistory)-1] != n.ID {
		s.NativeHistory = append(s.NativeHistory, n.ID)
	}
	s.Natives = append(s.Natives, n)
}

// LastNative is the newest entry of Natives, nil when there is none.
func (s *Session) LastNative() *Native {
	if len(s.Natives) == 0 {
		return nil
	}
	return &s.Natives[len(s.Natives)-1]
}

// MadeByRebuild says whether the sidecar made native session id for s in a
// rebuild (a reset, a rewind, a crash, a reopen, an answer to a failed
// load, a move between agents) as a fresh one the agent had to make or
// fork: the title the agent gives it comes from what that native session
// saw first (a prompt after a reset, "… (fork)"), not from the session.
func (s *Session) MadeByRebuild(id string) bool {
	for _, n := range s.Natives {
		if n.ID != id {
			continue
		}
		// The entry that brought id in first says how it was made.
		switch n.Event {
		case MadeNew, MadeFork, MadeOpen:
			return false
		}
		return n.Path == "new" || n.Path == "fork"
	}
	return false
}

// ProtocolVersion is the ACP version the session was last recorded in,
// with the records written before Protocol existed read as the v1 they
// were.
func (s *Session) ProtocolVersion() int { return max(s.Protocol, 1) }

// Compaction is what the record keeps of the agent's own compaction of a
// session's context (ACP's compaction_update and compaction_summary_chunk):
// the agent replaced the turns before Turn in its context by Summary, so
// Summary, not those turns, is what the agent knew of them.
type Compaction struct {
	// ID is the agent's compactionId.
	ID string `json:"id"`
	// Turn is the index of the turn the compaction ran in, or of the next
	// turn when it ran between turns: the summary stands for the turns
	// before it, and Turn and those after it follow the summary.
	Turn int `json:"turn"`
	// Summary is the text of the summary's text blocks.
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// Override is one explicit, accepted selection by the client.
type Override struct {
	OptionID string `json:"optionId"`
	Category string `json:"category,omitempty"`
	// Value is the value as the client sent it and the agent accepted it.
	Value json.RawMessage `json:"value"`
	At    time.Time       `json:"at"`
}

// Lineage ties a fork to its parent: the fork inherits the parent's kept turns
// before ForkTurn ahead of its own.
type Lineage struct {
	ParentID string `json:"parentId"`
	ForkTurn int    `json:"forkTurn"`
}

// Blocked says which fields a rebuild could not restore and why.
type Blocked struct {
	Fields []string  `json:"fields"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// SetError is one start-up --set id=value that did not take.
type SetError struct {
	OptionID string `json:"optionId"`
	Value    string `json:"value"`
	Err      string `json:"error"`
}

// Handoff is the bookkeeping of the kept-turn handoff (DESIGN.md "Hand over"):
// which native session received it, with which turn, and how much was left out.
type Handoff struct {
	NativeID string    `json:"nativeId"`
	Turn     int       `json:"turn"`
	Kept     int       `json:"kept"`
	Omitted  int       `json:"omitted"`
	At       time.Time `json:"at"`
}

// Config is one snapshot of a session's configuration in the agent's words: the
// configOptions catalog and the legacy modes/models APIs, each with its raw JSON.
type Config struct {
	Options []Option `json:"options,omitempty"`
	Mode    *Legacy  `json:"mode,omitempty"`
	Model   *Legacy  `json:"model,omitempty"`
	// Raw is the whole payload the snapshot came from, kept for display and for
	// anything a later version learns to read.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Option is one entry of the agent's configOptions catalog.
type Option struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Category string `json:"category,omitempty"`
	Type     string `json:"type,omitempty"`
	// Current is the option's current value as the agent reported it.
	Current json.RawMessage `json:"current,omitempty"`
	Values  []Value         `json:"values,omitempty"`
	Raw     json.RawMessage `json:"raw,omitempty"`
}

// Value is one value an option offers.
type Value struct {
	Value json.RawMessage `json:"value"`
	Name  string          `json:"name,omitempty"`
}

// Legacy is the pre-configOptions modes or models API: a current id and the ids
// on offer.
type Legacy struct {
	Current   string          `json:"current"`
	Available []string        `json:"available,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty"`
}

// TurnStatus is where a turn ended up.
type TurnStatus string

// Turn statuses. A rollback deletes no turn: it marks the turns after the
// kept ones TurnRolledBack (only DeleteSession removes turns, with their
// session), and a turn that was running when its process died
// reads TurnRunning until someone marks it TurnInterrupted.
const (
	TurnRunning     TurnStatus = "running"
	TurnCompleted   TurnStatus = "completed"
	TurnCancelled   TurnStatus = "cancelled"
	TurnFailed      TurnStatus = "failed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnRolledBack  TurnStatus = "rolled_back"
)

// Turn is one session/prompt and what came of it.
type Turn struct {
	// Index numbers turns from 1 within their session.
	Index int `json:"index"`
	// Prompt is the prompt's content blocks as the client sent them.
	Prompt json.RawMessage `json:"prompt,omitempty"`
	// PromptText is the text of Prompt's text blocks, for handoff and display.
	PromptText string `json:"promptText,omitempty"`
	// Answer is the agent's text of the turn, its notices left out.
	Answer    string     `json:"answer,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Notices are the advisories the agent showed the user during the
	// turn, in order: `notice` updates and the message chunks
	// claude-agent-acp marks as its notices' transcript form. They are
	// not what the agent said in the conversation, so no handoff carries
	// them.
	Notices []string `json:"notices,omitempty"`
	// Origin says who began the turn: "" the client's prompt, or
	// OriginAgent for a turn the agent began itself (ACP v2: foreground
	// work reported running, or requires_action, with no prompt in
	// flight), which has no prompt.
	Origin string `json:"origin,omitempty"`
	// Asked is what the agent asked the user during the turn, in order:
	// the tool call a permission request was about, an elicitation's
	// message. A handoff carries them as the agent's.
	Asked []string `json:"asked,omitempty"`
	// MessageID is the ACP messageId of the agent's last message in the
	// turn, where the agent gives one and forks at a message, or speaks
	// ACP v2: a native rewind forks at it, and a replay from the record
	// gives the answer under it ("" otherwise).
	MessageID string `json:"messageId,omitempty"`
	// UserMessageID is the messageId a v2 agent accepted the prompt with:
	// a replay from the record gives the user's message under it, as the
	// client had it live ("" in v1).
	UserMessageID string `json:"userMessageId,omitempty"`
	StopReason    string `json:"stopReason,omitempty"`
	// NativeID is the native session that ran the turn.
	NativeID string     `json:"nativeId,omitempty"`
	Status   TurnStatus `json:"status"`
	// HandoffDelivered says this turn's prompt carried the kept-turn handoff to
	// NativeID, so that native session must not get it again.
	HandoffDelivered bool `json:"handoffDelivered,omitempty"`
	// Handoff is the exact text of the handoff this turn's prompt carried
	// ahead of the user's own blocks (Prompt holds only those): what `show`
	// and `ui` display for the native session that got it. "" for a turn
	// that carried none, and for turns recorded before it was kept.
	Handoff string `json:"handoff,omitempty"`
	// Agent is the configured name of the agent that ran the turn
	// (AgentInfo.Name), since one session may switch agents between turns; ""
	// for turns recorded before agents had names. It is stored as "agentName"
	// because older records hold the agent's argv under "agent": reusing that
	// key with another type would make an older and a newer sidecar sharing
	// one store fail to read each other's turns.
	Agent   string    `json:"agentName,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// OriginAgent is the Origin of a turn the agent began itself.
const OriginAgent = "agent"

// ToolCall is what a turn keeps of one tool call.
type ToolCall struct {
	ID     string `json:"id"`
	Title  string `json:"title,omitempty"`
	Status string `json:"status,omitempty"`
}

// Summary is one line of a session listing.
type Summary struct {
	ID    string   `json:"id"`
	Agent []string `json:"agent,omitempty"`
	// AgentName is the session's Session.AgentName.
	AgentName string `json:"agentName,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	// Title is the session's Session.Title ("" for none).
	Title string `json:"title,omitempty"`
	// Turns counts the turns that are not rolled back.
	Turns        int       `json:"turns"`
	LastActivity time.Time `json:"lastActivity"`
	// Live says a running sidecar process has written this session since it
	// connected to the store, i.e. some editor has it open now. A closed
	// session is never live.
	Live bool `json:"live,omitempty"`
	// Closed says the client closed the session (Session.Closed).
	Closed bool `json:"closed,omitempty"`
	// Holder is the host whose sidecar holds the session's lease, in a
	// fleet's store ("" elsewhere, and when no lease is live).
	Holder string `json:"holder,omitempty"`
}

// AgentInfo is what the sidecar learned about a named agent when it first
// started it: its initialize result, so later runs can promise the client only
// what every configured agent supports without starting each one.
type AgentInfo struct {
	// Name is the agent's configured name ("claude", "codex") and the record's
	// key.
	Name    string   `json:"name"`
	Command []string `json:"command,omitempty"`
	// Init is the agent's initialize result as it sent it (raw JSON).
	Init    json.RawMessage `json:"init,omitempty"`
	Learned time.Time       `json:"learned"`
}

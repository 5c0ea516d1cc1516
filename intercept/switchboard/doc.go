// Package switchboard puts several agents behind one client, so one
// conversation can move between them (Claude to draft, Codex to review)
// while the editor sees one agent and one session. Each agent runs behind a
// relay and a recorder of its own, exactly as a single agent would; the
// switchboard routes the client's frames by session to the agent the
// session runs on, keeps the agents' request ids apart, adds the agent
// selector to what the client sees, and moves a session when the client
// picks another agent.
//
// It knows a recorder only by the small interface it declares (Recorder),
// and frames only through proxy/ and intercept/wire.
package switchboard

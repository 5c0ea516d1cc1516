// Package agenthost owns an agent process's life on behalf of the host
// that runs it (`run`, or `serve`, whose agents outlive any one
// connection): starting the agent, starting it again when it dies while its
// client is still there (within proxy.RestartPolicy), stopping its whole
// process tree and what a dead agent left behind, and the order in which a
// run is torn down (DESIGN.md "Processes").
//
// An Agent is one agent kept alive across restarts. WireRelay hands a
// proxy.Config the agent's pipes and the hooks through which the relay
// reports the agent's end; Run relays until the agent is gone for good,
// then ends, in this order: the owner of the agent's shutdown (started by
// the client's EOF or a signal), the goroutines that initialize restarted
// agents, the recorder's last writes (bounded), the last agent's status. A
// Group keeps the runs of several agents at once, and stops them all on a
// signal.
//
// It knows that there is an agent process and what becomes of it, never
// what the agent says: it reads no frame and names no ACP message. What a
// death or a restart means for the client's requests and sessions is told
// to a Life, which intercept/ provides, and the Life, not this package,
// initializes a restarted agent. The process primitives (pipes, the process
// group, the tree found by parent pid, the grace periods of a shutdown) are
// proxy.Process's. It never calls proxy.AdoptOrphans, which changes the
// whole process: the CLI does, once. It imports nothing of ours but proxy/.
package agenthost

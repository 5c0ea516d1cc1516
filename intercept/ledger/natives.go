package ledger

import (
	"encoding/json"
	"slices"
)

// Natives is what the sidecar keeps per native session while frames pass:
// whether the agent sent its command list since the session was opened,
// the agent's own list in v2, which of its updates are kept from the
// client, and the sidecar's own session/new calls in flight, whose
// sessions' early frames wait.
type Natives struct {
	commands map[string]bool // native ids the agent sent a command list for since they were opened
	// agentCommands is the agent's own command list, as it last gave it,
	// by native id, in v2 (AgentCommands).
	agentCommands map[string][]json.RawMessage
	hushes        map[string][]Hush // native id -> the kinds of its updates kept back, one per holder
	creating      int               // the sidecar's own session/new calls in flight
	created       chan struct{}     // closed when the creations in flight end
}

// SawCommands notes that the agent sent a command list for a native session.
func (b *Natives) SawCommands(native string) { b.commands[native] = true }

// AgentCommands keeps the agent's own command list for a native session.
// A v2 agent gives it in a session's result, and each list that follows
// (the result's, an update's) replaces the one before, so every list the
// sidecar sends of its own carries the agent's commands with its own
// (intercept's ownCommands): else it would take them from the editor.
func (b *Natives) AgentCommands(native string, list []json.RawMessage) {
	b.agentCommands[native] = list
}

// Opening forgets that the agent sent a command list for a native session
// it is asked to load or resume again: the sidecar's own list follows the
// open unless the agent sends one anew.
func (b *Natives) Opening(native string) { delete(b.commands, native) }

// forget drops the command list of a native session nobody goes back to.
func (b *Natives) forget(native string) { delete(b.agentCommands, native) }

// Hush keeps h of native's updates from the client, until Unhush of the
// same h.
func (b *Natives) Hush(native string, h Hush) { b.hushes[native] = append(b.hushes[native], h) }

// Unhush ends one Hush of h on native; the other holders' stay.
func (b *Natives) Unhush(native string, h Hush) {
	held := b.hushes[native]
	if i := slices.Index(held, h); i >= 0 {
		held = slices.Delete(held, i, i+1)
	}
	if len(held) == 0 {
		delete(b.hushes, native)
		return
	}
	b.hushes[native] = held
}

// BeginCreating notes one of the sidecar's own session/new calls: agent
// frames for a session nobody knows are held until it ends (Early).
func (b *Natives) BeginCreating() {
	if b.creating == 0 {
		b.created = make(chan struct{})
	}
	b.creating++
}

// EndCreating ends one, and when none is left lets every held frame go. It
// runs whatever the call's outcome, under the lock Early takes, so no frame
// can be held after the last release.
func (b *Natives) EndCreating() {
	b.creating--
	if b.creating == 0 {
		close(b.created)
		b.created = nil
	}
}

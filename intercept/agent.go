package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Agent is what the supervisor tells of the agent's life (DESIGN.md
// "While the agent's side is being rebuilt, the client waits"): it died,
// a restarted one is up, or it will not be restarted again. Each moves the
// life, and does to the ledger and the record what that means for the
// client: the requests the dead agent had are answered, the sessions are
// kept and rebuilt on their next request, and the running turns end
// interrupted. The sidecar never resends a prompt by itself.
type Agent struct {
	life        *life.Life
	led         *ledger.Ledger
	turns       interface{ Interrupted(ctx context.Context) } // the record
	sc          Sidecar                                       // bound with the Recorder (Bind)
	log         *slog.Logger
	callTimeout time.Duration
}

// End is called the moment the agent's output ends while the client is
// still there (proxy.Config.OnAgentEnd), while no client frame is being
// decided: from here on a request waits for the next agent instead of
// going to the dead one. The death is one update of the ledger: what the
// dead agent had is taken out, and every session is marked for a rebuild.
// It answers nothing yet; Gone does, once the exit status is known.
func (a *Agent) End() {
	a.led.Update(func(f *ledger.Flight) { f.AgentEnded(a.died) })
}

// died ends the agent's life: the life that begins is the next agent's.
// The ledger calls it once per death (Flight.AgentEnded).
func (a *Agent) died() uint64 { return a.life.Gone("its output ended") }

// Gone is called when the agent has exited while the client is still
// there. In one update of the ledger it ends the agent's life if End did
// not, and takes what the death left to answer; then it answers the
// requests the dead agent had, and ends the running turns interrupted.
func (a *Agent) Gone(ctx context.Context, reason string) {
	var gone ledger.Gone
	a.led.Update(func(f *ledger.Flight) {
		f.AgentEnded(a.died)
		gone = f.TakeGone()
	})
	for _, q := range gone.Sent {
		msg := fmt.Sprintf("acp-sidecar: the agent exited (%s) while this %s was pending. The session was kept; send it again.", reason, q.Method)
		if err := a.sc.Send(proxy.AgentToClient, proxy.ErrorResponse([]byte(q.ID), proxy.CodeAgentGone, msg)); err != nil {
			a.log.Debug("answer a request the dead agent had", "err", err) // the client is gone: nobody to tell
		}
	}
	// A v2 turn the dead agent ran has had its prompt's answer: its end is
	// what the client waits for, and it failed the way a v1 prompt does.
	for _, sid := range gone.Turns {
		msg := fmt.Sprintf("acp-sidecar: the agent exited (%s) while this turn ran. The session was kept; send the prompt again.", reason)
		if err := a.sc.Send(proxy.AgentToClient, wire.StateFailed(sid, proxy.CodeAgentGone, msg)); err != nil {
			a.log.Debug("end a turn the dead agent ran", "err", err) // the client is gone: nobody to tell
		}
	}
	a.turns.Interrupted(ctx)
}

// Back initializes a restarted agent the way the client did, then lets
// requests through again.
func (a *Agent) Back(ctx context.Context) error {
	initParams, authParams := a.life.Params()
	ctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	if initParams != nil {
		var res json.RawMessage
		if err := a.sc.Call(ctx, wire.Initialize, initParams, &res); err != nil {
			return fmt.Errorf("initialize the restarted agent: %w", err)
		}
		caps := parseCaps(res)
		if old := a.life.LearnCaps(caps); old.Load && !caps.Load || old.Resume && !caps.Resume {
			a.log.Warn("the restarted agent offers less than before; sessions are rebuilt with session/new", "load", caps.Load, "resume", caps.Resume)
		}
	}
	if authParams != nil {
		if err := a.sc.Call(ctx, wire.Authenticate, authParams, nil); err != nil {
			return fmt.Errorf("authenticate the restarted agent: %w", err)
		}
	}
	a.life.Back()
	a.log.Info("the restarted agent is initialized; the requests that waited go on")
	return nil
}

// Dead is called when the agent will not be restarted again: every request
// from now on gets a clear error.
func (a *Agent) Dead(reason string) { a.life.Dead(reason) }

// parseCaps reads what the agent said it can do from its initialize result,
// in the version it chose. In v2, an agent with a session capability has
// list, resume and close as its baseline, and no session/load.
func parseCaps(result json.RawMessage) life.Caps {
	type info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	var r struct {
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage
		} `json:"agentCapabilities"`
		AgentInfo    info `json:"agentInfo"`
		Capabilities struct {
			Session map[string]json.RawMessage `json:"session"`
		} `json:"capabilities"`
		Info info `json:"info"`
	}
	if json.Unmarshal(result, &r) != nil {
		return life.Caps{} // a result we cannot read promises nothing
	}
	present := func(m map[string]json.RawMessage, k string) bool { v, ok := m[k]; return ok && !wire.IsNull(v) }
	v := wire.VersionOf(result)
	if v >= wire.V2 {
		s := r.Capabilities.Session
		base := s != nil
		return life.Caps{Protocol: int(v), Resume: base, List: base, Close: base,
			Fork: present(s, "fork"), Delete: present(s, "delete"),
			Agent: r.Info.Name, Version: r.Info.Version, Habits: life.HabitsOf(r.Info.Name, r.Info.Version)}
	}
	sc := r.AgentCapabilities.SessionCapabilities
	return life.Caps{Protocol: int(wire.V1), Load: r.AgentCapabilities.LoadSession, Resume: present(sc, "resume"), List: present(sc, "list"), Fork: present(sc, "fork"),
		Close: present(sc, "close"), Delete: present(sc, "delete"),
		Agent: r.AgentInfo.Name, Version: r.AgentInfo.Version, Habits: life.HabitsOf(r.AgentInfo.Name, r.AgentInfo.Version)}
}

package intercept

import (
	"context"
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// When the client opens a session (session/new, load, resume, fork), the
// record holds the agent's response until it is written (holds), and then
// lets it go with what the sidecar owes the client for that open: its own
// slash commands when the agent has sent no list for the native session
// since the open (the agent's later list is merged with them, commands.go),
// and for a load or resume the pickers the result lacks (pickers.go).
//
// Agents drop the chosen model and mode after their own session/load
// (agents.md), and may return a fork on their defaults. A load or resume of
// a session this process already knows, and a fork of one, therefore get
// the session's (the parent's) config back before the client sees the
// result, restored as any rebuild restores it, and failing closed.

// opened lets an open's held response go, once the record has it.
func (r *Recorder) opened(ctx context.Context, s *session, req *request, ev event, result json.RawMessage, before *state.Config) {
	reopened := req.method == wire.SessionLoad || req.method == wire.SessionResume
	if before != nil && (reopened || req.method == wire.SessionFork) {
		r.restoreAfterOpen(ctx, s, ev, result, before)
		return
	}
	line := ev.raw
	if reopened {
		line = withResult(line, withPickers(result, s.rec.Baseline, s.rec.Live))
	}
	r.flush(ctx)
	ev.release(append([][]byte{line}, ownCommands(r.led, s.rec.NativeID, s.rec.ClientID)...)...)
}

// restoreAfterOpen puts the config the session had before the agent's own
// load or resume back on it, then lets the response go with the restored
// config in it. The calls run on a goroutine of their own: their answers
// come back through the agent's pump, which the recorder must keep
// draining (as applySettings).
func (r *Recorder) restoreAfterOpen(ctx context.Context, s *session, ev event, result json.RawMessage, before *state.Config) {
	native, client := s.rec.NativeID, s.rec.ClientID
	target := before
	catalog := cloneConfig(s.rec.Live)
	_, began := begin(r.led, client, "restore after "+ev.req.method)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// The agent's reports of the restore's calls would reach the client
		// after the held response, which carries the settled config, and
		// name interim values (the config_option_update that follows a
		// model change names the effort and mode before their calls). They
		// are kept from the client; the response is followed by the
		// restore's own report of where it settled.
		hushed := hush(r.led, native, ledger.HushConfig)
		out := r.eng.restore(ctx, native, target, catalog)
		hushed()
		r.enqueue(event{fn: func(ctx context.Context) {
			if began {
				defer r.led.Update(func(f *ledger.Flight) { f.End(client) })
			}
			var blocked *state.Blocked
			switch {
			case out.lost:
				// The agent died under the restore: the rebuild that
				// follows aims at the whole target, not at what landed.
				r.led.Update(func(f *ledger.Flight) { f.Owe(client, target) })
			case len(out.failed) > 0:
				blocked = blockedBy(out, r.cfg.Now())
				r.led.Update(func(f *ledger.Flight) { f.Owe(client, target) })
			default:
				r.led.Update(func(f *ledger.Flight) { f.Owe(client, nil) })
			}
			r.led.Update(func(f *ledger.Flight) { f.SetBlocked(client, blocked) })
			s.rec.Live, s.rec.Blocked = out.catalog, blocked
			r.putSession(ctx, s)
			r.flush(ctx)
			res := result
			if out.optionsRaw != nil {
				if next, err := wire.SetPath(res, out.optionsRaw, "configOptions"); err == nil {
					res = next
				}
			}
			lines := [][]byte{withResult(ev.raw, withPickers(res, before, out.catalog))}
			lines = append(lines, ownCommands(r.led, native, client)...)
			ev.release(append(lines, out.notifications(client)...)...)
		}, release: ev.release, raw: ev.raw})
	}()
}

// withResult is a response line with its result replaced.
func withResult(line []byte, result json.RawMessage) []byte {
	out, err := wire.SetPath(line, result, "result")
	if err != nil {
		return line // not an object: it goes as it came
	}
	return out
}

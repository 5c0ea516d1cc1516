package ledger

import "github.com/acp-sidecar/acp-sidecar/state"

// Sessions is each client session's flight state: the native session
// behind it, whether a rebuild runs on it or it died with the agent, its
// block, what a failed restore owes, its title's owner, its turns
// (turns.go), and which client sessions the client closed.
type Sessions struct {
	all     map[string]*Session // client id -> flight state
	clients map[string]string   // native id (current and past) -> client id
	closed  map[string]bool     // client ids closed and not reopened since

	mapped    bool // some client id differs from its native id
	staleN    int  // sessions marked Stale
	busyN     int  // sessions Busy or Announced
	turnsN    int  // sessions whose v2 turn runs
	unprovenN int  // sessions with an Unproven native
	// woke: a change ended a rebuild or made a session ready; the ledger
	// wakes the waiters after the update (Ledger.settle).
	woke bool
}

// session is sid's flight state, made on first use.
func (b *Sessions) session(sid string) *Session {
	s := b.all[sid]
	if s == nil {
		s = &Session{}
		b.all[sid] = s
	}
	return s
}

// remap puts native behind client, stale at once if the agent that made it
// has died since, and returns the native session it had.
func (b *Sessions) remap(client, native string, stale bool) (old string) {
	s := b.session(client)
	old, s.Native = s.Native, native
	b.clients[native] = client
	if client != native {
		b.mapped = true
	}
	if stale {
		b.markStale(s)
	}
	return old
}

// MarkStale marks a session to be rebuilt before its next request: one the
// record brought back from the store, whose native session is not live here.
func (b *Sessions) MarkStale(sid string) { b.markStale(b.session(sid)) }

func (b *Sessions) markStale(s *Session) {
	if !s.Stale {
		s.Stale = true
		b.staleN++
	}
}

// settled clears sid's stale mark after a rebuild landed, unless the
// agent died since (live false), and wakes the waiters either way.
func (b *Sessions) settled(sid string, live bool) {
	b.woke = true
	s := b.all[sid]
	if s == nil || !live {
		return
	}
	if s.Stale {
		s.Stale = false
		b.staleN--
	}
}

// agentGone marks every session with a native session to be rebuilt: its
// native session died with the agent.
func (b *Sessions) agentGone() {
	for _, s := range b.all {
		if s.Native != "" {
			b.markStale(s)
		}
	}
	b.woke = true
}

// Begin marks a client session busy with a rebuild; when one runs already
// it returns what that is, and false.
func (b *Sessions) Begin(sid, what string) (string, bool) {
	s := b.session(sid)
	if s.Busy != "" {
		return s.Busy, false
	}
	if s.Announced == 0 {
		b.busyN++
	}
	s.Busy = what
	return "", true
}

// End ends the rebuild Begin marked, and wakes what waits for it.
func (b *Sessions) End(sid string) {
	if s := b.all[sid]; s != nil && s.Busy != "" {
		s.Busy = ""
		if s.Announced == 0 {
			b.busyN--
		}
		if *s == (Session{}) {
			// A rebuild of a session nobody knows (a client's /reset of a
			// made-up id) left nothing: the ledger does not keep it, so
			// such requests cannot grow it.
			delete(b.all, sid)
		}
	}
	b.woke = true
}

// Announce notes an operation taken for sid that may rebuild it (a slash
// command, a `_sidecar/*` method), before it runs on a goroutine of its
// own: the session is busy from now, so a request taken after it waits for
// it (a prompt that went on first would meet the rebuild's busy mark and
// be sent back). Every Announce is followed by one Announced.
func (b *Sessions) Announce(sid string) {
	s := b.session(sid)
	if s.Busy == "" && s.Announced == 0 {
		b.busyN++
	}
	s.Announced++
}

// Announced ends an operation Announce noted, and wakes what waits for it.
func (b *Sessions) Announced(sid string) {
	s := b.all[sid]
	if s == nil || s.Announced == 0 {
		return
	}
	s.Announced--
	if s.Busy == "" && s.Announced == 0 {
		b.busyN--
		if *s == (Session{}) {
			delete(b.all, sid)
		}
	}
	b.woke = true
}

// SetBlocked marks a session whose restore failed (nil lifts the mark).
func (b *Sessions) SetBlocked(sid string, bl *state.Blocked) { b.session(sid).Blocked = bl }

// Owe keeps the target of a restore that failed or was cut short, so a
// retry aims at it again; nil clears it (the restore landed, or the user
// accepted the agent's config).
func (b *Sessions) Owe(sid string, target *state.Config) { b.session(sid).Owed = target }

// Forget drops what the ledger knows of a session that left: deleted, or
// moved to another agent (Close forgets a closed one, and remembers it is
// closed). The native ids it had keep pointing at it, so their late frames
// keep the client's id.
func (b *Sessions) Forget(sid string) {
	delete(b.closed, sid)
	s := b.all[sid]
	if s == nil {
		return
	}
	if s.Stale {
		b.staleN--
	}
	if s.Unproven != "" {
		b.unprovenN--
	}
	if s.Turn {
		b.turnsN--
	}
	if s.Busy != "" || s.Announced > 0 {
		// A rebuild still runs on it (a switch forgets the session it
		// moves): its End, or its Announced, finds the mark and ends it.
		b.all[sid] = &Session{Busy: s.Busy, Announced: s.Announced}
		return
	}
	delete(b.all, sid)
}

// Close forgets a session the client closed, and remembers that it is
// closed: its requests are refused until the client's own load or resume
// reopens it (Reopen), whether the agent closed it or the sidecar did for
// an agent without close.
func (b *Sessions) Close(sid string) {
	b.Forget(sid)
	b.closed[sid] = true
}

// Reopen notes that the client reopens a closed session.
func (b *Sessions) Reopen(sid string) { delete(b.closed, sid) }

// Resumed notes that the agent resumed native session native for client
// session sid: the first prompt to it proves it (Proving).
func (b *Sessions) Resumed(sid, native string) {
	s := b.session(sid)
	if s.Unproven == "" {
		b.unprovenN++
	}
	s.Unproven = native
	if s.Lied == native {
		s.Lied = "" // resumed anew: it may serve now
	}
}

// Proving takes the mark Resumed left on sid, and says whether the prompt
// now on its way is the first to its resumed native session.
func (b *Sessions) Proving(sid string) bool {
	s := b.all[sid]
	if s == nil || s.Unproven == "" {
		return false
	}
	s.Unproven = ""
	b.unprovenN--
	return true
}

// ResumeLied notes that the agent accepted the resume of native session
// native for client session sid and could not serve it: sid is rebuilt
// before its next request, and no rebuild resumes native again.
func (b *Sessions) ResumeLied(sid, native string) {
	s := b.session(sid)
	s.Lied = native
	b.markStale(s)
}

// TitleFrom says whose titles the agent's title reports for native
// session native, behind client session sid, are: with keep, the title
// the session has is its own and native's are native's (AgentTitled). A
// report for the native session already noted changes nothing, so a
// rebuild that brings the same native session back keeps what was seen
// of its title.
func (b *Sessions) TitleFrom(sid, native string, keep bool) {
	s := b.session(sid)
	if s.TitleNative == native && s.KeepTitle == keep {
		return
	}
	s.KeepTitle, s.TitleNative, s.AutoTitle = keep, native, ""
}

// AgentTitled judges a title the agent gave client session sid's native
// session, and says whether it is the session's: it is, unless the
// session keeps its own (TitleFrom) and this is the title the agent made
// for the native session, the first it gave or the same again. A
// different one later is the agent renaming the session, which from then
// on has the agent's titles. A cleared title (null) is never the
// session's while it keeps its own.
func (b *Sessions) AgentTitled(sid string, title *string) (sessions bool) {
	s := b.all[sid]
	if s == nil || !s.KeepTitle {
		return true
	}
	switch {
	case title == nil:
		return false
	case s.AutoTitle == "" || s.AutoTitle == *title:
		s.AutoTitle = *title
		return false
	}
	s.KeepTitle, s.AutoTitle = false, ""
	return true
}

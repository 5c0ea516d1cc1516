package fakeagent

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// turn is one prompt in a native session's history, kept for load replay
// and the reply's turn count.
type turn struct {
	user  []acp.ContentBlock
	agent string
	// msgID is the messageId the turn's answer went out with live
	// (MessageID of the session and turn it ran in); a fork keeps it, so a
	// fork at a message finds the turn by the id the client saw.
	msgID string
}

// session is one native session. Every field is guarded by its store's mu.
type session struct {
	id      string
	cwd     string
	st      settings
	history []turn
	// unlisted counts the session/list calls that must still leave the
	// session out under -list-lag; -1 until its first turn ends. It plays
	// claude-agent-acp 0.23.1, which lists the claude CLI's transcript
	// files: the CLI queues a turn's lines on a 100ms write timer and
	// answers the turn before they land, so a list right after the
	// response may not see the session yet.
	unlisted int
	// post holds updates to send right after the response to the request in
	// flight on this session is written (see agent.frameLine).
	post []acp.SessionUpdate
	// made is when this process created the session (zero for one read
	// from -state): -fresh-load-fails refuses to load it for a minute.
	made time.Time
	// after runs, each on a goroutine of its own, once the answer to the
	// session's prompt in flight is written (background.go).
	after []func()
	// phantom: a session the agent knew nothing of and resumed all the
	// same (-resume-lies); its config can be set, and a prompt on it fails.
	phantom bool
}

// sessionStore is every session the agent knows and the counters that name
// new ones. The process is the store: sessions live in memory, so a
// restart forgets them, unless -state mirrors them on disk (state.go).
//
// mu guards the store and every field of every session in it. The ACP
// handlers and the turns hold it while they read or change a session, and
// release it before they write to the client: the line writer's hook takes
// it under the writer's lock (agent.frameLine), so a write under mu would
// deadlock.
type sessionStore struct {
	cat      *catalog  // the fresh config of a new session
	idPrefix string    // -id-prefix: ids are PREFIX1, PREFIX2, …
	listLag  int       // -list-lag: a new session is unlisted until its first turn ends
	path     string    // -state FILE, or "" to keep sessions in memory only
	stderr   io.Writer // where a failed -state write is reported

	mu      sync.Mutex
	nextID  int // the last session number handed out
	nextSub int // the last child session number handed out (SubagentPrefix)
	byID    map[string]*session
	order   []string // session ids in creation order, as session/list lists them
}

func newSessionStore(cfg config, cat *catalog, stderr io.Writer) *sessionStore {
	return &sessionStore{
		cat:      cat,
		idPrefix: cfg.IDPrefix,
		listLag:  cfg.ListLag,
		path:     cfg.State,
		stderr:   stderr,
		byID:     map[string]*session{},
	}
}

// session is the session sid, or the -32002 "Resource not found" every
// request on an unknown session gets. ss.mu must be held.
func (ss *sessionStore) session(sid acp.SessionId) (*session, error) {
	s := ss.byID[string(sid)]
	if s == nil {
		return nil, &acp.RequestError{Code: -32002, Message: "Resource not found: session " + string(sid),
			Data: map[string]any{"sessionId": string(sid)}}
	}
	return s, nil
}

// createLocked opens a session in cwd under the next id, on the fresh
// config. ss.mu must be held.
func (ss *sessionStore) createLocked(cwd string) *session {
	ss.nextID++
	s := &session{id: ss.idPrefix + strconv.Itoa(ss.nextID), cwd: cwd, st: ss.cat.fresh(), made: time.Now()}
	if ss.listLag > 0 {
		s.unlisted = -1
	}
	ss.byID[s.id] = s
	ss.order = append(ss.order, s.id)
	return s
}

// phantomLocked is a session the agent resumes without knowing it
// (-resume-lies), as codex-acp 2.6.0 resumes a thread it lost: under the
// id it was asked for, on the fresh config. ss.mu must be held.
func (ss *sessionStore) phantomLocked(id, cwd string) *session {
	s := &session{id: id, cwd: cwd, st: ss.cat.fresh(), phantom: true}
	ss.byID[id] = s
	if n, err := strconv.Atoi(strings.TrimPrefix(id, ss.idPrefix)); err == nil && n > ss.nextID {
		ss.nextID = n // a session made later gets an id of its own
	}
	return s
}

// inOrderLocked is every listable session in creation order (a phantom is
// in none). ss.mu must be held.
func (ss *sessionStore) inOrderLocked() []*session {
	out := make([]*session, 0, len(ss.order))
	for _, id := range ss.order {
		out = append(out, ss.byID[id])
	}
	return out
}

// takeFollowUps takes what is to follow the answer in flight on session
// sid ("" or unknown: nothing): the updates to write right after it
// (session.post) and, for a prompt's answer, the work to start once it is
// written (session.after). agent.frameLine calls it under the writer's
// lock.
func (ss *sessionStore) takeFollowUps(sid string, prompt bool) (post []acp.SessionUpdate, after []func()) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.byID[sid]; s != nil {
		post, s.post = s.post, nil
		if prompt {
			after, s.after = s.after, nil
		}
	}
	return post, after
}

// modeOf is session s's current mode.
func (ss *sessionStore) modeOf(s *session) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return s.st.Mode
}

// nextChild hands out the number of the next child session the
// "subagent" prompt opens, and persists it, so a restarted agent with the
// same -state goes on counting (subagent.go).
func (ss *sessionStore) nextChild() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.nextSub++
	ss.persistLocked()
	return ss.nextSub
}

// turnsOf implements v2sessions.
func (ss *sessionStore) turnsOf(sid string) (int, *acp.RequestError) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, err := ss.session(acp.SessionId(sid))
	var re *acp.RequestError
	switch {
	case err == nil:
		return len(s.history), nil
	case errors.As(err, &re):
		return 0, re
	default:
		return 0, &acp.RequestError{Code: codeInternalError, Message: "Internal error: " + err.Error()}
	}
}

package fakeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// stateFile is what -state FILE holds: every session the agent knows, so a
// restarted agent with the same -state can load and resume the sessions of
// its earlier life, like a real agent that keeps them on disk.
type stateFile struct {
	// NextID is the last session number handed out; a restarted agent
	// continues after it (and after every persisted id), never reusing one.
	NextID   int            `json:"nextId"`
	Sessions []savedSession `json:"sessions"`
	// NextSub is the last child session number handed out (SubagentPrefix);
	// left out while no child was opened, so older files read the same.
	NextSub int `json:"nextSub,omitempty"`
}

type savedSession struct {
	ID       string      `json:"id"`
	Cwd      string      `json:"cwd"`
	Settings settings    `json:"settings"`
	Turns    int         `json:"turns"`
	History  []savedTurn `json:"history"`
}

type savedTurn struct {
	User  []acp.ContentBlock `json:"user"`
	Agent string             `json:"agent"`
	MsgID string             `json:"msgId,omitempty"`
}

// persistLocked writes every session to -state (a temp file renamed over
// it, so a kill never leaves half a file). ss.mu must be held. Without
// -state it does nothing. A failed write is reported on stderr and
// otherwise ignored: the session lives on in memory.
func (ss *sessionStore) persistLocked() {
	if ss.path == "" {
		return
	}
	st := stateFile{NextID: ss.nextID, Sessions: []savedSession{}, NextSub: ss.nextSub}
	for _, id := range ss.order {
		s := ss.byID[id]
		saved := savedSession{ID: s.id, Cwd: s.cwd, Settings: s.st, Turns: len(s.history), History: []savedTurn{}}
		for _, t := range s.history {
			saved.History = append(saved.History, savedTurn{User: t.user, Agent: t.agent, MsgID: t.msgID})
		}
		st.Sessions = append(st.Sessions, saved)
	}
	if err := writeState(ss.path, st); err != nil {
		fmt.Fprintf(ss.stderr, "fakeagent: %v\n", err)
	}
}

func writeState(path string, st stateFile) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// load reads -state into a fresh store. A missing file is an empty
// store.
func (ss *sessionStore) load() error {
	if ss.path == "" {
		return nil
	}
	b, err := os.ReadFile(ss.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("load state %s: %w", ss.path, err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.nextID = max(ss.nextID, st.NextID)
	ss.nextSub = max(ss.nextSub, st.NextSub)
	for _, saved := range st.Sessions {
		if saved.ID == "" || ss.byID[saved.ID] != nil {
			return fmt.Errorf("load state %s: missing or duplicate session id %q", ss.path, saved.ID)
		}
		s := &session{id: saved.ID, cwd: saved.Cwd, st: saved.Settings}
		if s.st == (settings{}) {
			s.st = ss.cat.fresh()
		}
		for _, t := range saved.History {
			s.history = append(s.history, turn{user: t.User, agent: t.Agent, msgID: t.MsgID})
		}
		ss.byID[s.id] = s
		ss.order = append(ss.order, s.id)
		if n, err := strconv.Atoi(strings.TrimPrefix(saved.ID, ss.idPrefix)); err == nil && strings.HasPrefix(saved.ID, ss.idPrefix) {
			ss.nextID = max(ss.nextID, n)
		}
	}
	return nil
}

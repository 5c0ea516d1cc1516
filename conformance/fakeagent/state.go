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
// it, so a kill never leaves half a file). a.mu must be held. Without -state
// it does nothing. A failed write is reported on stderr and otherwise
// ignored: the session lives on in memory.
func (a *agent) persistLocked() {
	if a.cfg.State == "" {
		return
	}
	st := stateFile{NextID: a.nextID, Sessions: []savedSession{}, NextSub: a.nextSub}
	for _, id := range a.order {
		s := a.sessions[id]
		ss := savedSession{ID: s.id, Cwd: s.cwd, Settings: s.st, Turns: len(s.history), History: []savedTurn{}}
		for _, t := range s.history {
			ss.History = append(ss.History, savedTurn{User: t.user, Agent: t.agent, MsgID: t.msgID})
		}
		st.Sessions = append(st.Sessions, ss)
	}
	if err := writeState(a.cfg.State, st); err != nil {
		fmt.Fprintf(a.stderr, "fakeagent: %v\n", err)
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

// loadState reads -state into a fresh agent. A missing file is an empty
// store.
func (a *agent) loadState() error {
	if a.cfg.State == "" {
		return nil
	}
	b, err := os.ReadFile(a.cfg.State)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("load state %s: %w", a.cfg.State, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID = max(a.nextID, st.NextID)
	a.nextSub = max(a.nextSub, st.NextSub)
	for _, ss := range st.Sessions {
		if ss.ID == "" || a.sessions[ss.ID] != nil {
			return fmt.Errorf("load state %s: missing or duplicate session id %q", a.cfg.State, ss.ID)
		}
		s := &session{id: ss.ID, cwd: ss.Cwd, st: ss.Settings}
		if s.st == (settings{}) {
			s.st = a.cat.fresh()
		}
		for _, t := range ss.History {
			s.history = append(s.history, turn{user: t.User, agent: t.Agent, msgID: t.MsgID})
		}
		a.sessions[s.id] = s
		a.order = append(a.order, s.id)
		if n, err := strconv.Atoi(strings.TrimPrefix(ss.ID, a.cfg.IDPrefix)); err == nil && strings.HasPrefix(ss.ID, a.cfg.IDPrefix) {
			a.nextID = max(a.nextID, n)
		}
	}
	return nil
}

package state

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// memStore keeps everything in maps. It backs `--store memory`, the fallback
// after a damaged store, and tests.
type memStore struct {
	mu       sync.Mutex
	sessions map[string]*memSession
	native   map[string]string
	agents   map[string]*AgentInfo
	deleted  map[string]bool // tombstones: ids only
}

type memSession struct {
	rec      *Session // without Original
	original *Config
	turns    map[int]*Turn
}

// NewMemory returns an empty store that lives as long as the process. Every
// session in it counts as live.
func NewMemory() Store {
	return &memStore{sessions: map[string]*memSession{}, native: map[string]string{}, agents: map[string]*AgentInfo{}, deleted: map[string]bool{}}
}

func (m *memStore) get(id string) *memSession {
	ms := m.sessions[id]
	if ms == nil {
		ms = &memSession{turns: map[int]*Turn{}}
		m.sessions[id] = ms
	}
	return ms
}

func (m *memStore) PutSession(ctx context.Context, s *Session) error {
	s = clone(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleted[s.ClientID] {
		return fmt.Errorf("put session %s: %w", s.ClientID, ErrDeleted)
	}
	ms := m.get(s.ClientID)
	if s.Original != nil {
		if ms.original != nil && !sameConfig(ms.original, s.Original) {
			return fmt.Errorf("put session %s: %w", s.ClientID, ErrOriginalExists)
		}
		ms.original = s.Original
	}
	s.Original = nil
	ms.rec = s
	for _, n := range nativeIDs(s) {
		m.native[n] = s.ClientID
	}
	return nil
}

func (m *memStore) Session(ctx context.Context, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.sessions[id]
	if ms == nil || ms.rec == nil {
		return nil, fmt.Errorf("get session %s: %w", id, m.missing(id))
	}
	s := clone(ms.rec)
	s.Original = clone(ms.original)
	return s, nil
}

func (m *memStore) Sessions(ctx context.Context) ([]Summary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Summary
	for id, ms := range m.sessions {
		if ms.rec == nil {
			continue
		}
		sum := Summary{ID: id, Agent: append([]string(nil), ms.rec.Agent...), AgentName: ms.rec.AgentName, Closed: ms.rec.Closed != nil,
			Cwd: ms.rec.Cwd, Title: ms.rec.Title, LastActivity: ms.rec.Updated, Live: ms.rec.Closed == nil}
		for _, t := range ms.turns {
			if t.Status != TurnRolledBack {
				sum.Turns++
			}
			sum.LastActivity = later(sum.LastActivity, t.activity())
		}
		out = append(out, sum)
	}
	sortSummaries(out)
	return out, nil
}

func (m *memStore) PutTurn(ctx context.Context, sessionID string, t *Turn) error {
	if err := checkTurn(sessionID, t); err != nil {
		return err
	}
	t = clone(t)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleted[sessionID] {
		return fmt.Errorf("put turn %s #%d: %w", sessionID, t.Index, ErrDeleted)
	}
	m.get(sessionID).turns[t.Index] = t
	return nil
}

func (m *memStore) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.sessions[sessionID]
	if ms == nil {
		if m.deleted[sessionID] {
			return nil, fmt.Errorf("list turns %s: %w", sessionID, errGone)
		}
		return nil, nil
	}
	out := make([]Turn, 0, len(ms.turns))
	for _, t := range ms.turns {
		out = append(out, *clone(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

func (m *memStore) RollBack(ctx context.Context, sessionID string, keep int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleted[sessionID] {
		return fmt.Errorf("roll back %s: %w", sessionID, ErrDeleted)
	}
	if ms := m.sessions[sessionID]; ms != nil {
		for i, t := range ms.turns {
			if i > keep {
				t.Status = TurnRolledBack
			}
		}
	}
	return nil
}

// DeleteSession forgets the session and every native id that maps to it,
// and keeps its id as a tombstone.
func (m *memStore) DeleteSession(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[id] == nil {
		return fmt.Errorf("delete session %s: %w", id, m.missing(id))
	}
	delete(m.sessions, id)
	for n, c := range m.native {
		if c == id {
			delete(m.native, n)
		}
	}
	m.deleted[id] = true
	return nil
}

// missing is the error for a session the store does not have: gone when it
// was deleted. m.mu is held.
func (m *memStore) missing(id string) error {
	if m.deleted[id] {
		return errGone
	}
	return ErrNotFound
}

func (m *memStore) ClientID(ctx context.Context, nativeID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.native[nativeID]
	if !ok {
		return "", fmt.Errorf("client id for native session %s: %w", nativeID, ErrNotFound)
	}
	return id, nil
}

func (m *memStore) PutAgent(ctx context.Context, a *AgentInfo) error {
	if err := checkAgent(a); err != nil {
		return err
	}
	a = clone(a)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.agents[a.Name] = a
	return nil
}

func (m *memStore) Agent(ctx context.Context, name string) (*AgentInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.agents[name]
	if !ok {
		return nil, fmt.Errorf("get agent %s: %w", name, ErrNotFound)
	}
	return clone(a), nil
}

func (m *memStore) Flush(ctx context.Context) error { return nil }
func (m *memStore) Close() error                    { return nil }

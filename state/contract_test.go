package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stores are the implementations the contract runs against. Each opener
// returns a fresh, empty store and registers its cleanup.
func stores() map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(t *testing.T) Store { return NewMemory() },
		"badger": func(t *testing.T) Store {
			b, err := openBadger(t.TempDir(), testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeOK(t, b) })
			return b
		},
		"postgres": func(t *testing.T) Store { return openPostgresT(t, PostgresOptions{}) },
		"fleet": func(t *testing.T) Store {
			f, err := OpenPostgres(t.Context(), postgresDSN(t), Options{Logger: testLogger(t)}, PostgresOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeOK(t, f) })
			return f
		},
		"shared-owner": func(t *testing.T) Store {
			s := openShared(t, t.TempDir())
			if !s.Owner() {
				t.Fatal("first Open is not the owner")
			}
			return s
		},
		"shared-client": func(t *testing.T) Store {
			dir := t.TempDir()
			openShared(t, dir)
			s := openShared(t, dir)
			if s.Owner() {
				t.Fatal("second Open on one dir is the owner too")
			}
			return s
		},
	}
}

func closeOK(t *testing.T, s Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sampleConfig(model string) *Config {
	return &Config{
		Options: []Option{
			{ID: "model", Name: "Model", Category: "model", Type: "select", Current: json.RawMessage(`"` + model + `"`),
				Values: []Value{{Value: json.RawMessage(`"opus"`), Name: "Opus"}, {Value: json.RawMessage(`"sonnet"`)}},
				Raw:    json.RawMessage(`{"id":"model","x-vendor":{"a":[1,2]}}`)},
			{ID: "effort", Category: "thought_level", Current: json.RawMessage(`"high"`)},
		},
		Mode: &Legacy{Current: "plan", Available: []string{"plan", "code"}, Raw: json.RawMessage(`{"currentModeId":"plan"}`)},
		Raw:  json.RawMessage(`{"configOptions":[],"html":"<b>&</b>"}`),
	}
}

func sampleSession(id string) *Session {
	return &Session{
		ClientID: id, NativeID: "n-" + id + "-2", NativeHistory: []string{"n-" + id + "-1"},
		Agent: []string{"fake", "--flag"}, AgentName: "claude", Cwd: "/tmp/" + id,
		McpServers:            json.RawMessage(`[{"name":"fs","command":"mcp-fs","args":[],"env":[]}]`),
		AdditionalDirectories: []string{"/extra"},
		Meta:                  json.RawMessage(`{"claudeCode":{"options":{"maxTurns":3}},"systemPrompt":{"append":"Answer in <b>bold</b> & short."},"n":12345678901234567890}`),
		NewParams:             json.RawMessage(`{"systemPrompt":{"mode":"append","content":[{"type":"text","text":"Be <terse> & kind."}]}}`),
		Created:               t0, Updated: t0.Add(time.Minute),
		Baseline: sampleConfig("sonnet"), Original: sampleConfig("opus"), Live: sampleConfig("opus"),
		Overrides:  []Override{{OptionID: "model", Category: "model", Value: json.RawMessage(`"opus"`), At: t0}},
		Lineage:    &Lineage{ParentID: "parent", ForkTurn: 3},
		Blocked:    &Blocked{Fields: []string{"model"}, Reason: "value gone", At: t0},
		SetErrors:  []SetError{{OptionID: "mode", Value: "yolo", Err: "not offered"}},
		Handoff:    &Handoff{NativeID: "n-" + id + "-2", Turn: 4, Kept: 3, Omitted: 1, At: t0},
		Title:      "Fix the <relay> & \"quotes\"",
		Compaction: &Compaction{ID: "cmp_1", Turn: 3, Summary: "## Retained context\n\nThe user wants <b> & é.", At: t0.Add(2 * time.Hour)},
	}
}

func sampleAgent(name string) *AgentInfo {
	return &AgentInfo{
		Name: name, Command: []string{name + "-acp", "--stdio"},
		Init:    json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"` + name + ` <&>"}}`),
		Learned: t0,
	}
}

func sampleTurn(i int, status TurnStatus) *Turn {
	return &Turn{
		Index: i, Prompt: json.RawMessage(fmt.Sprintf(`[{"type":"text","text":"q%d <&>"}]`, i)), PromptText: fmt.Sprintf("q%d <&>", i),
		Answer: fmt.Sprintf("a%d", i), ToolCalls: []ToolCall{{ID: "t1", Title: "read", Status: "completed"}},
		Notices:    []string{"**Warning:** hook <blocked> & stopped", fmt.Sprintf("notice %d", i)},
		Asked:      []string{"Run <make> & test"},
		StopReason: "end_turn", NativeID: "n1", Status: status, Agent: "claude",
		Started: t0.Add(time.Duration(i) * time.Hour), Ended: t0.Add(time.Duration(i)*time.Hour + time.Second),
	}
}

// TestContract runs one behaviour table against every store.
func TestContract(t *testing.T) {
	tests := []struct {
		name string
		run  func(ctx context.Context, t *testing.T, s Store)
	}{
		{"session round trip", func(ctx context.Context, t *testing.T, s Store) {
			want := sampleSession("a")
			mustPut(t, s, want)
			got, err := s.Session(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Session() mismatch (-want +got):\n%s", diff)
			}
		}},
		{"missing session", func(ctx context.Context, t *testing.T, s Store) {
			if _, err := s.Session(ctx, "nope"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Session(nope) err = %v, want ErrNotFound", err)
			}
		}},
		{"original is written once", func(ctx context.Context, t *testing.T, s Store) {
			first := sampleSession("a")
			mustPut(t, s, first)
			same := sampleSession("a")
			same.Original.Raw = json.RawMessage(`{ "configOptions" : [ ], "html":"<b>&</b>" }`) // same JSON, other spacing
			same.Updated = t0.Add(time.Hour)
			mustPut(t, s, same)
			none := sampleSession("a")
			none.Original = nil
			none.Cwd = "/moved"
			mustPut(t, s, none)
			other := sampleSession("a")
			other.Original = sampleConfig("sonnet")
			other.Cwd = "/refused"
			err := s.PutSession(ctx, other)
			if err == nil {
				err = s.Flush(ctx)
			}
			if !errors.Is(err, ErrOriginalExists) {
				t.Fatalf("second original err = %v, want ErrOriginalExists", err)
			}
			got, err := s.Session(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(first.Original, got.Original); diff != "" {
				t.Errorf("original changed (-want +got):\n%s", diff)
			}
			if got.Cwd != "/moved" {
				t.Errorf("Cwd = %q, want /moved (the refused put must change nothing)", got.Cwd)
			}
		}},
		{"turns append, update and list in order", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			for _, i := range []int{2, 1, 3} {
				mustTurn(t, s, "a", sampleTurn(i, TurnRunning))
			}
			upd := sampleTurn(2, TurnCompleted)
			upd.Answer = "longer answer"
			mustTurn(t, s, "a", upd)
			mustTurn(t, s, "a", upd) // idempotent
			got, err := s.Turns(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			want := []Turn{*sampleTurn(1, TurnRunning), *upd, *sampleTurn(3, TurnRunning)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Turns() mismatch (-want +got):\n%s", diff)
			}
			if got, _ := s.Turns(ctx, "other"); len(got) != 0 {
				t.Errorf("Turns(other) = %v, want none", got)
			}
		}},
		{"turn index from 1", func(ctx context.Context, t *testing.T, s Store) {
			if err := s.PutTurn(ctx, "a", &Turn{Index: 0}); err == nil {
				t.Error("PutTurn(index 0) succeeded")
			}
		}},
		{"rollback marks, never deletes", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			for i := 1; i <= 4; i++ {
				mustTurn(t, s, "a", sampleTurn(i, TurnCompleted))
			}
			for range 2 { // idempotent
				if err := s.RollBack(ctx, "a", 2); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Turns(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			var status []TurnStatus
			for _, tr := range got {
				status = append(status, tr.Status)
			}
			want := []TurnStatus{TurnCompleted, TurnCompleted, TurnRolledBack, TurnRolledBack}
			if diff := cmp.Diff(want, status); diff != "" {
				t.Errorf("statuses after RollBack(2) (-want +got):\n%s", diff)
			}
			l := mustList(t, s)
			if len(l) != 1 || l[0].Turns != 2 {
				t.Errorf("Sessions() = %+v, want one session with 2 kept turns", l)
			}
		}},
		{"native id mapping", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			for _, n := range []string{"n-a-1", "n-a-2"} {
				got, err := s.ClientID(ctx, n)
				if err != nil || got != "a" {
					t.Errorf("ClientID(%s) = %q, %v, want a", n, got, err)
				}
			}
			if _, err := s.ClientID(ctx, "n-x"); !errors.Is(err, ErrNotFound) {
				t.Errorf("ClientID(unknown) err = %v, want ErrNotFound", err)
			}
		}},
		{"native id in its own history", func(ctx context.Context, t *testing.T, s Store) {
			// What the record writes: NativeHistory holds the current
			// native id as well.
			sess := sampleSession("a")
			sess.NativeHistory = append(sess.NativeHistory, sess.NativeID)
			mustPut(t, s, sess)
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, n := range sess.NativeHistory {
				if got, err := s.ClientID(ctx, n); err != nil || got != "a" {
					t.Errorf("ClientID(%s) = %q, %v, want a", n, got, err)
				}
			}
		}},
		{"listing", func(ctx context.Context, t *testing.T, s Store) {
			old, recent := sampleSession("old"), sampleSession("recent")
			recent.Updated = t0.Add(48 * time.Hour)
			recent.AgentName = "codex"
			mustPut(t, s, old)
			mustPut(t, s, recent)
			mustTurn(t, s, "old", sampleTurn(1, TurnCompleted))
			mustTurn(t, s, "old", sampleTurn(2, TurnCompleted))
			mustTurn(t, s, "orphan", sampleTurn(1, TurnCompleted)) // no session record: not listed
			want := []Summary{
				{ID: "recent", Agent: recent.Agent, AgentName: "codex", Cwd: recent.Cwd, Title: recent.Title, LastActivity: recent.Updated, Live: true},
				{ID: "old", Agent: old.Agent, AgentName: "claude", Cwd: old.Cwd, Title: old.Title, Turns: 2, LastActivity: sampleTurn(2, "").Ended, Live: true},
			}
			if LeaseOf(s) != nil {
				// A fleet's listing names the host whose sidecar holds
				// each live session: this one wrote both.
				host, _ := os.Hostname()
				want[0].Holder, want[1].Holder = host, host
			}
			if diff := cmp.Diff(want, mustList(t, s)); diff != "" {
				t.Errorf("Sessions() mismatch (-want +got):\n%s", diff)
			}
		}},
		{"session switches agent", func(ctx context.Context, t *testing.T, s Store) {
			sess := sampleSession("a")
			mustPut(t, s, sess)
			mustTurn(t, s, "a", sampleTurn(1, TurnCompleted))
			sess.AgentName, sess.Updated = "codex", t0.Add(3*time.Hour)
			mustPut(t, s, sess)
			on := sampleTurn(2, TurnCompleted)
			on.Agent = "codex"
			mustTurn(t, s, "a", on)
			got, err := s.Session(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if got.AgentName != "codex" {
				t.Errorf("Session().AgentName = %q, want codex", got.AgentName)
			}
			if l := mustList(t, s); len(l) != 1 || l[0].AgentName != "codex" {
				t.Errorf("Sessions() = %+v, want one session on codex", l)
			}
			turns, err := s.Turns(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			var ran []string
			for _, tr := range turns {
				ran = append(ran, tr.Agent)
			}
			if diff := cmp.Diff([]string{"claude", "codex"}, ran); diff != "" {
				t.Errorf("turn agents (-want +got):\n%s", diff)
			}
		}},
		{"agent round trip, copied both ways", func(ctx context.Context, t *testing.T, s Store) {
			in := sampleAgent("claude")
			mustAgent(t, s, in)
			mustAgent(t, s, sampleAgent("codex"))
			in.Command[0], in.Init[2] = "changed", 'X' // the store kept its own copy
			// A shared store answers from its queue first and from the backend
			// once the writes landed: read both ways.
			for _, when := range []string{"as put", "after Flush"} {
				if when == "after Flush" {
					if err := s.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range []string{"claude", "codex", "claude"} {
					got, err := s.Agent(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(sampleAgent(name), got); diff != "" {
						t.Errorf("%s: Agent(%s) mismatch (-want +got):\n%s", when, name, diff)
					}
					got.Command[0], got.Init[2] = "changed", 'X' // and hands out copies
				}
			}
		}},
		{"agent put replaces", func(ctx context.Context, t *testing.T, s Store) {
			mustAgent(t, s, sampleAgent("claude"))
			want := &AgentInfo{Name: "claude", Init: json.RawMessage(`{"protocolVersion":2}`), Learned: t0.Add(time.Hour)}
			mustAgent(t, s, want)
			got, err := s.Agent(ctx, "claude")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" { // Command gone: replaced, not merged
				t.Errorf("Agent() after second put (-want +got):\n%s", diff)
			}
		}},
		{"missing agent", func(ctx context.Context, t *testing.T, s Store) {
			mustAgent(t, s, sampleAgent("claude"))
			if _, err := s.Agent(ctx, "codex"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Agent(codex) err = %v, want ErrNotFound", err)
			}
		}},
		{"agent needs a name", func(ctx context.Context, t *testing.T, s Store) {
			for _, a := range []*AgentInfo{nil, {Command: []string{"x"}}} {
				if err := s.PutAgent(ctx, a); err == nil {
					t.Errorf("PutAgent(%+v) succeeded", a)
				}
			}
		}},
		{"delete forgets the session", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			for i := 1; i <= 3; i++ {
				mustTurn(t, s, "a", sampleTurn(i, TurnCompleted))
			}
			if err := s.RollBack(ctx, "a", 2); err != nil {
				t.Fatal(err)
			}
			other := sampleSession("b")
			mustPut(t, s, other)
			mustTurn(t, s, "b", sampleTurn(1, TurnCompleted))
			mustAgent(t, s, sampleAgent("claude"))
			if err := s.DeleteSession(ctx, "a"); err != nil {
				t.Fatalf("DeleteSession(a) = %v", err)
			}
			checkGone(t, s, "a", "n-a-1", "n-a-2")
			// The other session, and the agents, are as they were.
			got, err := s.Session(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(other, got); diff != "" {
				t.Errorf("Session(b) after deleting a (-want +got):\n%s", diff)
			}
			if turns, err := s.Turns(ctx, "b"); err != nil || len(turns) != 1 {
				t.Errorf("Turns(b) = %d turns, %v, want 1", len(turns), err)
			}
			for _, n := range []string{"n-b-1", "n-b-2"} {
				if id, err := s.ClientID(ctx, n); err != nil || id != "b" {
					t.Errorf("ClientID(%s) = %q, %v, want b", n, id, err)
				}
			}
			if l := mustList(t, s); len(l) != 1 || l[0].ID != "b" || l[0].Turns != 1 {
				t.Errorf("Sessions() = %+v, want b alone with 1 turn", l)
			}
			if _, err := s.Agent(ctx, "claude"); err != nil {
				t.Errorf("Agent(claude) after a delete: %v", err)
			}
		}},
		{"delete an unknown session", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			err := s.DeleteSession(ctx, "nope")
			if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted) {
				t.Errorf("DeleteSession(nope) = %v, want ErrNotFound and not ErrDeleted", err)
			}
			if _, err := s.Session(ctx, "a"); err != nil {
				t.Errorf("Session(a) after deleting another: %v", err)
			}
		}},
		{"a deleted session is not written back", func(ctx context.Context, t *testing.T, s Store) {
			mustPut(t, s, sampleSession("a"))
			mustTurn(t, s, "a", sampleTurn(1, TurnCompleted))
			if err := s.DeleteSession(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			// A shared store may refuse at once or when the write lands.
			refused := func(what string, err error) {
				t.Helper()
				if err == nil {
					err = s.Flush(ctx)
				}
				if !errors.Is(err, ErrDeleted) {
					t.Errorf("%s after the delete = %v, want ErrDeleted", what, err)
				}
			}
			refused("PutSession", s.PutSession(ctx, sampleSession("a")))
			refused("PutTurn", s.PutTurn(ctx, "a", sampleTurn(2, TurnCompleted)))
			refused("RollBack", s.RollBack(ctx, "a", 0))
			checkGone(t, s, "a", "n-a-1", "n-a-2")
			err := s.DeleteSession(ctx, "a")
			if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDeleted) {
				t.Errorf("second DeleteSession(a) = %v, want ErrNotFound and ErrDeleted", err)
			}
		}},
		{"delete keeps the ids it is a prefix of", func(ctx context.Context, t *testing.T, s Store) {
			short, long := sampleSession("ab"), sampleSession("abc")
			short.NativeID, short.NativeHistory = "nat", nil
			long.NativeID, long.NativeHistory = "nat2", []string{"nat1"}
			mustPut(t, s, short)
			mustPut(t, s, long)
			mustTurn(t, s, "ab", sampleTurn(1, TurnCompleted))
			mustTurn(t, s, "abc", sampleTurn(1, TurnCompleted))
			mustTurn(t, s, "abc", sampleTurn(2, TurnCompleted))
			if err := s.DeleteSession(ctx, "ab"); err != nil {
				t.Fatal(err)
			}
			checkGone(t, s, "ab", "nat")
			for _, n := range []string{"nat1", "nat2"} {
				if id, err := s.ClientID(ctx, n); err != nil || id != "abc" {
					t.Errorf("ClientID(%s) = %q, %v, want abc", n, id, err)
				}
			}
			if l := mustList(t, s); len(l) != 1 || l[0].ID != "abc" || l[0].Turns != 2 || l[0].Cwd != long.Cwd {
				t.Errorf("Sessions() = %+v, want abc alone with 2 turns", l)
			}
			if turns, err := s.Turns(ctx, "abc"); err != nil || len(turns) != 2 {
				t.Errorf("Turns(abc) = %d turns, %v, want 2", len(turns), err)
			}
		}},
		{"delete a session that has turns only", func(ctx context.Context, t *testing.T, s Store) {
			mustTurn(t, s, "orphan", sampleTurn(1, TurnCompleted))
			if err := s.DeleteSession(ctx, "orphan"); err != nil {
				t.Fatalf("DeleteSession(orphan) = %v", err)
			}
			if _, err := s.Turns(ctx, "orphan"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Turns(orphan) err = %v, want ErrNotFound", err)
			}
		}},
		{"flush with nothing queued", func(ctx context.Context, t *testing.T, s Store) {
			if err := s.Flush(ctx); err != nil {
				t.Errorf("Flush() = %v", err)
			}
		}},
	}
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					s := open(t)
					tt.run(t.Context(), t, s)
					if err := s.Flush(t.Context()); err != nil && !errors.Is(err, ErrOriginalExists) {
						t.Errorf("Flush() = %v", err)
					}
				})
			}
		})
	}
}

// checkGone asserts that session id, deleted, reads as not found everywhere:
// its record, its turns, the listing and its native ids.
func checkGone(t *testing.T, s Store, id string, natives ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.Session(ctx, id); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDeleted) {
		t.Errorf("Session(%s) after delete: err = %v, want ErrNotFound and ErrDeleted", id, err)
	}
	if turns, err := s.Turns(ctx, id); !errors.Is(err, ErrNotFound) || len(turns) != 0 {
		t.Errorf("Turns(%s) after delete = %d turns, %v, want ErrNotFound", id, len(turns), err)
	}
	for _, sum := range mustList(t, s) {
		if sum.ID == id {
			t.Errorf("Sessions() after delete lists %s: %+v", id, sum)
		}
	}
	for _, n := range natives {
		if got, err := s.ClientID(ctx, n); !errors.Is(err, ErrNotFound) {
			t.Errorf("ClientID(%s) after delete = %q, %v, want ErrNotFound", n, got, err)
		}
	}
}

func mustPut(t *testing.T, s Store, sess *Session) {
	t.Helper()
	if err := s.PutSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
}

func mustTurn(t *testing.T, s Store, id string, tr *Turn) {
	t.Helper()
	if err := s.PutTurn(t.Context(), id, tr); err != nil {
		t.Fatal(err)
	}
}

func mustAgent(t *testing.T, s Store, a *AgentInfo) {
	t.Helper()
	if err := s.PutAgent(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

func mustList(t *testing.T, s Store) []Summary {
	t.Helper()
	l, err := s.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// contract writes a session and its turns to st and reads them back, and
// shows the rules every store keeps: an original written once, turns kept
// through a rollback, state.ErrNotFound for what it never had.
func contract(ctx context.Context, st state.Store) error {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	effort := func(v string) *state.Config {
		return &state.Config{Options: []state.Option{{ID: "effort", Type: "select", Current: json.RawMessage(`"` + v + `"`)}}}
	}
	sess := &state.Session{ClientID: "sess_1", NativeID: "native_1", Cwd: "/src/app", Created: now, Updated: now, Original: effort("high"), Live: effort("high")}
	if err := st.PutSession(ctx, sess); err != nil {
		return err
	}
	for i, prompt := range []string{"add a test", "now make it pass"} {
		t := &state.Turn{Index: i + 1, PromptText: prompt, Status: state.TurnCompleted, Started: now, Ended: now}
		if err := st.PutTurn(ctx, "sess_1", t); err != nil {
			return err
		}
	}
	if err := st.RollBack(ctx, "sess_1", 1); err != nil {
		return err
	}
	// The record must land before the response that completes it goes on.
	if err := st.Flush(ctx); err != nil {
		return err
	}

	got, err := st.Session(ctx, "sess_1")
	if err != nil {
		return err
	}
	fmt.Printf("session %s on %s in %s, effort %s\n", got.ClientID, got.NativeID, got.Cwd, got.Original.Option("effort").Current)
	turns, err := st.Turns(ctx, "sess_1")
	if err != nil {
		return err
	}
	for _, t := range turns {
		fmt.Printf("turn %d %-11s %q\n", t.Index, t.Status, t.PromptText)
	}
	list, err := st.Sessions(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("listed: %s with %d turn(s)\n", list[0].ID, list[0].Turns)
	id, err := st.ClientID(ctx, "native_1")
	fmt.Println("native_1 belongs to", id, err)

	sess.Original = effort("low")
	err = st.PutSession(ctx, sess)
	fmt.Println("a second original:", errors.Is(err, state.ErrOriginalExists))
	_, err = st.Session(ctx, "sess_2")
	fmt.Println("a session never written:", errors.Is(err, state.ErrNotFound))
	return nil
}

// The store a sidecar uses on one host: badger in the state directory,
// shared between the sidecar processes of several editor windows. It meets
// the same contract as the store in memory (ExampleNewMemory).
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "state-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	if err := contract(ctx, st); err != nil {
		fmt.Println(err)
	}
	// Output:
	// session sess_1 on native_1 in /src/app, effort "high"
	// turn 1 completed   "add a test"
	// turn 2 rolled_back "now make it pass"
	// listed: sess_1 with 1 turn(s)
	// native_1 belongs to sess_1 <nil>
	// a second original: true
	// a session never written: true
}

// The store in memory (--store memory, and tests) keeps the same contract
// as the one on disk (ExampleOpen).
func ExampleNewMemory() {
	st := state.NewMemory()
	defer st.Close()
	if err := contract(context.Background(), st); err != nil {
		fmt.Println(err)
	}
	// Output:
	// session sess_1 on native_1 in /src/app, effort "high"
	// turn 1 completed   "add a test"
	// turn 2 rolled_back "now make it pass"
	// listed: sess_1 with 1 turn(s)
	// native_1 belongs to sess_1 <nil>
	// a second original: true
	// a session never written: true
}

package state

import (
	"slices"
	"testing"
)

// Behind keeps NativeHistory and Natives together: an id already last in
// the history is not named twice, every time is an entry, and a reopen or
// an open on another known host is a failover.
func TestBehind(t *testing.T) {
	var s Session
	for _, n := range []Native{
		{ID: "n1", Event: MadeNew, Host: "a"},
		{ID: "n1", Event: MadeCrash, Host: "a"},  // the agent's resume, same id
		{ID: "n2", Event: MadeReopen, Host: "b"}, // another host
		{ID: "n2", Event: MadeOpen, Host: "b"},   // the same host
		{ID: "n3", Event: MadeReopen, Host: ""},  // a host with no name
		{ID: "n4", Event: MadeOpen, Host: "c"},   // after one with no name
		{ID: "n5", Event: MadeRewind, Host: "d"}, // not an open
	} {
		s.Behind(n)
	}
	if s.NativeID != "n5" || !slices.Equal(s.NativeHistory, []string{"n1", "n2", "n3", "n4", "n5"}) {
		t.Errorf("native %q, history %q", s.NativeID, s.NativeHistory)
	}
	var events []string
	for _, n := range s.Natives {
		events = append(events, n.Event)
	}
	want := []string{MadeNew, MadeCrash, MadeFailover, MadeOpen, MadeReopen, MadeOpen, MadeRewind}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

// MadeByRebuild tells a native session a rebuild had the agent make fresh
// from one the client made or opened, or one a rebuild brought back.
func TestMadeByRebuild(t *testing.T) {
	var s Session
	for _, n := range []Native{
		{ID: "n1", Event: MadeNew, Path: "new"},
		{ID: "n1", Event: MadeCrash, Path: "resume"}, // brought back: still the client's
		{ID: "n2", Event: MadeReset, Path: "new"},
		{ID: "n2", Event: MadeCrash, Path: "load"}, // brought back: still the reset's
		{ID: "n3", Event: MadeRewind, Path: "fork"},
		{ID: "n4", Event: MadeReopen, Path: "resume"},
		{ID: "n5", Event: MadeOpen, Path: "load"},
		{ID: "n6", Event: MadeCrash, Path: "new"},
	} {
		s.Behind(n)
	}
	for id, want := range map[string]bool{"n1": false, "n2": true, "n3": true, "n4": false, "n5": false, "n6": true, "n9": false} {
		if got := s.MadeByRebuild(id); got != want {
			t.Errorf("MadeByRebuild(%s) = %v, want %v", id, got, want)
		}
	}
}

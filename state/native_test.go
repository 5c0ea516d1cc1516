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

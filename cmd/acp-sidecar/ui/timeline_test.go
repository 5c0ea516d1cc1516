package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// One row a rule of the timeline's inference (timeline.go): what each
// rebuild leaves in the record, and the event read from it.
func TestInferNatives(t *testing.T) {
	done, back, intr := state.TurnCompleted, state.TurnRolledBack, state.TurnInterrupted
	handed := func(tr state.Turn) state.Turn { tr.HandoffDelivered = true; return tr }
	by := func(agent string, tr state.Turn) state.Turn { tr.Agent = agent; return tr }
	type want struct {
		ID, Event string
		Turns     []int
		Handoff   int
	}
	tests := []struct {
		name  string
		sess  state.Session
		turns []state.Turn
		want  []want
	}{
		{
			name:  "one native session",
			sess:  state.Session{NativeID: "a", NativeHistory: []string{"a"}},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "a", "p", done)},
			want:  []want{{"a", evNew, []int{1, 2}, 0}},
		},
		{
			name:  "reset: ContextFrom is the next turn, no handoff",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}, ContextFrom: 2},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "b", "p", done)},
			want:  []want{{"a", evNew, []int{1}, 0}, {"b", evReset, []int{2}, 0}},
		},
		{
			name:  "reset with no turn yet",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}, ContextFrom: 2},
			turns: []state.Turn{turn(1, "a", "p", done)},
			want:  []want{{"a", evNew, []int{1}, 0}, {"b", evReset, nil, 0}},
		},
		{
			name: "an earlier reset: a first prompt without handoff after a kept turn",
			sess: state.Session{NativeID: "c", NativeHistory: []string{"a", "b", "c"}, ContextFrom: 3},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "b", "p", done),
				turn(3, "c", "p", done)},
			want: []want{{"a", evNew, []int{1}, 0}, {"b", evReset, []int{2}, 0}, {"c", evReset, []int{3}, 0}},
		},
		{
			name:  "rewind: the turn before is rolled back, the next carries the handoff",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "a", "p", back), handed(turn(3, "b", "p", done))},
			want:  []want{{"a", evNew, []int{1, 2}, 0}, {"b", evRewind, []int{3}, 3}},
		},
		{
			name:  "the agent's own fork at a message: a rewind with no handoff",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "a", "p", back), turn(3, "b", "p", done)},
			want:  []want{{"a", evNew, []int{1, 2}, 0}, {"b", evRewind, []int{3}, 0}},
		},
		{
			name:  "a crash mid-turn",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "a", "p", intr), handed(turn(3, "b", "p", done))},
			want:  []want{{"a", evNew, []int{1, 2}, 0}, {"b", evRestart, []int{3}, 3}},
		},
		{
			name:  "a kill between turns",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}},
			turns: []state.Turn{turn(1, "a", "p", done), handed(turn(2, "b", "p", done))},
			want:  []want{{"a", evNew, []int{1}, 0}, {"b", evRestart, []int{2}, 2}},
		},
		{
			name: "rebuilt twice before a turn: a rewind, then a crash",
			sess: state.Session{NativeID: "c", NativeHistory: []string{"a", "b", "c"}},
			turns: []state.Turn{turn(1, "a", "p", done), turn(2, "a", "p", back),
				handed(turn(3, "c", "p", done))},
			want: []want{{"a", evNew, []int{1, 2}, 0}, {"b", evRewind, nil, 0}, {"c", evRestart, []int{3}, 3}},
		},
		{
			name:  "a switch of agents",
			sess:  state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}, AgentName: "codex"},
			turns: []state.Turn{by("claude", turn(1, "a", "p", done)), handed(by("codex", turn(2, "b", "p", done)))},
			want:  []want{{"a", evNew, []int{1}, 0}, {"b", evSwitch, []int{2}, 2}},
		},
		{
			name:  "a fork",
			sess:  state.Session{NativeID: "f", NativeHistory: []string{"f"}, Lineage: &state.Lineage{ParentID: "p", ForkTurn: 2}},
			turns: []state.Turn{handed(turn(1, "f", "p", done))},
			want:  []want{{"f", evFork, []int{1}, 1}},
		},
		{
			name: "a native id that comes back (an agent restarted without its state)",
			sess: state.Session{NativeID: "x1", NativeHistory: []string{"x1", "x2", "x1"}, ContextFrom: 2},
			turns: []state.Turn{turn(1, "x1", "p", done), turn(2, "x2", "p", done), turn(3, "x2", "p", intr),
				handed(turn(4, "x1", "p", done))},
			want: []want{{"x1", evNew, []int{1}, 0}, {"x2", evReset, []int{2, 3}, 0}, {"x1", evRestart, []int{4}, 4}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []want
			for _, n := range inferNatives(&tt.sess, tt.turns) {
				got = append(got, want{n.ID, n.Event, n.Turns, n.Handoff})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("inferNatives mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The handoff built again for a native session is the one the sidecar
// built then: the conversation before the turn that carried it, from the
// reset before it on, not what came later.
func TestHandoffAt(t *testing.T) {
	done, back := state.TurnCompleted, state.TurnRolledBack
	turns := []state.Turn{
		turn(1, "a", "before the reset", done),
		turn(2, "b", "kept one", done),
		turn(3, "b", "taken back", back),
		turn(4, "c", "after the rewind", done),
		turn(5, "d", "after the kill", done),
	}
	turns[3].HandoffDelivered, turns[4].HandoffDelivered = true, true
	sess := &state.Session{NativeID: "d", NativeHistory: []string{"a", "b", "c", "d"}, ContextFrom: 2}
	ns := inferNatives(sess, turns)
	if got := []string{ns[1].Event, ns[2].Event, ns[3].Event}; !cmp.Equal(got, []string{evReset, evRewind, evRestart}) {
		t.Fatalf("events %v", got)
	}
	for _, tt := range []struct {
		at   int
		want []int // the turns handed over
	}{{4, []int{2}}, {5, []int{2, 4}}} {
		h, approx := handoffAt(sess, turns, ns, tt.at, nil, 0)
		var kept []state.Turn
		for _, i := range tt.want {
			kept = append(kept, turns[i-1])
		}
		want := replay.BuildHandoff(kept, 0)
		if h.Text != want.Text || approx != "" {
			t.Errorf("handoff at turn %d (approx %q):\n%s\nwant:\n%s", tt.at, approx, h.Text, want.Text)
		}
		if strings.Contains(h.Text, "before the reset") || strings.Contains(h.Text, "taken back") {
			t.Errorf("handoff at turn %d carries a turn it never had", tt.at)
		}
	}
}

func TestBlockedReasons(t *testing.T) {
	re := &replay.RestoreError{Fields: []replay.FieldError{
		{Field: "model", Want: []byte(`"gone-1"`), Reason: "the agent no longer offers this option"},
		{Field: "effort", Want: []byte(`"max"`), Reason: `set_config_option: -32602: bad value: "max"`},
	}}
	got := blockedReasons(&state.Blocked{Fields: re.Names(), Reason: re.Error()})
	want := map[string]string{"model": "the agent no longer offers this option", "effort": `set_config_option: -32602: bad value: "max"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blockedReasons mismatch (-want +got):\n%s", diff)
	}
	c := configOf(&state.Session{NativeHistory: []string{"a", "b"}, Baseline: config("m1", "code"), Live: config("m2", "code"),
		Blocked: &state.Blocked{Fields: re.Names(), Reason: re.Error()}})
	outcome := map[string]string{}
	for _, r := range c.Rows {
		outcome[r.ID] = r.Restore
	}
	if diff := cmp.Diff(map[string]string{"model": "not offered", "mode": "restored", "effort": "refused"}, outcome); diff != "" {
		t.Errorf("restore outcomes mismatch (-want +got):\n%s", diff)
	}
	if !c.Rows[0].Cells[2].Changed || c.Rows[1].Cells[2].Changed {
		t.Errorf("changed marks: %+v", c.Rows)
	}
}

// The record's own natives: each entry is a native session with its event,
// an id the agent's resume brought back after a crash is a native session
// of its own for the turns after it, a reopen on another host reads as the
// failover it was, and the handoff is the text the record kept.
func TestRecordedNatives(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min)*time.Minute - time.Second) }
	handoff := &state.Handoff{NativeID: "b", Turn: 3, Kept: 1, Omitted: 0}
	sess := &state.Session{NativeID: "c", NativeHistory: []string{"a", "b", "c"}, Natives: []state.Native{
		{ID: "a", Event: state.MadeNew, Path: "new", Host: "h1", At: at(1)},
		{ID: "b", Event: state.MadeRewind, Path: "new", Host: "h1", At: at(3), Handoff: handoff},
		{ID: "b", Event: state.MadeCrash, Path: "resume", Host: "h1", At: at(4)},
		{ID: "c", Event: state.MadeFailover, Path: "load", Host: "h2", At: at(5)},
	}}
	carried := turn(3, "b", "p3", state.TurnCompleted)
	carried.HandoffDelivered, carried.Handoff = true, "[acp-sidecar] exactly what was sent"
	turns := []state.Turn{turn(1, "a", "p1", state.TurnCompleted), turn(2, "a", "p2", state.TurnRolledBack), carried,
		turn(4, "b", "p4", state.TurnCompleted), turn(5, "c", "p5", state.TurnCompleted)}
	ns := nativesOf(sess, turns)
	type row struct {
		ID, Event string
		Turns     []int
		Handoff   int
	}
	var got []row
	for _, n := range ns {
		got = append(got, row{n.ID, n.Event, n.Turns, n.Handoff})
	}
	want := []row{{"a", "new", []int{1, 2}, 0}, {"b", "rewind", []int{3}, 3}, {"b", "crash", []int{4}, 0}, {"c", "failover", []int{5}, 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("natives (-want +got):\n%s", d)
	}
	for i, sub := range []string{"session/new", "rewind: turn 2 taken back; a new session", "crash: the agent died; the agent's session/resume brought it back", "failover: from host h1 to h2"} {
		if !strings.Contains(ns[i].Detail, sub) {
			t.Errorf("native %d's detail %q lacks %q", i+1, ns[i].Detail, sub)
		}
	}
	h, approx := handoffAt(sess, turns, ns, 3, nil, 1024)
	if h.Text != carried.Handoff || h.Kept != 1 || approx != "" {
		t.Errorf("handoff at turn 3: %+v (%q), want the kept text, 1 kept, exact", h, approx)
	}
	// A record kept from before the natives were recorded, whose later
	// entries are: the older entries are missing, so the events are read
	// as before.
	old := &state.Session{NativeID: "b", NativeHistory: []string{"a", "b"}, Natives: []state.Native{{ID: "b", Event: state.MadeCrash, Path: "new", At: at(3)}}}
	if ns := nativesOf(old, turns[:2]); len(ns) != 2 || ns[0].recorded != nil {
		t.Errorf("a record without its first natives: %+v, want the two inferred", ns)
	}
}

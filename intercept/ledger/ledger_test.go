package ledger

import (
	"fmt"
	"reflect"
	"testing"
)

// TestAgentGoneIsOneUpdate: a death takes out exactly what the dead agent
// had received, leaves what it never had, and marks every session with a
// native session stale, in one update whose counters agree with it.
func TestAgentGoneIsOneUpdate(t *testing.T) {
	woke := 0
	l := New(func() { woke++ })
	l.Update(func(f *Flight) {
		f.Remap("c1", "n1", 0)
		f.Remap("c2", "c2", 0)
		f.Requests.Record("7", "session/prompt", "c1")
		f.Requests.Note("7", "session/prompt", "").State = Sent
		f.Requests.Note("3", "session/set_mode", "c2").State = Sent
		f.Requests.Note("9", "session/new", "") // taken, never written to the agent
		f.Requests.AgentAsked("a1")
		f.Sessions.Begin("c3", "reset") // no native session: nothing to rebuild
	})
	if !l.Running() || !l.Splicing() || l.AnyStale() {
		t.Fatalf("before the death: running %v splicing %v stale %v", l.Running(), l.Splicing(), l.AnyStale())
	}
	var g Gone
	l.Update(func(f *Flight) { g = f.AgentGone(1) })
	want := []GoneRequest{{ID: "3", Method: "session/set_mode"}, {ID: "7", Method: "session/prompt"}}
	if !reflect.DeepEqual(g.Sent, want) {
		t.Errorf("the death answers %v, want %v", g.Sent, want)
	}
	if l.Running() {
		t.Error("a prompt of the dead agent still counts as running")
	}
	if !l.IsStale("c1") || !l.IsStale("c2") || l.IsStale("c3") {
		t.Errorf("stale after the death: c1 %v c2 %v c3 %v, want true true false", l.IsStale("c1"), l.IsStale("c2"), l.IsStale("c3"))
	}
	if _, ok := l.Request("9"); ok {
		t.Error("a request of the dead agent's time is still in flight")
	}
	stale := false
	l.Update(func(f *Flight) { stale = f.Requests.ClientAnswered("a1") })
	if !stale {
		t.Error("the client's answer to the dead agent's request was not known stale")
	}
	if woke == 0 {
		t.Error("the death woke nobody")
	}
}

// TestAgentEndedOncePerDeath: the supervisor tells a death twice, when
// the agent's output ends and when it has exited. The first ends the life
// once and takes out what the dead agent had; the second changes nothing;
// TakeGone hands that out once, and the next death is a death again.
func TestAgentEndedOncePerDeath(t *testing.T) {
	l := New(nil)
	lives := uint64(0)
	next := func() uint64 { lives++; return lives }
	l.Update(func(f *Flight) {
		f.Requests.Note("7", "session/prompt", "c1").State = Sent
		f.AgentEnded(next)
	})
	l.Update(func(f *Flight) {
		f.Requests.Note("8", "session/set_mode", "c1").State = Sent // after the output ended: not the dead agent's
		f.AgentEnded(next)
	})
	var g, again Gone
	l.Update(func(f *Flight) { g, again = f.TakeGone(), f.TakeGone() })
	if lives != 1 {
		t.Errorf("one death ended %d lives", lives)
	}
	if want := []GoneRequest{{ID: "7", Method: "session/prompt"}}; !reflect.DeepEqual(g.Sent, want) {
		t.Errorf("the death answers %v, want %v", g.Sent, want)
	}
	if len(again.Sent) != 0 {
		t.Errorf("a second TakeGone answers %v again", again.Sent)
	}
	l.Update(func(f *Flight) {
		f.AgentEnded(next)
		g = f.TakeGone()
	})
	if want := []GoneRequest{{ID: "8", Method: "session/set_mode"}}; lives != 2 || !reflect.DeepEqual(g.Sent, want) {
		t.Errorf("the next death: %d lives, answers %v; want 2 and %v", lives, g.Sent, want)
	}
}

// TestStaleFollowsTheLife: a native session mapped from an agent's life
// that has ended is stale at once, and a rebuild of an ended life never
// clears the mark a later death set.
func TestStaleFollowsTheLife(t *testing.T) {
	l := New(nil)
	l.Update(func(f *Flight) { f.AgentGone(2) })
	l.Update(func(f *Flight) { f.Remap("c1", "n1", 1) }) // answered by the agent that died
	if !l.IsStale("c1") {
		t.Fatal("a session the dead agent opened is not stale")
	}
	l.Update(func(f *Flight) { f.Settled("c1", 1) })
	if !l.IsStale("c1") {
		t.Fatal("a rebuild on the dead agent cleared the mark")
	}
	l.Update(func(f *Flight) {
		f.Remap("c1", "n2", 2)
		f.Settled("c1", 2)
	})
	if l.IsStale("c1") || l.AnyStale() {
		t.Fatal("a rebuild on the living agent left the session stale")
	}
	if got := l.NativeOf("c1"); got != "n2" {
		t.Errorf("native of c1 = %s, want n2", got)
	}
	if got := l.ClientOf("n1"); got != "c1" {
		t.Errorf("the old native id no longer points at its client: %s", got)
	}
}

// TestForgetKeepsARunningRebuild: a session that leaves while a rebuild
// runs on it (a switch) stays busy until that rebuild ends.
func TestForgetKeepsARunningRebuild(t *testing.T) {
	l := New(nil)
	l.Update(func(f *Flight) {
		f.Remap("c1", "n1", 0)
		f.Sessions.Begin("c1", "switch")
		f.Sessions.Forget("c1")
	})
	if !l.IsBusy("c1") || l.NativeOf("c1") != "c1" {
		t.Fatalf("after the forget: busy %v native %s", l.IsBusy("c1"), l.NativeOf("c1"))
	}
	l.Update(func(f *Flight) { f.Sessions.End("c1") })
	if l.IsBusy("c1") || l.AnyBusy() {
		t.Error("the rebuild's end left the session busy")
	}
}

// TestClosedUntilReopened: a closed session is closed until the client
// reopens it, and a delete forgets that it was.
func TestClosedUntilReopened(t *testing.T) {
	l := New(nil)
	l.Update(func(f *Flight) { f.Remap("c1", "n1", 0); f.Remap("c2", "n2", 0) })
	if l.IsClosed("c1") {
		t.Fatal("an open session reads closed")
	}
	l.Update(func(f *Flight) { f.Sessions.Close("c1"); f.Sessions.Close("c2") })
	if !l.IsClosed("c1") || !l.IsClosed("c2") || l.NativeOf("c1") != "c1" {
		t.Fatalf("after the close: closed %v %v, native %s", l.IsClosed("c1"), l.IsClosed("c2"), l.NativeOf("c1"))
	}
	l.Update(func(f *Flight) { f.Sessions.Reopen("c1"); f.Sessions.Forget("c2") })
	if l.IsClosed("c1") || l.IsClosed("c2") {
		t.Errorf("after the reopen and the delete: closed %v %v", l.IsClosed("c1"), l.IsClosed("c2"))
	}
}

// TestKeyFindsAnIDSpeltAnotherWay: an agent that writes an id back in its
// own spelling still finds its request, and plain ids cost no decode.
func TestKeyFindsAnIDSpeltAnotherWay(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{`"\u0061b"`, `"ab"`},
		{`1.0`, `1`},
		{`1e2`, `100`},
		{`7`, `7`},
		{`"req-7"`, `"req-7"`},
	} {
		if Key([]byte(tt.a)) != Key([]byte(tt.b)) {
			t.Errorf("Key(%s) = %q, Key(%s) = %q: want the same", tt.a, Key([]byte(tt.a)), tt.b, Key([]byte(tt.b)))
		}
	}
	if Key([]byte(`"a"`)) == Key([]byte(`"b"`)) {
		t.Error("two ids share a key")
	}
}

// TestRespondOnce: the first answer to a request takes it out and is
// first; a second finds it answered, until the client uses the id again;
// an id never noted is a first answer, once; an unsent request is not
// answered; the ring forgets the oldest past keepAnswered.
func TestRespondOnce(t *testing.T) {
	l := New(nil)
	l.Update(func(f *Flight) { f.Requests.Note("1", "session/prompt", "s").State = Sent })
	if q, first := l.Respond("1"); !first || q.Method != "session/prompt" || q.Session != "s" {
		t.Fatalf("the first answer: %+v, first %v", q, first)
	}
	if _, first := l.Respond("1"); first {
		t.Fatal("a second answer reads as the first")
	}
	if q, first := l.Respond("2"); !first || q.Method != "" {
		t.Errorf("an id nobody noted: %+v, first %v; want a first answer", q, first)
	}
	if _, first := l.Respond("2"); first {
		t.Error("a second answer to an id nobody noted reads as the first")
	}
	l.Take("1", "session/prompt", "s")
	if _, first := l.Respond("1"); !first {
		t.Error("the answer to an id the client sent again reads as a second")
	}
	l.Take("3", "session/prompt", "s")
	l.Update(func(f *Flight) { f.Unsent("3", "s", true) })
	if _, first := l.Respond("3"); !first {
		t.Error("the answer to a request that never reached the agent reads as a second")
	}
	for i := range keepAnswered + 1 {
		id := string(rune('a'+i%26)) + fmt.Sprint(i)
		l.Take(id, "m", "")
		l.Respond(id)
	}
	if _, first := l.Respond("a0"); !first {
		t.Error("the oldest answered id is kept past keepAnswered")
	}
}

// TestEndForgetsAnEmptySession: a rebuild of a session the ledger knew
// nothing of leaves no entry behind; one of a session with flight state
// keeps it.
func TestEndForgetsAnEmptySession(t *testing.T) {
	l := New(nil)
	l.Update(func(f *Flight) {
		if _, ok := f.Sessions.Begin("made-up", "reset"); !ok {
			t.Fatal("a rebuild of an unknown session was refused")
		}
		f.Sessions.End("made-up")
		if _, kept := f.Sessions.all["made-up"]; kept {
			t.Error("the ledger kept an empty entry for a session nobody knows")
		}
		f.Remap("s1", "n1", 0)
		f.Sessions.Begin("s1", "reset")
		f.Sessions.End("s1")
		if s := f.Sessions.all["s1"]; s == nil || s.Native != "n1" || s.Busy != "" {
			t.Errorf("a known session after its rebuild: %+v", s)
		}
	})
}

// TestV2TurnSpansItsAcceptedPrompt: a v2 prompt is answered as soon as it
// is accepted, so the turn, not the request, keeps chunks read; its idle
// ends it once, and a death hands the running turn to the caller to end.
func TestV2TurnSpansItsAcceptedPrompt(t *testing.T) {
	l := New(func() {})
	var first bool
	l.Update(func(f *Flight) {
		f.Remap("c1", "n1", 0)
		f.Requests.Record("5", "session/prompt", "c1")
		_, first = f.Requests.Respond("5") // {messageId}: accepted
		f.Sessions.TurnAccepted("c1", Request{})
	})
	if !first || !l.Running() {
		t.Fatalf("after the acceptance: first %v running %v, want true true", first, l.Running())
	}
	var ended, again bool
	l.Update(func(f *Flight) { ended, again = f.Sessions.TurnIdle("c1"), f.Sessions.TurnIdle("c1") })
	if !ended || again || l.Running() {
		t.Fatalf("idle ended %v, a second idle ended %v, running after %v; want true false false", ended, again, l.Running())
	}
	var g Gone
	l.Update(func(f *Flight) {
		f.Sessions.TurnAccepted("c1", Request{})
		f.Sessions.TurnAccepted("c1", Request{}) // the record hears of one turn once; a repeat counts once
		g = f.AgentGone(1)
	})
	if !reflect.DeepEqual(g.Turns, []string{"c1"}) || l.Running() {
		t.Fatalf("the death hands over turns %v, running after %v; want [c1] false", g.Turns, l.Running())
	}
	l.Update(func(f *Flight) { ended = f.Sessions.TurnIdle("c1") })
	if ended {
		t.Error("the dead agent's late idle ended a turn the death ended already")
	}
}

// TestV2TurnBeganBeforeItsAcceptance: a running report before the prompt's
// acceptance begins that prompt's turn, whose idle may come before the
// acceptance, which then starts nothing; a running report with no prompt
// in flight begins a turn of the agent's own.
func TestV2TurnBeganBeforeItsAcceptance(t *testing.T) {
	l := New(func() {})
	var began Began
	var q Request
	l.Update(func(f *Flight) {
		f.Remap("c1", "n1", 0)
		f.Requests.Record("5", "session/prompt", "c1")
		began = f.TurnBegan("c1")
	})
	if began != BeganPrompt || !l.Running() || l.TurnStateOf("n1", true) != Running {
		t.Fatalf("running before the acceptance: began %v running %v, want the prompt's turn", began, l.Running())
	}
	var ended bool
	l.Update(func(f *Flight) {
		ended = f.Sessions.TurnIdle("c1")
		q, _ = f.Requests.Respond("5")
		f.Sessions.TurnAccepted("c1", q) // the {messageId}, after the idle
	})
	if !ended || l.Running() || l.TurnStateOf("n1", true) != Between {
		t.Fatalf("idle ended %v, running after the late acceptance %v; want the turn over", ended, l.Running())
	}
	l.Update(func(f *Flight) { began = f.TurnBegan("c1") })
	if began != BeganAgent || !l.Running() {
		t.Fatalf("running with no prompt in flight: began %v, want a turn of the agent's", began)
	}
	l.Update(func(f *Flight) { began = f.TurnBegan("c1") })
	if began != BeganBefore {
		t.Fatalf("a second running report began %v, want nothing new", began)
	}
	l.Update(func(f *Flight) { ended = f.Sessions.TurnIdle("c1") })
	if !ended || l.Running() {
		t.Fatal("the agent's turn did not end at its idle")
	}
}

// TestTurnStateOf: between turns, a v1 prompt in flight runs a turn, a v2
// one only once accepted, and a load or resume in flight is an opening.
func TestTurnStateOf(t *testing.T) {
	l := New(func() {})
	l.Update(func(f *Flight) { f.Remap("c1", "n1", 0) })
	if st := l.TurnStateOf("n1", false); st != Between {
		t.Fatalf("no request: %v, want Between", st)
	}
	l.Update(func(f *Flight) { f.Requests.Record("5", "session/prompt", "c1") })
	if v1, v2 := l.TurnStateOf("n1", false), l.TurnStateOf("n1", true); v1 != Running || v2 != Between {
		t.Fatalf("a prompt in flight: v1 %v v2 %v, want Running and Between", v1, v2)
	}
	l.Update(func(f *Flight) {
		f.Requests.Respond("5")
		f.Requests.Note("6", "session/load", "c1")
	})
	if st := l.TurnStateOf("n1", false); st != Opening {
		t.Fatalf("a load in flight: %v, want Opening", st)
	}
}

// TestAnnouncedIsBusy: an operation announced makes its session busy from
// the moment it is taken, through the rebuild it begins and ends, until it
// is over; the counters come back to nothing.
func TestAnnouncedIsBusy(t *testing.T) {
	l := New(func() {})
	l.Update(func(f *Flight) { f.Sessions.Announce("c1") })
	if !l.IsBusy("c1") || !l.AnyBusy() || l.BusyWith("c1") != "" {
		t.Fatal("an announced operation does not make its session busy")
	}
	var ok bool
	l.Update(func(f *Flight) { _, ok = f.Sessions.Begin("c1", "reset") })
	if !ok || l.BusyWith("c1") != "reset" {
		t.Fatal("the announced operation's rebuild could not begin")
	}
	l.Update(func(f *Flight) { f.Sessions.End("c1") })
	if !l.IsBusy("c1") {
		t.Fatal("the session is not busy between its rebuild's end and its operation's")
	}
	l.Update(func(f *Flight) { f.Sessions.Announced("c1"); f.Sessions.Announced("c1") })
	if l.IsBusy("c1") || l.AnyBusy() {
		t.Fatal("the session is busy after its operation ended")
	}
	l.Update(func(f *Flight) {
		f.Sessions.Announce("c2")
		f.Sessions.Forget("c2") // deleted while its operation runs
		f.Sessions.Announced("c2")
	})
	if l.AnyBusy() {
		t.Fatal("a session forgotten while announced leaves the ledger busy")
	}
}

// TestUnopenedSessionsCostNothing: until a session is opened here, the
// record can leave an agent's output alone (Opened false, TurnStateOf
// Unknown); once one is, output between its turns is Between, the turn
// before's background work.
func TestUnopenedSessionsCostNothing(t *testing.T) {
	l := New(nil)
	if l.Opened() || l.TurnStateOf("n1", false) != Unknown {
		t.Fatalf("no session opened: opened %v, state %v; want false, Unknown", l.Opened(), l.TurnStateOf("n1", false))
	}
	l.Update(func(f *Flight) { f.Remap("c1", "n1", f.Life()) })
	if !l.Opened() || l.TurnStateOf("n1", false) != Between || l.TurnStateOf("n2", false) != Unknown {
		t.Errorf("c1 opened on n1: opened %v, n1 %v, n2 %v; want true, Between, Unknown", l.Opened(), l.TurnStateOf("n1", false), l.TurnStateOf("n2", false))
	}
}

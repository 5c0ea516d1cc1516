package life

import "testing"

// TestGoneThenBack: an exit moves the phase before it counts the life, and
// a return wakes whoever waits on the signal.
func TestGoneThenBack(t *testing.T) {
	ready := NewSignal()
	l := New(ready)
	if l.Phase() != Up || l.Gen() != 0 || l.LastExit() != "" {
		t.Fatalf("a new life: phase %v gen %d exit %q", l.Phase(), l.Gen(), l.LastExit())
	}
	changed := ready.Changed()
	if gen := l.Gone("exit status 3"); gen != 1 || l.Phase() != Restarting || l.LastExit() != "exit status 3" {
		t.Fatalf("after an exit: gen %d phase %v exit %q", gen, l.Phase(), l.LastExit())
	}
	l.Back()
	select {
	case <-changed:
	default:
		t.Fatal("the agent's return woke nobody")
	}
	if l.Phase() != Up || l.Gen() != 1 {
		t.Errorf("back: phase %v gen %d", l.Phase(), l.Gen())
	}
	l.Dead("exit status 3; restart budget used up")
	if l.Phase() != Dead || l.LastExit() != "exit status 3; restart budget used up" {
		t.Errorf("dead: phase %v exit %q", l.Phase(), l.LastExit())
	}
}

// countingWaker counts the wakes a Life gives its waiters.
type countingWaker struct{ fired int }

func (w *countingWaker) Fire() { w.fired++ }

// TestLifeWakesOnEveryChangeOfPhase: the waiters hear of the agent's return
// and of its death; an exit alone wakes nobody, as nothing can go on yet.
func TestLifeWakesOnEveryChangeOfPhase(t *testing.T) {
	w := &countingWaker{}
	l := New(w)
	l.Gone("exit status 1")
	if w.fired != 0 {
		t.Errorf("an exit woke the waiters %d times, want none", w.fired)
	}
	l.Back()
	l.Dead("exit status 1; restart budget used up")
	if w.fired != 2 {
		t.Errorf("a return and a death woke the waiters %d times, want 2", w.fired)
	}
}

package remote

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A reader resumes after any cursor still kept, and is refused one whose
// messages were dropped: never a silent gap.
func TestOutboxResumesOrRefuses(t *testing.T) {
	o := newOutbox(Retention{Messages: 3, Bytes: 1 << 20})
	for _, m := range []string{"a", "b", "c", "d", "e"} {
		o.add("s", []byte(m))
	}
	// Kept: c (3), d (4), e (5). A stream nobody read lost a and b: a
	// fresh reader is refused.
	var gap *gapError
	if _, err := o.start("s", false, false, 0); !errors.As(err, &gap) {
		t.Errorf("a fresh reader of a stream that lost messages: %v, want a gap", err)
	}
	after, err := o.start("s", false, true, 3)
	if err != nil {
		t.Fatalf("resume after 3: %v", err)
	}
	got, _, _, err := o.read("s", false, after)
	if err != nil || len(got) != 2 || string(got[0].msg) != "d" || got[1].cursor != 5 {
		t.Fatalf("after 3: %v %v", got, err)
	}
	if _, err := o.start("s", false, true, 1); !errors.As(err, &gap) {
		t.Errorf("resume after 1 (2 dropped): %v, want a gap", err)
	}
	if _, err := o.start("s", false, true, 9); !errors.As(err, &gap) {
		t.Errorf("resume after a cursor never given: %v, want a refusal", err)
	}
}

// A reader that keeps reading keeps what it has yet to take, past the
// retention, up to the hard bound; a stalled one is then cut off.
func TestOutboxKeepsWhatAReaderHasYetToTake(t *testing.T) {
	o := newOutbox(Retention{Messages: 2, Bytes: 1 << 20})
	done := o.attach("s", false)
	defer done()
	for i := range 2 * hardFactor {
		o.add("s", []byte{byte('a' + i)})
	}
	got, _, _, err := o.read("s", false, 0)
	if err != nil || len(got) != 2*hardFactor {
		t.Fatalf("an attached reader got %d of %d: %v", len(got), 2*hardFactor, err)
	}
	for range 3 * hardFactor {
		o.add("s", []byte("x"))
	}
	if _, _, _, err := o.read("s", false, 2*hardFactor); err == nil {
		t.Errorf("a reader past the hard bound was not cut off")
	}
}

// Routes are separate streams; a reader of all of them (a WebSocket) gets
// every message in cursor order.
func TestOutboxRoutes(t *testing.T) {
	o := newOutbox(DefaultRetention)
	o.add("", []byte("conn"))
	o.add("s1", []byte("one"))
	o.add("s2", []byte("two"))
	one, _, _, _ := o.read("s1", false, 0)
	if len(one) != 1 || string(one[0].msg) != "one" {
		t.Errorf("s1: %v", one)
	}
	all, _, _, _ := o.read("", true, 0)
	if len(all) != 3 || all[0].cursor != 1 || all[2].cursor != 3 {
		t.Errorf("all: %v", all)
	}
	o.close()
	if _, _, closed, _ := o.read("", true, 3); !closed {
		t.Errorf("a closed outbox does not say so")
	}
}

package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestTurnJSONIsEncode(t *testing.T) {
	check := func(name string, tu *Turn) {
		t.Helper()
		got, err := turnJSON(tu)
		want, werr := encode(tu)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: turnJSON differs from encode (errors %v, %v):\n got  %s\n want %s", name, err, werr, got, want)
		}
	}
	for i, tu := range turnCases() {
		check(fmt.Sprint("case ", i), tu)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		check(fmt.Sprint("random ", i), randomTurn(rng))
	}
}

// A record written before turns had notices and sessions had a title and a
// compaction reads as one without them, and a turn without notices is
// written as it always was (TestTurnJSONIsEncode holds turnJSON to encode).
func TestOldRecordsLoad(t *testing.T) {
	var tu Turn
	if err := json.Unmarshal([]byte(`{"index":2,"promptText":"hi","answer":"yo","stopReason":"end_turn","status":"completed","started":"2025-03-01T12:00:00Z"}`), &tu); err != nil {
		t.Fatal(err)
	}
	if tu.Notices != nil || tu.Answer != "yo" {
		t.Errorf("old turn read as %+v", tu)
	}
	b, err := turnJSON(&tu)
	if err != nil || bytes.Contains(b, []byte("notices")) {
		t.Errorf("turn without notices written as %s (%v)", b, err)
	}
	var s Session
	if err := json.Unmarshal([]byte(`{"clientId":"a","cwd":"/x","created":"2025-03-01T12:00:00Z","updated":"2025-03-01T12:00:00Z","contextFrom":2}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Title != "" || s.Compaction != nil || s.ContextFrom != 2 {
		t.Errorf("old session read as %+v", s)
	}
}

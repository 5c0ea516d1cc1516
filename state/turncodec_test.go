package state

import (
	"bytes"
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

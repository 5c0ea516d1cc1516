package state

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestCloneTurnIsClone(t *testing.T) {
	check := func(name string, tu *Turn) {
		t.Helper()
		got, want := cloneTurn(tu), clone(tu)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: cloneTurn differs from clone:\n got  %#v\n want %#v", name, got, want)
		}
		if len(tu.Prompt) > 0 && &got.Prompt[0] == &tu.Prompt[0] {
			t.Errorf("%s: the clone shares the prompt's bytes", name)
		}
	}
	for i, tu := range turnCases() {
		check(fmt.Sprint("case ", i), tu)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		check(fmt.Sprint("random ", i), randomTurn(rng))
	}
}

package state

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// What the two copies of a turn off encoding/json share, the hand encoder
// (turncodec.go) and the fast clone (turnclone.go): the turns both are
// tested on, the guard on Turn's fields, and the test and benchmark that
// hold both to encoding/json.

// turnCases are turns with every field set, and the odd values the JSON
// round trip changes: invalid UTF-8, escapes, a prompt with white space,
// times with a monotonic reading and in other zones, empty lists.
func turnCases() []*Turn {
	now := time.Now()
	east := time.FixedZone("EAST", 3*3600)
	full := &Turn{
		Index:            7,
		Prompt:           []byte(` [ {"type": "text", "text": "a <b> & \u00e9"} ] `),
		PromptText:       "a <b> & é\n",
		Answer:           strings.Repeat("The relay reads one line. ", 700),
		ToolCalls:        []ToolCall{{ID: "call_1", Title: "Read file", Status: "completed"}, {ID: ""}, {ID: "c\xff", Status: "in\u2028progress"}},
		Notices:          []string{"**Warning:** a hook <blocked> it", "", "bad \xff and \"quotes\"\n"},
		Origin:           OriginAgent,
		Asked:            []string{"Write <main.go> & run", "bad \xff"},
		MessageID:        "msg_01 <&>",
		UserMessageID:    "3f1c2a9e-<&>",
		StopReason:       "end_turn",
		NativeID:         "sess_1",
		Status:           TurnCompleted,
		HandoffDelivered: true,
		Handoff:          "[acp-sidecar] What follows <turn 1 user>\nhi\n</turn 1 user>",
		Agent:            "claude",
		Started:          now,
		Ended:            now.Add(time.Second),
	}
	odd := "quote \" backslash \\ slash / nul \x00 bell \a bs \b ff \f nl \n cr \r tab \t esc \x1b del \x7f " +
		"html <>& ls \u2028 ps \u2029 emoji 😀 bad \xff\xfe lone \x80 cut \xe2\x82 end \xc3"
	return []*Turn{
		{Index: 1},
		full,
		{Index: 2, PromptText: odd, Answer: odd + odd, Origin: odd, Asked: []string{odd}, MessageID: odd, UserMessageID: odd, StopReason: odd, NativeID: odd, Handoff: odd, Agent: odd, Status: TurnStatus(odd), Started: now.UTC()},
		{Index: 3, Prompt: []byte(`null`), ToolCalls: []ToolCall{}, Notices: []string{}, Asked: []string{}, Started: now.In(east), Ended: now.In(time.UTC)},
		{Index: 4, Prompt: []byte{}, Started: time.Date(2026, 1, 2, 3, 4, 5, 6, east)},
		{Index: 5, Answer: strings.Repeat("x", 7) + "\n" + strings.Repeat("y", 9), Started: time.Unix(0, 0)},
	}
}

// randomTurn builds a turn whose texts are drawn from bytes the encoding
// treats specially, in runs long enough to cross the 8-byte fast path.
func randomTurn(rng *rand.Rand) *Turn {
	pieces := []string{"a", "plain text ", "\"", "\\", "\n", "\x01", "\x7f", "é", "😀", "\u2028", "\xff", "\xe2\x82", "<&>", "12345678"}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	t := &Turn{Index: 1 + rng.IntN(100), PromptText: text(), Answer: text(), MessageID: text(), UserMessageID: text(), StopReason: text(), Status: TurnStatus(text()), Started: time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9))}
	for range rng.IntN(3) {
		t.ToolCalls = append(t.ToolCalls, ToolCall{ID: text(), Title: text(), Status: text()})
	}
	for range rng.IntN(3) {
		t.Notices = append(t.Notices, text())
	}
	for range rng.IntN(3) {
		t.Asked = append(t.Asked, text())
	}
	if rng.IntN(2) == 0 {
		t.Origin = text()
	}
	return t
}

// The fields cloneTurn and turnJSON know. A new field of Turn or ToolCall
// must be added to both (and to turnCases), or they would drop it.
const turnFields, toolCallFields = 18, 3

func TestTurnHasTheKnownFields(t *testing.T) {
	if n := reflect.TypeFor[Turn]().NumField(); n != turnFields {
		t.Errorf("Turn has %d fields, cloneTurn and turnJSON know %d: add the new one to both", n, turnFields)
	}
	if n := reflect.TypeFor[ToolCall]().NumField(); n != toolCallFields {
		t.Errorf("ToolCall has %d fields, cloneTurn and turnJSON know %d: add the new one to both", n, toolCallFields)
	}
}

// Values encoding/json refuses get its errors and its panics, not others.
func TestTurnCopiesRefuseWhatJSONRefuses(t *testing.T) {
	for _, tu := range []*Turn{
		{Index: 1, Prompt: []byte(`{"unterminated`)},
		{Index: 1, Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Index: 1, Ended: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		_, err := turnJSON(tu)
		_, werr := encode(tu)
		if err == nil || werr == nil || err.Error() != werr.Error() {
			t.Errorf("turnJSON error %v, encode error %v: want the same", err, werr)
		}
		panics := func(f func()) (p bool) {
			defer func() { p = recover() != nil }()
			f()
			return false
		}
		if !panics(func() { cloneTurn(tu) }) || !panics(func() { clone(tu) }) {
			t.Errorf("cloneTurn and clone of %+v: want both to panic", tu)
		}
	}
}

// BenchmarkPutTurnCopies is what a turn with a 16 KiB answer costs the copy
// and the encoding on its way to the store, against encoding/json.
func BenchmarkPutTurnCopies(b *testing.B) {
	tu := turnCases()[1]
	tu.Answer = tu.Answer[:16<<10]
	b.Run("clone", func(b *testing.B) {
		for b.Loop() {
			clone(tu)
		}
	})
	b.Run("cloneTurn", func(b *testing.B) {
		for b.Loop() {
			cloneTurn(tu)
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			encode(tu)
		}
	})
	b.Run("turnJSON", func(b *testing.B) {
		for b.Loop() {
			turnJSON(tu)
		}
	})
}

package state

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// The clone fast path: Shared.PutTurn copies the turn it is given, so the
// caller may reuse it (Store), and that copy is on the path of the turn's
// end, which is written before its response goes on (DESIGN.md
// "Processes"). clone's JSON round trip of a turn was the largest part of
// that write (see cloneTurn). cloneTurn gives what clone gives, field by
// field, without encoding/json; clone (store.go) stays the reference and
// makes every other copy. TestCloneTurnIsClone holds the two to the same
// result, and TestTurnHasTheKnownFields fails when Turn gains a field the
// copy does not know.

// cloneTurn is clone(t) without encoding/json. A turn's end is written
// before its response goes on (DESIGN.md "Processes"), so this copy is on
// that response's path, where the JSON round trip of a turn with an answer
// of 16 KiB took 130 µs (cloneTurn: 2), and the first turn of a process
// paid as much again to build encoding/json's caches for Turn. It gives what
// clone gives, field by field: strings coerced to valid UTF-8 and shared
// (they are immutable), the prompt compacted into a copy, times as they read
// back from JSON, empty lists nil. TestCloneTurnIsClone compares the two and
// fails on a field it does not know. A value clone refuses (a prompt that is
// not JSON, a year past 9999) goes through clone, which panics on it.
func cloneTurn(t *Turn) *Turn {
	out := &Turn{
		Index:            t.Index,
		PromptText:       jsonString(t.PromptText),
		Answer:           jsonString(t.Answer),
		Origin:           jsonString(t.Origin),
		MessageID:        jsonString(t.MessageID),
		UserMessageID:    jsonString(t.UserMessageID),
		StopReason:       jsonString(t.StopReason),
		NativeID:         jsonString(t.NativeID),
		Status:           TurnStatus(jsonString(string(t.Status))),
		HandoffDelivered: t.HandoffDelivered,
		Handoff:          jsonString(t.Handoff),
		Agent:            jsonString(t.Agent),
	}
	if len(t.Prompt) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, t.Prompt) != nil {
			return clone(t)
		}
		out.Prompt = b.Bytes()
	}
	if len(t.ToolCalls) > 0 {
		out.ToolCalls = make([]ToolCall, len(t.ToolCalls))
		for i, tc := range t.ToolCalls {
			out.ToolCalls[i] = ToolCall{ID: jsonString(tc.ID), Title: jsonString(tc.Title), Status: jsonString(tc.Status)}
		}
	}
	if len(t.Notices) > 0 {
		out.Notices = make([]string, len(t.Notices))
		for i, s := range t.Notices {
			out.Notices[i] = jsonString(s)
		}
	}
	if len(t.Asked) > 0 {
		out.Asked = make([]string, len(t.Asked))
		for i, s := range t.Asked {
			out.Asked[i] = jsonString(s)
		}
	}
	var ok bool
	if out.Started, ok = jsonTime(t.Started); !ok {
		return clone(t)
	}
	if !t.Ended.IsZero() { // omitzero: a zero Ended stays the zero Time
		if out.Ended, ok = jsonTime(t.Ended); !ok {
			return clone(t)
		}
	}
	return out
}

// jsonString is s after a round trip through encoding/json: s itself when
// it is valid UTF-8, else with each invalid byte replaced by U+FFFD, as the
// encoder does.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// jsonTime is t after a round trip through its JSON form: no monotonic
// reading, and the location parsing gives it. false: t has no JSON form.
func jsonTime(t time.Time) (time.Time, bool) {
	b, err := t.MarshalJSON()
	if err != nil {
		return time.Time{}, false
	}
	var out time.Time
	if out.UnmarshalJSON(b) != nil {
		return time.Time{}, false
	}
	return out, true
}

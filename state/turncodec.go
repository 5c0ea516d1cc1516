package state

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The turn codec: a turn's JSON form for the store on disk, written by
// hand. A turn's end is written before its response goes on (DESIGN.md
// "Processes"), so its encoding is on that response's path, and most of
// encode's cost there was encoding/json's reflection and the caches it
// builds for Turn in the first turn of a process (see turnJSON). The hand
// encoder writes exactly encode's bytes, so the records on disk are what
// they were; reading them back stays with json.Unmarshal.
// TestTurnJSONIsEncode holds the two to the same bytes, and
// TestTurnHasTheKnownFields fails when Turn gains a field the codec does
// not write.

// turnJSON is encode(t), byte for byte, without reflection. A turn's end is
// written before its response goes on (DESIGN.md "Processes"), and encode
// took 30 µs there for an answer of 16 KiB (turnJSON: 10), and some 200 µs
// more in the first turn of a process, which builds encoding/json's caches
// for Turn (BenchmarkPutTurnCopies). Anything
// out of the ordinary (a prompt that is not JSON, a year past 9999) goes
// through encode, so the errors are encode's. TestTurnJSONIsEncode compares
// the two and fails on a field it does not know.
func turnJSON(t *Turn) ([]byte, error) {
	n := 256 + len(t.Prompt) + len(t.PromptText) + len(t.Answer) + len(t.MessageID) + len(t.UserMessageID) + len(t.Handoff)
	for _, tc := range t.ToolCalls {
		n += 40 + len(tc.ID) + len(tc.Title) + len(tc.Status)
	}
	for _, s := range t.Notices {
		n += 4 + len(s)
	}
	for _, s := range t.Asked {
		n += 4 + len(s)
	}
	n += len(t.Origin)
	b := make([]byte, 0, n)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(t.Index), 10)
	if len(t.Prompt) > 0 {
		buf := bytes.NewBuffer(append(b, `,"prompt":`...))
		if json.Compact(buf, t.Prompt) != nil {
			return encode(t)
		}
		b = buf.Bytes()
	}
	b = appendMember(b, "promptText", t.PromptText, true)
	b = appendMember(b, "answer", t.Answer, true)
	if len(t.ToolCalls) > 0 {
		b = append(b, `,"toolCalls":[`...)
		for i, tc := range t.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, tc.ID)
			b = appendMember(b, "title", tc.Title, true)
			b = appendMember(b, "status", tc.Status, true)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(t.Notices) > 0 {
		b = append(b, `,"notices":[`...)
		for i, s := range t.Notices {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = appendMember(b, "origin", t.Origin, true)
	if len(t.Asked) > 0 {
		b = append(b, `,"asked":[`...)
		for i, s := range t.Asked {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = appendMember(b, "messageId", t.MessageID, true)
	b = appendMember(b, "userMessageId", t.UserMessageID, true)
	b = appendMember(b, "stopReason", t.StopReason, true)
	b = appendMember(b, "nativeId", t.NativeID, true)
	b = appendMember(b, "status", string(t.Status), false)
	if t.HandoffDelivered {
		b = append(b, `,"handoffDelivered":true`...)
	}
	b = appendMember(b, "handoff", t.Handoff, true)
	b = appendMember(b, "agentName", t.Agent, true)
	started, err := t.Started.MarshalJSON()
	if err != nil {
		return encode(t)
	}
	b = append(append(b, `,"started":`...), started...)
	if !t.Ended.IsZero() {
		ended, err := t.Ended.MarshalJSON()
		if err != nil {
			return encode(t)
		}
		b = append(append(b, `,"ended":`...), ended...)
	}
	return append(b, '}'), nil
}

// appendMember appends `,"name":` and s as a JSON string; omitEmpty leaves
// out an empty s, as the omitempty tag does.
func appendMember(b []byte, name, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return b
	}
	b = append(append(append(b, `,"`...), name...), `":`...)
	return appendJSONString(b, s)
}

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off, as encode does: invalid UTF-8 becomes U+FFFD, U+2028 and
// U+2029 are escaped, and so are '"', '\\' and control characters, \b, \f,
// \n, \r and \t by name. Runs of plain ASCII, nearly all of an answer, are
// passed over eight bytes at a time.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainASCII8(s[i:i+8]) {
			i += 8
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainASCII8 reports whether the 8 bytes of s are all printable ASCII but
// '"' and '\\', which a JSON string holds as they are. The bytes are read as
// one word; in each of its bytes, a high bit is set by a byte of 0x80 or
// more, by one below 0x20 (the subtraction borrows), or by one equal to '"'
// or '\\' (the XOR makes it 0, and 0 minus 1 borrows). A borrow can only
// spill into the next byte from a byte that is flagged already.
func plainASCII8(s string) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	return (x|(x-0x20*lo)|((x^'"'*lo)-lo)|((x^'\\'*lo)-lo))&hi == 0
}

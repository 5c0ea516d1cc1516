package proxy

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// Kind says what sort of JSON-RPC message a frame is, judged by its members alone.
type Kind uint8

const (
	// KindOther is valid JSON that is not a JSON-RPC object: an array (a v2
	// batch), a bare value, or an object with neither method nor id.
	KindOther Kind = iota
	// KindRequest has a method and an id (a null id counts: ACP allows it).
	KindRequest
	// KindNotification has a method and no id.
	KindNotification
	// KindResponse has an id and no method.
	KindResponse
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "other"
}

// Span is a half-open byte range [Start, End) of a frame. The zero Span means
// "absent"; a present value never starts at offset 0, because offset 0 is the
// frame's opening brace.
type Span struct{ Start, End int }

// Present reports whether the span names a value.
func (s Span) Present() bool { return s.End > s.Start }

// Envelope is what the relay learns of a frame without decoding it: enough to
// route it, match responses to requests and find its session. The byte slices
// alias the frame and are valid only as long as it is.
type Envelope struct {
	Kind Kind
	// ID is the raw id token exactly as sent (`5`, `"a"`, `null`), nil when absent.
	ID []byte
	// Method is the unescaped method name, nil when absent.
	Method []byte
	// SessionID spans the raw value of params.sessionId, quotes included, so a
	// rewrite can splice it in place.
	SessionID Span
	// Update is the unescaped params.update.sessionUpdate, nil when absent.
	Update []byte
	// Error is true when a response carries an error member.
	Error bool
}

// MethodIs compares the method without allocating.
func (e *Envelope) MethodIs(m string) bool { return string(e.Method) == m }

// maxDepth bounds nesting. encoding/json stops at the same depth, so a frame we
// refuse for depth would have been refused by a Go peer too.
const maxDepth = 10000

// A SyntaxError says why a frame is not valid JSON in UTF-8.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Scan validates frame as one JSON value in valid UTF-8 and peeks its envelope.
// It allocates nothing for ordinary frames, which is what keeps the relay near
// the speed of a plain byte copy (DESIGN.md, "Speed").
func Scan(frame []byte) (Envelope, error) {
	s := scanner{b: frame}
	var env Envelope
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		s.object(0, roleTop, &env)
	} else {
		s.value(0)
	}
	if s.err == nil {
		s.ws()
		if s.i != len(s.b) {
			s.fail("data after the top-level value")
		}
	}
	if s.err != nil {
		return Envelope{}, s.err
	}
	if env.Method != nil && !s.topHasMethod {
		env.Method = nil
	}
	switch {
	case s.topHasMethod && env.ID != nil:
		env.Kind = KindRequest
	case s.topHasMethod:
		env.Kind = KindNotification
	case env.ID != nil && s.topIsObject:
		env.Kind = KindResponse
	}
	return env, nil
}

// ScanPrefix peeks what it can of a frame that was cut short, such as the head
// of an oversized line: the members seen before the cut. It never reports a
// syntax error for the cut itself.
func ScanPrefix(head []byte) Envelope {
	s := scanner{b: head, partial: true}
	var env Envelope
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		s.object(0, roleTop, &env)
	}
	switch {
	case s.topHasMethod && env.ID != nil:
		env.Kind = KindRequest
	case s.topHasMethod:
		env.Kind = KindNotification
	case env.ID != nil:
		env.Kind = KindResponse
	}
	if !s.topHasMethod {
		env.Method = nil
	}
	return env
}

type role uint8

const (
	roleNone role = iota
	roleTop
	roleParams
	roleUpdate
)

type scanner struct {
	b            []byte
	i            int
	err          error
	partial      bool
	topHasMethod bool
	topIsObject  bool
}

func (s *scanner) fail(msg string) {
	if s.err == nil {
		s.err = &SyntaxError{Offset: s.i, Msg: msg}
	}
}

func (s *scanner) eof() bool {
	if s.i >= len(s.b) {
		s.fail("unexpected end of frame")
		return true
	}
	return false
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) {
	if s.eof() {
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.object(depth, roleNone, nil)
	case c == '[':
		s.array(depth)
	case c == '"':
		s.str()
	case c == 't':
		s.lit("true")
	case c == 'f':
		s.lit("false")
	case c == 'n':
		s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		s.number()
	default:
		s.fail("unexpected character " + quoteByte(c))
	}
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("0x%02x", c)
}

// object scans an object. With a role it also picks out the members the
// envelope needs; env is nil for roleNone.
func (s *scanner) object(depth int, r role, env *Envelope) {
	if depth >= maxDepth {
		s.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
		return
	}
	if r == roleTop {
		s.topIsObject = true
	}
	s.i++ // '{'
	s.ws()
	if s.eof() {
		return
	}
	if s.b[s.i] == '}' {
		s.i++
		return
	}
	for {
		s.ws()
		if s.eof() {
			return
		}
		if s.b[s.i] != '"' {
			s.fail("expected a member name")
			return
		}
		kStart := s.i
		escaped := s.str()
		if s.err != nil {
			return
		}
		key := s.b[kStart+1 : s.i-1]
		if escaped {
			key = unescape(s.b[kStart:s.i])
		}
		s.ws()
		if s.eof() {
			return
		}
		if s.b[s.i] != ':' {
			s.fail("expected ':' after a member name")
			return
		}
		s.i++
		s.ws()
		if s.eof() {
			return
		}
		vStart := s.i
		s.member(depth, r, env, key)
		if s.err != nil {
			return
		}
		if r != roleNone {
			s.record(r, env, key, vStart)
		}
		s.ws()
		if s.eof() {
			return
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return
		default:
			s.fail("expected ',' or '}' in an object")
			return
		}
	}
}

// member scans one member's value, descending with a role where the envelope
// lives deeper (params, params.update).
func (s *scanner) member(depth int, r role, env *Envelope, key []byte) {
	// A repeated params or update replaces the earlier one, as in encoding/json.
	switch {
	case r == roleTop && string(key) == "params":
		env.SessionID, env.Update = Span{}, nil
	case r == roleParams && string(key) == "update":
		env.Update = nil
	}
	if s.b[s.i] == '{' {
		switch {
		case r == roleTop && string(key) == "params":
			s.object(depth+1, roleParams, env)
			return
		case r == roleParams && string(key) == "update":
			s.object(depth+1, roleUpdate, env)
			return
		}
	}
	s.value(depth + 1)
}

// record notes a member the envelope needs. Later duplicates win, as they do
// in encoding/json, so the two never disagree on what a frame says.
func (s *scanner) record(r role, env *Envelope, key []byte, vStart int) {
	v := s.b[vStart:s.i]
	switch r {
	case roleTop:
		switch string(key) {
		case "id":
			env.ID = v
		case "method":
			s.topHasMethod = true
			env.Method = stringValue(v)
		case "error":
			env.Error = true
		}
	case roleParams:
		if string(key) == "sessionId" {
			env.SessionID = Span{vStart, s.i}
		}
	case roleUpdate:
		if string(key) == "sessionUpdate" {
			env.Update = stringValue(v)
		}
	}
}

// stringValue returns the contents of a JSON string token, unescaped, or an
// empty non-nil slice for any other token (a method that is not a string is
// still a method member).
func stringValue(tok []byte) []byte {
	if len(tok) < 2 || tok[0] != '"' {
		return []byte{}
	}
	inner := tok[1 : len(tok)-1]
	for _, c := range inner {
		if c == '\\' {
			return unescape(tok)
		}
	}
	return inner
}

func unescape(tok []byte) []byte {
	var out string
	if err := json.Unmarshal(tok, &out); err != nil {
		return []byte{}
	}
	return []byte(out)
}

func (s *scanner) array(depth int) {
	if depth >= maxDepth {
		s.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
		return
	}
	s.i++ // '['
	s.ws()
	if s.eof() {
		return
	}
	if s.b[s.i] == ']' {
		s.i++
		return
	}
	for {
		s.ws()
		s.value(depth + 1)
		if s.err != nil {
			return
		}
		s.ws()
		if s.eof() {
			return
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return
		default:
			s.fail("expected ',' or ']' in an array")
			return
		}
	}
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// zeroBytes marks the zero bytes of x with their high bit (the classic SWAR
// test); the lowest mark is exact.
func zeroBytes(x uint64) uint64 { return (x - lo8) &^ x & hi8 }

// plain8 reports whether 8 bytes hold nothing a string scan must stop for:
// no quote, backslash, control character or non-ASCII byte. Base64 images make
// multi-megabyte strings, and this keeps them near memory speed.
func plain8(x uint64) bool {
	if x&hi8 != 0 {
		return false
	}
	if (x-0x2020202020202020)&hi8 != 0 { // a byte below 0x20 (no high bits are set)
		return false
	}
	return zeroBytes(x^(lo8*'"')) == 0 && zeroBytes(x^(lo8*'\\')) == 0
}

// special8 marks, with its high bit, each of 8 bytes a string scan must stop
// for. Only the lowest mark is exact (a borrow can mark bytes above a marked
// one), which is all str needs: it jumps to the first and handles it there.
func special8(x uint64) uint64 {
	return x&hi8 | // non-ASCII
		(x-0x2020202020202020)&^x&hi8 | // below 0x20
		zeroBytes(x^(lo8*'"')) |
		zeroBytes(x^(lo8*'\\'))
}

// str scans a string token and reports whether it held an escape.
func (s *scanner) str() (escaped bool) {
	b := s.b
	i := s.i + 1
	for {
		// Jump over plain bytes eight at a time to the first one that
		// matters; short keys and values hit one within a word, and a
		// byte-at-a-time step would test each word again (DESIGN.md, "Speed").
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if !plain8(x) {
				i += bits.TrailingZeros64(special8(x)) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			s.i = i
			s.fail("unterminated string")
			return escaped
		}
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				s.i = i
				s.fail("unterminated escape")
				return escaped
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					s.i = i
					s.fail("bad \\u escape")
					return escaped
				}
				i += 6
			default:
				s.i = i
				s.fail("bad escape")
				return escaped
			}
		case c < 0x20:
			s.i = i
			s.fail("control character in a string")
			return escaped
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				s.i = i
				s.fail("invalid UTF-8")
				return escaped
			}
			i += size
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) lit(word string) {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		s.fail("bad literal")
		return
	}
	s.i += len(word)
}

func (s *scanner) number() {
	b := s.b
	i := s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		s.i = i
		s.fail("bad number")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			s.fail("bad fraction")
			return
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			s.fail("bad exponent")
			return
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
}

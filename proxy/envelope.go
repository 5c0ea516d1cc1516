package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// Kind says what sort of JSON-RPC message a frame is, judged by its members alone.
type Kind uint8

const (
	// KindOther is valid JSON that is not a JSON-RPC object: an array (a
	// batch, which the relay refuses: IsBatch), a bare value, or an object
	// with neither method nor id.
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
	var s scanner
	s.run(frame, false)
	if s.err != nil {
		return Envelope{}, s.err
	}
	var env Envelope
	s.st.envelope(frame, false, &env)
	return env, nil
}

// ScanPrefix peeks what it can of a frame that was cut short, such as the head
// of an oversized line: the members seen before the cut. It never reports a
// syntax error for the cut itself.
func ScanPrefix(head []byte) Envelope {
	i := skipWS(head, 0)
	if i >= len(head) || head[i] != '{' {
		return Envelope{}
	}
	var s scanner
	s.run(head, false)
	var env Envelope
	s.st.envelope(head, true, &env)
	return env
}

// Salvage peeks what it can of a malformed frame, to answer it under its id:
// a frame that is valid JSON but for invalid UTF-8 inside a string is
// scanned with the bad bytes replaced; otherwise the members before the
// fault count (ScanPrefix), and an id written last is found at the end
// (TailID). A frame that only the id's position could tell a request from a
// notification is taken for a request when an id was found.
func Salvage(frame []byte) Envelope {
	if !utf8.Valid(frame) {
		if env, err := Scan(bytes.ToValidUTF8(frame, []byte("\uFFFD"))); err == nil {
			return env
		}
	}
	env := ScanPrefix(frame)
	if env.Kind == KindResponse && !env.Error && bytes.Contains(frame, []byte(`"method"`)) && !bytes.Contains(frame, []byte(`"result"`)) {
		// The cut came inside the method's value: an id and a method key
		// are a request.
		env.Kind = KindRequest
	}
	if env.ID == nil {
		if id := TailID(bytes.TrimRight(frame, " \t\r")); id != nil {
			env.ID = id
			if env.Kind == KindOther {
				env.Kind = KindResponse
			} else if env.Kind == KindNotification {
				env.Kind = KindRequest
			}
		}
	}
	return env
}

// streamScanner is Scan for a stream of frames. Agents send runs of frames
// that agree up to their payload (every agent_message_chunk of a turn
// starts with the same 160-odd bytes, up to its text), so it keeps the
// previous frame up to the start of its last long string value, with the
// scanner's state there, and a frame that starts with those bytes is
// scanned from that point on. The state at a point depends on nothing but
// the bytes before it, so the result is Scan's.
//
// Such frames mostly agree after their payload too (the `"}}}}` that
// closes a chunk), so it also keeps what followed that string value in the
// last frame that went through it, and what the frame's envelope read. A
// frame that starts the same, holds a valid string there and ends the
// same is that frame with another string: its envelope is the same, moved
// by the difference in length, and only the string is scanned.
type streamScanner struct {
	prev []byte    // the frame the snapshot came from, up to snap.i
	snap scanState // the state at prev's end
	have bool
	next scanState // the snapshot of the frame being scanned

	// tail followed the snapshot's string, from tailAt on, in a frame
	// whose envelope read end; haveTail when that holds for snap.
	tail     []byte
	tailAt   int
	end      envState
	haveTail bool
	// still says no member of end lies after the snapshot's string, so
	// end is every such frame's envelope as it stands.
	still bool
}

// scan is Scan into env, from the snapshot where the frame allows it. env
// is written in place: the relay's frames are reused, and an Envelope
// returned by value would be copied twice more on its way there.
func (ss *streamScanner) scan(frame []byte, env *Envelope) error {
	if _, ok := ss.byTail(frame, false, env); ok {
		return nil
	}
	resume := ss.have && len(frame) > len(ss.prev) && string(frame[:len(ss.prev)]) == string(ss.prev)
	var s scanner
	if resume {
		s.st = ss.snap
		s.resumedAt = ss.snap.i
	}
	ss.next.i = 0
	s.snap = &ss.next
	s.run(frame, resume)
	if s.err != nil {
		*env = Envelope{}
		return s.err
	}
	if ss.next.i > 0 {
		ss.snap, ss.have = ss.next, true
		ss.prev = append(ss.prev[:0], frame[:ss.next.i]...)
		ss.haveTail = false
	}
	if s.snapEnd > 0 && ss.snap.plain() {
		// This frame went through the snapshot's string.
		ss.tail = append(ss.tail[:0], frame[s.snapEnd:]...)
		ss.tailAt, ss.end, ss.haveTail = s.snapEnd, s.st.envState, true
		ss.still = ss.end.before(ss.snap.i)
	}
	s.st.envelope(frame, false, env)
	return nil
}

// byTail reads a frame by the kept tail: it starts with prev, a valid
// string value follows and the tail after it. b is the frame itself, or,
// when lined, a reader's buffer where a '\n' ends the frame and the next
// frames can follow. It returns where the frame ends in b, and writes env
// only then.
//
// Most text is plain (no escape, no control or non-ASCII byte): the
// string then ends where stopIndex first stops. Other text is scanned as a
// string from there.
func (ss *streamScanner) byTail(b []byte, lined bool, env *Envelope) (end int, ok bool) {
	at := len(ss.prev) // == ss.snap.i: the value there is the frame's own
	if !ss.haveTail || len(b) <= at || string(b[:at]) != string(ss.prev) || b[at] != '"' {
		return 0, false
	}
	j := at + 1 + stopIndex(b[at+1:])
	if j < len(b) && b[j] == '"' {
		j++ // after the closing quote
	} else {
		var msg string
		if j, _, msg = scanString(b, j); msg != "" {
			return 0, false
		}
	}
	end = j + len(ss.tail)
	if end > len(b) || string(b[j:end]) != string(ss.tail) {
		return 0, false
	}
	if lined && (end == len(b) || b[end] != '\n') || !lined && end != len(b) {
		return 0, false
	}
	if ss.still {
		ss.end.envelope(b[:end], false, env)
		return end, true
	}
	st := ss.end
	st.shift(at, j-ss.tailAt)
	st.envelope(b[:end], false, env)
	return end, true
}

// role is what an object on the envelope's path is: the top-level object,
// its params, or params.update. Every other object is roleNone and only
// validated.
type role uint8

const (
	roleNone role = iota
	roleTop
	roleParams
	roleUpdate
)

// member names the members of a role object the envelope reads.
type member uint8

const (
	mNone member = iota
	mID
	mMethod
	mError
	mParams
	mSessionID
	mUpdate
	mSessionUpdate
)

// envDepth is how deep the envelope's path goes: top, params, update.
const envDepth = 3

// snapDepth is the deepest container a snapshot is taken in: the content of
// a chunk, one below the update. A string value there is the payload that
// changes from frame to frame (a chunk's text, however short), so the
// last one of a frame is where its snapshot is, even when a long string
// follows higher up: today's agents put a messageId, the same for every
// chunk of a message, after the content.
const snapDepth = envDepth + 1

// snapMin is the shortest string value above snapDepth a snapshot is taken
// at: shorter ones are not worth the copy.
const snapMin = 16

// scanState is all a scan knows at a point of a frame: plain values, so a
// snapshot is one copy.
type scanState struct {
	i, depth int
	stack    [snapDepth]byte // the open containers, for a snapshot
	// For depths 1..envDepth: the role of the open container, the member
	// being read in it and where its value starts.
	roles [envDepth + 1]role
	keys  [envDepth + 1]member
	start [envDepth + 1]int

	envState
}

// plain says the string value a snapshot is taken at is none of the
// envelope's members, so what follows it reads the same whatever it holds.
func (st *scanState) plain() bool {
	return st.depth > envDepth || st.keys[st.depth] == mNone
}

// envState is what a scan has read of the envelope. Spans are of member
// values; the zero Span is absent.
type envState struct {
	id, method, sessionID, update Span
	methodEsc, updateEsc          bool // the string held an escape
	isErr, hasMethod, isObject    bool
}

// shift moves what lies after offset at by d bytes: the spans of a frame
// whose string value at at is d bytes longer.
func (st *envState) shift(at, d int) {
	for _, sp := range [...]*Span{&st.id, &st.method, &st.sessionID, &st.update} {
		if sp.End > at {
			sp.End += d
			if sp.Start > at {
				sp.Start += d
			}
		}
	}
}

// before says every member span ends at or before offset at, so a
// shift there moves none.
func (st *envState) before(at int) bool {
	return st.id.End <= at && st.method.End <= at && st.sessionID.End <= at && st.update.End <= at
}

// envelope builds, in env, the Envelope of frame from the state at its
// end. A prefix (a cut frame) is taken to be an object.
func (st *envState) envelope(frame []byte, prefix bool, env *Envelope) {
	*env = Envelope{}
	if st.id.Present() {
		env.ID = frame[st.id.Start:st.id.End]
	}
	if st.hasMethod {
		env.Method = stringValue(frame[st.method.Start:st.method.End], st.methodEsc)
	}
	env.SessionID = st.sessionID
	if st.update.Present() {
		env.Update = stringValue(frame[st.update.Start:st.update.End], st.updateEsc)
	}
	env.Error = st.isErr
	switch {
	case st.hasMethod && env.ID != nil:
		env.Kind = KindRequest
	case st.hasMethod:
		env.Kind = KindNotification
	case env.ID != nil && (st.isObject || prefix):
		env.Kind = KindResponse
	}
}

// scanner validates a frame in one loop with an explicit stack, so nesting
// costs no call per value, and reads the envelope's members on the way.
type scanner struct {
	st     scanState
	err    error
	memEsc bool       // the last string value held an escape
	snap   *scanState // where to keep snapshots; nil for none
	// resumedAt is where a resumed scan began: the snapshot there is the
	// one it resumed from, so it is not taken again. 0 for none.
	resumedAt int
	// snapEnd is where the string value of the last snapshot (taken, or
	// resumed from) ends; 0 for none.
	snapEnd int
	// deep says a snapshot was taken at snapDepth: strings higher up that
	// follow take none.
	deep bool
}

func (s *scanner) fail(i int, msg string) {
	s.err = &SyntaxError{Offset: i, Msg: msg}
}

// wsTable marks JSON white space.
var wsTable = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// IsBatch says whether a valid frame is a JSON array: a JSON-RPC batch.
// ACP has none (the TypeScript SDK 2.4.0 answers one with a single -32600,
// and rust-sdk 5.0 removed them), so the relay passes none on
// (BatchMessage).
func IsBatch(frame []byte) bool {
	i := skipWS(frame, 0)
	return i < len(frame) && frame[i] == '['
}

// BatchMessage is the error message a JSON array gets, id null.
const BatchMessage = "Invalid request: ACP has no JSON-RPC batches; send each message on a line of its own"

// skipWS returns the index of the first byte at or after i that is not
// white space. Agents write compact JSON, so the first test almost always
// decides.
func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && wsTable[b[i]] {
		i++
	}
	return i
}

// run scans b into s, from the start or, with resume, from the state in
// s.st. The outer loop reads one value; the inner loop closes the
// containers that end after it.
func (s *scanner) run(b []byte, resume bool) {
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '[' for each open container
	st := &s.st
	depth := 0
	i := 0
	emptyArray := false // a resumed array ends where its first value was
	if resume {
		depth, i = st.depth, st.i
		stack = append(stack, st.stack[:depth]...)
		// The snapshot was before a string value; this frame may hold
		// white space there first, and, where that value was an array's
		// first, the array's end.
		first := stack[depth-1] == '[' && lastNonWS(b[:i]) == '['
		i = skipWS(b, i)
		emptyArray = first && i < len(b) && b[i] == ']'
	} else {
		i = skipWS(b, 0)
	}
	for {
		if emptyArray {
			emptyArray = false
			i++
			depth--
			stack = stack[:depth]
			goto after
		}
		// A value starts at b[i].
		if i >= len(b) {
			s.fail(i, "unexpected end of frame")
			return
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth >= maxDepth {
				s.fail(i, fmt.Sprintf("nesting deeper than %d", maxDepth))
				return
			}
			stack = append(stack, c)
			depth++
			if depth <= envDepth {
				r := roleNone
				if c == '{' {
					switch {
					case depth == 1:
						r = roleTop
						st.isObject = true
					case st.roles[depth-1] == roleTop && st.keys[depth-1] == mParams:
						r = roleParams
					case st.roles[depth-1] == roleParams && st.keys[depth-1] == mUpdate:
						r = roleUpdate
					}
				}
				st.roles[depth] = r
				st.keys[depth] = mNone
			}
			i = skipWS(b, i+1)
			if i >= len(b) {
				s.fail(i, "unexpected end of frame")
				return
			}
			if c == '{' {
				if b[i] == '}' {
					i++
					depth--
					stack = stack[:depth]
					goto after
				}
				if i = s.key(b, i, depth); s.err != nil {
					return
				}
				continue
			}
			if b[i] == ']' {
				i++
				depth--
				stack = stack[:depth]
				goto after
			}
			continue
		case '"':
			j, esc, msg := scanString(b, i+1)
			if msg != "" {
				s.fail(j, msg)
				return
			}
			if deep := depth == snapDepth; s.snap != nil && depth > 0 && (deep || depth < snapDepth && j-i >= snapMin && !s.deep) {
				s.deep = s.deep || deep
				if i != s.resumedAt {
					// The state here is the state before this value.
					st.i, st.depth = i, depth
					copy(st.stack[:], stack)
					*s.snap = *st
				}
				s.snapEnd = j
			}
			s.memEsc = esc
			i = j
		case 't':
			if len(b)-i < 4 || binary.LittleEndian.Uint32(b[i:]) != 't'|'r'<<8|'u'<<16|'e'<<24 {
				s.fail(i, "bad literal")
				return
			}
			i += 4
		case 'f':
			if len(b)-i < 5 || binary.LittleEndian.Uint32(b[i+1:]) != 'a'|'l'<<8|'s'<<16|'e'<<24 {
				s.fail(i, "bad literal")
				return
			}
			i += 5
		case 'n':
			if len(b)-i < 4 || binary.LittleEndian.Uint32(b[i:]) != 'n'|'u'<<8|'l'<<16|'l'<<24 {
				s.fail(i, "bad literal")
				return
			}
			i += 4
		default:
			if c != '-' && (c < '0' || c > '9') {
				s.fail(i, "unexpected character "+quoteByte(c))
				return
			}
			j, msg := scanNumber(b, i)
			if msg != "" {
				s.fail(j, msg)
				return
			}
			i = j
		}
	after:
		// A value ended at b[i]; close what ends after it.
		for {
			if depth == 0 {
				if i = skipWS(b, i); i != len(b) {
					s.fail(i, "data after the top-level value")
				}
				return
			}
			if depth <= envDepth && st.keys[depth] != mNone {
				s.record(depth, i)
			}
			i = skipWS(b, i)
			if i >= len(b) {
				s.fail(i, "unexpected end of frame")
				return
			}
			c := b[i]
			open := stack[depth-1]
			if c == ',' {
				i = skipWS(b, i+1)
				if open == '{' {
					if i = s.key(b, i, depth); s.err != nil {
						return
					}
				}
				break
			}
			if open == '{' && c == '}' || open == '[' && c == ']' {
				i++
				depth--
				stack = stack[:depth]
				continue
			}
			if open == '{' {
				s.fail(i, "expected ',' or '}' in an object")
			} else {
				s.fail(i, "expected ',' or ']' in an array")
			}
			return
		}
		i = skipWS(b, i)
	}
}

// lastNonWS is the last byte of b that is not white space, or 0.
func lastNonWS(b []byte) byte {
	for k := len(b) - 1; k >= 0; k-- {
		if !wsTable[b[k]] {
			return b[k]
		}
	}
	return 0
}

// key reads a member name at b[i] in the object at depth, and the ':' after
// it, and returns where the value starts. In a role object it notes which
// member this is.
func (s *scanner) key(b []byte, i, depth int) int {
	if i >= len(b) {
		s.fail(i, "unexpected end of frame")
		return i
	}
	if b[i] != '"' {
		s.fail(i, "expected a member name")
		return i
	}
	var r role
	if depth <= envDepth {
		r = s.st.roles[depth]
	}
	var j int
	if m, end := knownKey(b, i); r != roleNone && end > 0 {
		// The envelope's own names, spelt plainly, are most of the
		// names in a role object; a word compare is their whole scan.
		j = end
		s.st.keys[depth] = s.memberOf(r, m)
	} else {
		var esc bool
		var msg string
		if j, esc, msg = scanString(b, i+1); msg != "" {
			s.fail(j, msg)
			return j
		}
		if r != roleNone {
			name := b[i+1 : j-1]
			if esc {
				name = unescape(b[i:j])
			}
			s.st.keys[depth] = s.memberOf(r, memberNamed(name))
		}
	}
	j = skipWS(b, j)
	if j >= len(b) {
		s.fail(j, "unexpected end of frame")
		return j
	}
	if b[j] != ':' {
		s.fail(j, "expected ':' after a member name")
		return j
	}
	j = skipWS(b, j+1)
	if r != roleNone {
		s.st.start[depth] = j
	}
	return j
}

// knownKey recognizes, by whole words, a member name of the envelope (or
// "jsonrpc") at b[i], quotes included, and returns it and the index after
// its closing quote; end is 0 for any other name.
func knownKey(b []byte, i int) (m member, end int) {
	if i+16 > len(b) {
		return mNone, 0
	}
	w := binary.LittleEndian.Uint64(b[i:])
	switch w {
	case 0x22646f6874656d22: // "method"
		return mMethod, i + 8
	case 0x22736d6172617022: // "params"
		return mParams, i + 8
	case 0x2265746164707522: // "update"
		return mUpdate, i + 8
	case 0x6370726e6f736a22: // "jsonrpc
		if b[i+8] == '"' {
			return mNone, i + 9
		}
	case 0x6e6f697373657322: // "session
		switch {
		case binary.LittleEndian.Uint64(b[i+3:]) == 0x2264496e6f697373: // ssionId"
			return mSessionID, i + 11
		case binary.LittleEndian.Uint64(b[i+7:]) == 0x226574616470556e: // nUpdate"
			return mSessionUpdate, i + 15
		}
	}
	switch {
	case w&0xffffffff == 0x22646922: // "id"
		return mID, i + 4
	case w&0xffffffffffffff == 0x22726f72726522: // "error"
		return mError, i + 7
	}
	return mNone, 0
}

// memberNamed is the member an unquoted, unescaped name stands for.
func memberNamed(name []byte) member {
	switch string(name) {
	case "id":
		return mID
	case "method":
		return mMethod
	case "error":
		return mError
	case "params":
		return mParams
	case "sessionId":
		return mSessionID
	case "update":
		return mUpdate
	case "sessionUpdate":
		return mSessionUpdate
	}
	return mNone
}

// memberOf is what member m is in an object of role r: mNone where the
// envelope does not read it. A repeated params or update replaces the
// earlier one, as in encoding/json, so what the earlier one said is
// forgotten as soon as the later one begins.
func (s *scanner) memberOf(r role, m member) member {
	switch {
	case r == roleTop && (m == mID || m == mMethod || m == mError):
		return m
	case r == roleTop && m == mParams:
		s.st.sessionID, s.st.update = Span{}, Span{}
		return m
	case r == roleParams && m == mSessionID:
		return m
	case r == roleParams && m == mUpdate:
		s.st.update = Span{}
		return m
	case r == roleUpdate && m == mSessionUpdate:
		return m
	}
	return mNone
}

// record notes a member the envelope needs, whose value ends at end. Later
// duplicates win, as they do in encoding/json, so the two never disagree on
// what a frame says.
func (s *scanner) record(depth, end int) {
	st := &s.st
	v := Span{st.start[depth], end}
	switch st.keys[depth] {
	case mID:
		st.id = v
	case mMethod:
		st.hasMethod = true
		st.method, st.methodEsc = v, s.memEsc
	case mError:
		st.isErr = true
	case mSessionID:
		st.sessionID = v
	case mSessionUpdate:
		st.update, st.updateEsc = v, s.memEsc
	}
}

// stringValue returns the contents of a JSON string token, unescaped, or an
// empty non-nil slice for any other token (a method that is not a string is
// still a method member).
func stringValue(tok []byte, escaped bool) []byte {
	if len(tok) < 2 || tok[0] != '"' {
		return []byte{}
	}
	if escaped {
		return unescape(tok)
	}
	return tok[1 : len(tok)-1]
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("0x%02x", c)
}

func unescape(tok []byte) []byte {
	var out string
	if err := json.Unmarshal(tok, &out); err != nil {
		return []byte{}
	}
	return []byte(out)
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// special8 marks, with its high bit, each of 8 bytes a string scan must stop
// for: non-ASCII, below 0x20, '"' or '\\' (the last two by the classic SWAR
// zero-byte test on x xor the byte). Only the lowest mark is exact (a
// borrow can mark bytes above a marked one), which is all a string scan
// needs: it jumps to the first and handles it there.
func special8(x uint64) uint64 {
	q := x ^ (lo8 * '"')
	e := x ^ (lo8 * '\\')
	return (x | (x-0x2020202020202020)&^x | (q-lo8)&^q | (e-lo8)&^e) & hi8
}

// scanString scans a string token whose opening quote is at i-1. It returns
// the index after the closing quote and whether the string held an escape,
// or, with a message, where it is invalid.
func scanString(b []byte, i int) (end int, escaped bool, msg string) {
	for {
		// Short keys and values end within a word, checked here without a
		// call; longer text is left to stopIndex.
		if i+8 <= len(b) {
			if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			i += 8
		}
		i += stopIndex(b[i:])
		if i >= len(b) {
			return i, escaped, "unterminated string"
		}
	special:
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, ""
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, "unterminated escape"
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return i, escaped, "bad \\u escape"
				}
				i += 6
			default:
				return i, escaped, "bad escape"
			}
		case c < 0x20:
			return i, escaped, "control character in a string"
		default:
			n := utf8Len(b[i:])
			if n == 0 {
				return i, escaped, "invalid UTF-8"
			}
			i += n
		}
	}
}

// stringStop marks the bytes a string scan stops at.
var stringStop = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80
	}
	return t
}()

// utf8Len is the length of the valid UTF-8 sequence at the start of p, which
// begins with a non-ASCII byte, or 0 if it is invalid.
func utf8Len(p []byte) int {
	c := p[0]
	switch {
	case c >= 0xC2 && c <= 0xDF:
		if len(p) >= 2 && p[1]&0xC0 == 0x80 {
			return 2
		}
		return 0
	case c >= 0xE0 && c <= 0xEF:
		if len(p) < 3 || p[1]&0xC0 != 0x80 || p[2]&0xC0 != 0x80 {
			return 0
		}
		if c == 0xE0 && p[1] < 0xA0 || c == 0xED && p[1] > 0x9F { // overlong; surrogate
			return 0
		}
		return 3
	}
	r, size := utf8.DecodeRune(p)
	if r == utf8.RuneError && size <= 1 {
		return 0
	}
	return size
}

func isHex4(b []byte) bool {
	return hexDigit[b[0]] && hexDigit[b[1]] && hexDigit[b[2]] && hexDigit[b[3]]
}

var hexDigit = func() (t [256]bool) {
	for c := range 256 {
		t[c] = '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
	}
	return t
}()

func isDigit(c byte) bool { return c-'0' <= 9 }

// scanNumber scans a number starting at b[i] ('-' or a digit) and returns the
// index after it, or, with a message, where it is invalid.
func scanNumber(b []byte, i int) (int, string) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, "bad number"
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, "bad fraction"
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i]|0x20) == 'e' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, "bad exponent"
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, ""
}

// TailID finds the id of a frame cut short whose id is its last member, as
// in {"method":…,"params":{…},"id":5}: the line ends with "id", a colon, the
// id token and the closing brace of the frame itself. Nothing else can end
// that way, because a nested object would close with a second brace and a
// quote inside a string is escaped. nil when the tail does not end so.
func TailID(tail []byte) []byte {
	t := bytes.TrimRight(tail, " \t\r\n")
	if len(t) == 0 || t[len(t)-1] != '}' {
		return nil
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t\r\n")
	if len(t) == 0 {
		return nil
	}
	end := len(t)
	start := end
	if t[end-1] == '"' {
		for i := end - 2; i >= 0; i-- {
			if t[i] != '"' {
				continue
			}
			n := 0
			for j := i - 1; j >= 0 && t[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				start = i
				break
			}
		}
	} else {
		for start > 0 && bytes.IndexByte([]byte("0123456789-+.eEnul"), t[start-1]) >= 0 {
			start--
		}
	}
	if start == end {
		return nil
	}
	tok := t[start:end]
	if _, err := Scan(tok); err != nil {
		return nil
	}
	before := bytes.TrimRight(t[:start], " \t\r\n")
	if len(before) == 0 || before[len(before)-1] != ':' {
		return nil
	}
	before = bytes.TrimRight(before[:len(before)-1], " \t\r\n")
	if !bytes.HasSuffix(before, []byte(`"id"`)) {
		return nil
	}
	before = bytes.TrimRight(before[:len(before)-4], " \t\r\n")
	if len(before) == 0 || (before[len(before)-1] != ',' && before[len(before)-1] != '{') {
		return nil
	}
	return append([]byte(nil), tok...)
}

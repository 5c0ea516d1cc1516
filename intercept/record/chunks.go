package record

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Message chunks are by far the commonest frames, thousands in one turn,
// and the record needs only their text (DESIGN.md "Speed"). So a chunk is
// not queued to the recorder: its text is picked out on the relay's
// goroutine and appended to its session's answer buffer, which the
// recorder takes when the turn ends. No per-chunk event, channel send or
// decode of the whole frame.

// Text gathers the running turns' text from their message chunks, on the
// relay's goroutine, for the record to take when each turn ends. The
// Recorder makes one (New) and hands it out (Recorder.Text).
type Text struct {
	led  *ledger.Ledger
	life *life.Life
	// budget is how much of one answer the record keeps
	// (answerBudget).
	budget int
	// notice hands a notice's chunk to the record's goroutine, and
	// background a chunk the agent sent between a session's turns.
	notice, background func(f *proxy.Frame)

	mu      sync.Mutex
	answers answers    // native session id -> the running turn's text so far
	kids    children   // subagent sessions (subagents.go)
	discard *answerBuf // full from the start: where a child's chunks go
	cache   chunkCache // the agent pump's own; see collect
}

// newText is a Text for the record's turns.
func newText(led *ledger.Ledger, lf *life.Life, budget int, notice, background func(f *proxy.Frame)) *Text {
	t := &Text{led: led, life: lf, budget: budget, notice: notice, background: background, answers: answers{}, kids: children{}, discard: &answerBuf{}}
	t.discard.full.Store(true)
	return t
}

// Message is a v2 agent_message of a running turn: a whole-message upsert
// of the answer. Its content, when it has one, is the message's text from
// now on (null clears it, an omitted content leaves it); chunks of the
// same message that follow append to it, as the schema has it. The last
// message upserted is the one replaced: an agent that upserts an earlier
// message after chunks of a later one is not seen to do so by either
// current agent, which upsert only in replays, with content [].
func (t *Text) Message(f *proxy.Frame) {
	var n struct {
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				MessageID string          `json:"messageId"`
				Content   json.RawMessage `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(f.Raw, &n) != nil || n.Params.Update.Content == nil {
		return // no content: the message's text stays as it was
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(n.Params.Update.Content, &blocks) // null or unreadable: no text
	var text strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	sid := n.Params.SessionID
	t.mu.Lock()
	buf := t.answers[sid]
	switch {
	case t.kids[sid] != "":
		t.mu.Unlock()
		return // a subagent's message is not the parent's answer
	case buf == nil:
		buf = &answerBuf{}
		t.answers[sid] = buf
	}
	t.mu.Unlock()
	buf.mu.Lock()
	defer buf.mu.Unlock()
	if buf.whole != n.Params.Update.MessageID || buf.wholeAt > buf.b.Len() {
		buf.whole, buf.wholeAt = n.Params.Update.MessageID, buf.b.Len()
	}
	kept := buf.b.String()[:buf.wholeAt]
	buf.b.Reset()
	buf.b.WriteString(kept)
	buf.full.Store(false)
	if room := t.budget - buf.b.Len(); room > text.Len() {
		buf.b.WriteString(text.String())
	} else if room > 0 {
		buf.b.WriteString(text.String()[:room])
		buf.b.WriteString(cutMark)
		buf.full.Store(true)
	}
}

// TakeChunk is Claims and then Intercept for a chunk, in one call (the
// chain's ChunkPolicy.Take): a message chunk is collected for the running
// turn, or handed on as the background work of the turn before (collect),
// and nothing else is claimed.
func (t *Text) TakeChunk(f *proxy.Frame) {
	if (t.led.Running() || t.led.Opened()) && wire.IsMessageChunk(f.Env.Update) {
		t.collect(f)
	}
}

// adopt notes child as a subagent session of parent, the first time it is
// named: its messages are not the parent's answer.
func (t *Text) adopt(child, parent string) {
	t.mu.Lock()
	if _, known := t.kids[child]; !known {
		t.kids[child] = parent
	}
	t.mu.Unlock()
}

// parentOf is the session whose subagent sid is, "" for none.
func (t *Text) parentOf(sid string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kids[sid]
}

// answers collects the agent's text per native session while turns run.
// The map is guarded by the Text's mu.
type answers map[string]*answerBuf

var (
	textKey    = []byte(`"text":"`)
	typeText   = []byte(`"type":"text"`)
	contentKey = []byte(`"content":`)
)

// chunkText finds the text of an agent_message_chunk. The fast path reads
// it straight from the bytes when the frame names "text" once, after
// "content", with a text type: the result then aliases the frame and is
// valid only while it is. Anything else is decoded properly.
func chunkText(f *proxy.Frame) ([]byte, bool) {
	raw := f.Raw
	if c := bytes.Index(raw, contentKey); c >= 0 {
		if i := bytes.Index(raw[c:], textKey); i >= 0 {
			start := c + i + len(textKey)
			if !bytes.Contains(raw[start:], textKey) && bytes.Contains(raw[c:], typeText) {
				if s, ok := stringAt(raw, start); ok {
					return s, true
				}
			}
		}
	}
	var n struct {
		Params struct {
			Update struct {
				Content struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil || n.Params.Update.Content.Type != "text" {
		return nil, false
	}
	return []byte(n.Params.Update.Content.Text), true
}

// stringAt reads the JSON string whose contents start at raw[start] (just
// after its opening quote). The frame has been validated, so the closing
// quote is the first one not escaped.
func stringAt(raw []byte, start int) ([]byte, bool) {
	// Most text holds no escape: its first quote closes it, and two
	// IndexByte calls find that faster than a loop over the bytes.
	if q := bytes.IndexByte(raw[start:], '"'); q >= 0 && bytes.IndexByte(raw[start:start+q], '\\') < 0 {
		return raw[start : start+q], true
	}
	escaped := false
	for i := start; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			escaped = true
			i++ // skip the escaped byte
		case '"':
			if !escaped {
				return raw[start:i], true
			}
			var s string
			if json.Unmarshal(raw[start-1:i+1], &s) != nil {
				return nil, false
			}
			return []byte(s), true
		}
	}
	return nil, false
}

// answerBuf is one running turn's text so far. The relay goroutine writes
// it, the recorder takes it when the turn ends.
type answerBuf struct {
	mu sync.Mutex
	b  strings.Builder
	// msgID is the messageId of the last chunk that had one, kept only for
	// an agent that forks at a message or speaks v2 (life.KeepsMessageIDs).
	msgID string
	// whole is the messageId of the last whole message (a v2
	// agent_message) and wholeAt where its text begins in b: an upsert of
	// the same message replaces its text from there.
	whole   string
	wholeAt int
	full    atomic.Bool // as much as the record keeps: later chunks cost a load
	taken   atomic.Bool // the recorder took it; a new turn gets a new one
}

// chunkCache is the agent pump's shortcut to the buffer of the session it
// last saw a chunk for: a turn's chunks come in long runs of one session.
// Only the agent pump's goroutine touches it.
type chunkCache struct {
	sid []byte // the raw sessionId token
	buf *answerBuf
}

// collect appends a chunk's text to its session's answer, up to what the
// record keeps of one (answerBudget): a turn that streams megabytes is
// relayed whole, but neither the record nor the sidecar's memory grows with
// it. A chunk past that costs a comparison and an atomic load.
//
// The text that reaches the budget is cut there, as putTurn's clip cuts an
// answer, so the buffer holds the answer as it is stored: the turn's end,
// which its response waits for, copies none of it (clipped), and no chunk,
// however long, makes the buffer larger than the budget and cutMark.
//
// A chunk that is a notice (notices.go) is not the answer's: it goes to the
// record's goroutine, which keeps it among the turn's notices. Telling it
// costs every other chunk a look at its last five bytes (mayBeNotice).
func (t *Text) collect(f *proxy.Frame) {
	sp := f.Env.SessionID
	if !sp.Present() {
		return
	}
	if mayBeNotice(f.Raw) && noticeChunk(f.Raw) || t.life.WarnsInText() && warningChunk(f) {
		t.notice(f)
		return
	}
	tok := f.Raw[sp.Start:sp.End]
	c := &t.cache
	if c.buf == nil || c.buf.taken.Load() || !bytes.Equal(c.sid, tok) {
		sid := wire.SessionIDOf(f)
		t.mu.Lock()
		buf := t.answers[sid]
		kid := t.kids[sid] != ""
		t.mu.Unlock()
		switch {
		case kid:
			buf = t.discard // a subagent's message is not the parent's answer
		case buf == nil:
			// The session's first chunk since its last turn's text was
			// taken: a turn's, or what it sends between turns.
			switch t.led.TurnStateOf(sid, speaksV2(t.life)) {
			case ledger.Opening:
				return // a load's replay: the history, not a turn's
			case ledger.Unknown:
				return // no session here to give it to
			case ledger.Between:
				t.background(f) // the turn before's background work (turns.go)
				return
			}
			t.mu.Lock()
			if buf = t.answers[sid]; buf == nil {
				buf = &answerBuf{}
				t.answers[sid] = buf
			}
			t.mu.Unlock()
		}
		c.sid, c.buf = append(c.sid[:0], tok...), buf
	}
	buf := c.buf
	if t.life.KeepsMessageIDs() {
		buf.noteMessage(f.Raw)
	}
	if buf.full.Load() {
		return
	}
	text, ok := chunkText(f)
	if !ok || len(text) == 0 {
		return
	}
	limit := t.budget
	buf.mu.Lock()
	if room := limit - buf.b.Len(); room > len(text) {
		buf.b.Write(text)
	} else if room > 0 {
		buf.b.Write(text[:room])
		if len(text) > room {
			buf.b.WriteString(cutMark)
		}
		buf.full.Store(true)
	}
	buf.mu.Unlock()
}

// cutMark is what clip puts after the part of a text it keeps.
const cutMark = " …[cut]"

// clipped is clip(s, n), without a copy when s is what clip gives already,
// as an answer collect cut is: then s[:n]+cutMark is s itself.
func clipped(s string, n int) string {
	if len(s) == n+len(cutMark) && strings.HasSuffix(s, cutMark) {
		return s
	}
	return clip(s, n)
}

var messageIDKey = []byte(`"messageId":"`)

// noteMessage keeps the messageId of a chunk, when it has one and it is not
// the one kept: a message streams as many chunks of one id. The key cannot
// occur inside a string of the frame, where its quotes would be escaped.
func (buf *answerBuf) noteMessage(raw []byte) {
	i := bytes.Index(raw, messageIDKey)
	if i < 0 {
		return
	}
	id, ok := stringAt(raw, i+len(messageIDKey))
	if !ok || len(id) == 0 {
		return
	}
	buf.mu.Lock()
	if buf.msgID != string(id) {
		buf.msgID = string(id)
	}
	buf.mu.Unlock()
}

// TakeTurnText hands over and forgets what was collected for a native
// session: the answer, and the messageId of its last message. The record
// takes it on the relay's goroutine as a turn's end goes by: an agent that
// queues prompts streams the next turn's chunks right behind the end, and
// the record's goroutine, which ends the turn later, would take them for
// this turn's.
func (t *Text) TakeTurnText(native string) TurnText {
	t.mu.Lock()
	buf := t.answers[native]
	t.mu.Unlock()
	var msgID string
	if buf != nil {
		buf.mu.Lock()
		msgID = buf.msgID
		buf.mu.Unlock()
	}
	return TurnText{Answer: t.TakeAnswer(native), MessageID: msgID}
}

// TakeAnswer hands over and forgets what was collected for a native session.
func (t *Text) TakeAnswer(native string) string {
	t.mu.Lock()
	buf := t.answers[native]
	delete(t.answers, native)
	t.mu.Unlock()
	if buf == nil {
		return ""
	}
	buf.taken.Store(true)
	buf.mu.Lock()
	defer buf.mu.Unlock()
	return buf.b.String()
}

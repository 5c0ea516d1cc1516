package record

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
)

// Notices are advisories the agent shows the user during a turn: ACP's
// `notice` update (severity, title, description; live only, never
// replayed), and, for a client that has no notices, the same advisory as
// a message chunk. claude-agent-acp 0.101.0 writes that chunk as
//
//	{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"**Warning:** …"},
//	 "_meta":{"claudeCode":{"kind":"informational","level":"warning"}}}
//
// with no messageId (and kind "mcpServerStatus" for a client MCP server
// that failed to start). They are the turn's notices (state.Turn.Notices),
// not its answer: the agent did not say them in the conversation, so no
// handoff carries them, and glued to the answer they ran into its text.

// Update kinds of the record's events for notices. updNoticeChunk is the
// record's own name for a message chunk collect found to be a notice
// (chunks.go); no agent sends it.
const (
	updNotice      = "notice"
	updNoticeChunk = "agent_message_chunk (notice)"
)

// The bounds of what a turn keeps of its notices: an agent that repeats an
// advisory in a loop must not grow the record without end.
const (
	maxNotices  = 32
	noticeBytes = 2 << 10
)

// mayBeNotice is collect's byte check for a notice's chunk, made for every
// chunk on the relay's goroutine, so it looks at five bytes: a chunk whose
// update ends in an object two deep (claude's `_meta.claudeCode`) ends in
// five closing braces, where a chunk of text ends in four (`"text":"…"}}}}`)
// and one with a messageId in three. Of those, it lets through the ones
// with a "kind" member near the end, where claude writes it: not claude's
// subagent messages, whose _meta.claudeCode holds a parentToolUseId, nor
// text with annotations. What it lets through costs one decode
// (noticeChunk). A _meta written ahead of the content is not looked for:
// no agent sends notices so.
func mayBeNotice(raw []byte) bool {
	if n := len(raw); n > 0 && raw[n-1] != '}' {
		raw = bytes.TrimRight(raw, " \t\r")
	}
	n := len(raw)
	return n > 5 && string(raw[n-5:]) == "}}}}}" && bytes.Contains(raw[max(0, n-noticeTail):], kindKey)
}

// kindKey is the member that names what claude's notice chunk is; a text
// cannot hold it, since a quote in a JSON string is escaped. noticeTail is
// how near the frame's end it is looked for: claude's _meta with a long
// MCP server name fits.
var kindKey = []byte(`"kind":"`)

const noticeTail = 256

// noticeChunk reports whether a chunk mayBeNotice let through is a notice:
// its update's _meta.claudeCode.kind is one claude-agent-acp gives the
// transcript form of its notices.
func noticeChunk(raw []byte) bool {
	var n struct {
		Params struct {
			Update struct {
				Meta struct {
					ClaudeCode struct {
						Kind string `json:"kind"`
					} `json:"claudeCode"`
				} `json:"_meta"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil {
		return false // a _meta of another shape: no notice of claude's
	}
	switch n.Params.Update.Meta.ClaudeCode.Kind {
	case "informational", "mcpServerStatus":
		return true
	}
	return false
}

// warningPrefixes start the text of a warning an agent that WarnsInText
// (life.Habits) sends as a message chunk: codex-acp 2.6.0 writes its
// warnings as "Warning: …" and its config warnings as "Config warning: …".
var warningPrefixes = [][]byte{[]byte("Warning: "), []byte("Config warning: ")}

// warningChunk reports whether chunk f of an agent that WarnsInText is a
// warning: text that starts as one, in a chunk with no messageId (the
// agent's own messages always have one). It costs the agent's other
// chunks the look at their text's first bytes that chunkText finds.
func warningChunk(f *proxy.Frame) bool {
	text, ok := chunkText(f)
	if !ok {
		return false
	}
	for _, p := range warningPrefixes {
		if bytes.HasPrefix(text, p) {
			return !bytes.Contains(f.Raw, messageIDKey)
		}
	}
	return false
}

// noticeEvent is the record's event for a notice's chunk f: the record's
// goroutine adds it to the running turn's notices in relay order (before
// the turn's end, which comes after it).
func noticeEvent(f *proxy.Frame) Event {
	return Event{Dir: f.Dir, Method: string(f.Env.Method), Update: updNoticeChunk, Raw: append([]byte(nil), f.Raw...)}
}

// notice adds a notice update, or a notice's chunk, to the running turn of
// s. A notice outside a turn belongs to none and is not kept.
func notice(log *slog.Logger, s *Session, ev Event) {
	if s.Turn == nil || len(s.Turn.Notices) >= maxNotices {
		return
	}
	var n struct {
		Params struct {
			Update struct {
				Severity    string  `json:"severity"`
				Title       string  `json:"title"`
				Description *string `json:"description"`
				Content     struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	decoded(log, ev.Update, ev.Raw, &n) // what could be read is kept
	u := n.Params.Update
	var text string
	if ev.Update == updNoticeChunk {
		if u.Content.Type != "text" {
			return
		}
		text = u.Content.Text
	} else {
		text = noticeText(u.Severity, u.Title, u.Description)
	}
	if text = strings.TrimSpace(text); text != "" {
		s.Turn.Notices = append(s.Turn.Notices, clip(text, noticeBytes))
	}
}

// noticeText is one notice update as a line: its title, its description
// after a colon, and its severity ahead of both unless it is only info.
func noticeText(severity, title string, description *string) string {
	text := strings.TrimSpace(title)
	if description != nil && strings.TrimSpace(*description) != "" {
		text += ": " + strings.TrimSpace(*description)
	}
	if severity != "" && severity != "info" {
		text = severity + ": " + text
	}
	return text
}

// updSessionInfo patches the session's metadata; the record keeps its
// title.
const updSessionInfo = "session_info_update"

// sessionInfo applies a session_info_update's title to the record. The
// title is a patch (schema SessionInfoUpdate): a string replaces it, null
// clears it, and an update without one leaves it. An empty string leaves it
// too: the latest title that says something wins. A title the agent made
// from the handoff that led a fresh native session's first prompt is the
// handoff's, not the session's (intercept's commands.title keeps it from the
// client too). It says whether the title changed.
func sessionInfo(log *slog.Logger, s *Session, raw []byte) (changed bool) {
	var n struct {
		Params struct {
			Update struct {
				Title json.RawMessage `json:"title"`
			} `json:"update"`
		} `json:"params"`
	}
	decoded(log, updSessionInfo, raw, &n) // an unreadable title leaves the record's
	t := n.Params.Update.Title
	var title string
	switch {
	case len(t) == 0:
		return false
	case wire.IsNull(t):
	case json.Unmarshal(t, &title) != nil:
		return false // not a string: nothing the record can show
	case strings.TrimSpace(title) == "", strings.HasPrefix(strings.TrimSpace(title), strings.TrimSpace(replay.HandoffTag)):
		return false
	}
	if title == s.Rec.Title {
		return false
	}
	s.Rec.Title = title
	return true
}

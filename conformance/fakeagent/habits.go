package fakeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The wire habits of claude-agent-acp 0.101.0 and codex-acp 2.6.0 that
// older agents lack (see ../../../shared/acp/agents.md, "The packages
// editors install today"), each behind its own switch so that a profile
// without them writes exactly the bytes it always wrote:
//
//	-message-ids   agent_message_chunk carries messageId (MessageID)
//	-info-updates  session_info_update and usage_update end every turn
//	-auth-notice   _auth/status_update follows the initialize response (AuthStatusLine)
//	-strict-init   a request before initialize is refused (strictinit.go)

// MessageID is the messageId of the agent's message in turn (1-based) of
// session sid under -message-ids: every agent_message_chunk of that turn
// carries it, so a client sees one message per turn, a new one each turn,
// and a load replays a turn's message with the id it had. It is UUID-shaped
// (version 8, the RFC 9562 custom layout: the bytes are a sha256 of sid and
// turn), because the ACP message-id RFD asks for UUIDs; it reads no clock
// and no randomness, so a restarted agent that hands out the same session
// id again without -state repeats the ids of its earlier life.
func MessageID(sid string, turn int) string {
	return uuidFrom("fake-agent message " + sid + "/" + strconv.Itoa(turn))
}

// UserMessageID is the messageId of the user's message in turn (1-based)
// of session sid when the agent speaks ACP v2 (-v2): the prompt's
// user_message and its response carry it, and a resume with replayFrom
// start replays the turn's prompt under it. Like MessageID it reads no
// clock and no randomness.
func UserMessageID(sid string, turn int) string {
	return uuidFrom("fake-agent user message " + sid + "/" + strconv.Itoa(turn))
}

// uuidFrom is a UUID-shaped id made from seed: version 8, the RFC 9562
// custom layout, whose bytes are seed's sha256.
func uuidFrom(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// agentText is the agent_message_chunk for text in turn of sid, with its
// messageId under -message-ids, and always in ACP v2, whose chunks must
// carry one. A load replays a turn's answer with it too, so the replayed
// chunk is the one the turn wrote.
func (t *turnRunner) agentText(sid string, turn int, text string) acp.SessionUpdate {
	u := acp.UpdateAgentMessageText(text)
	if t.cfg.MessageIDs || t.v2.active() {
		u.AgentMessageChunk.MessageId = acp.Ptr(MessageID(sid, turn))
	}
	return u
}

// fakeEpoch is the first updatedAt the agent reports; turn n of a session
// is n minutes later. Nothing reads the clock.
var fakeEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// updatedAt is the session_info_update and session/list updatedAt of a
// session with turns prompts in its history.
func updatedAt(turns int) string {
	return fakeEpoch.Add(time.Duration(turns) * time.Minute).Format(time.RFC3339)
}

// ResumeNote is the message -resume-notes sends before a resume's result:
// codex-acp 2.6.0 says "This session was recorded with model X but is
// resuming with Y" there.
func ResumeNote(model string) string {
	return "fake-agent: this session was recorded with model " + model + " but resumes on the default model\n"
}

// sessionTitle is a session's title: the first 40 bytes of its first
// prompt's first text block, trimmed, or nil before the first prompt. Real
// agents title a session from the prompt as sent, so a handoff that leads
// a fresh session's first prompt becomes its title (claude-agent-acp
// 0.101.0, codex-acp 2.6.0). A prompt "rename TITLE" renames the session
// from its turn on, as an agent asked to rename it does.
func sessionTitle(history []turn) *string {
	if len(history) == 0 {
		return nil
	}
	for i := len(history) - 1; i >= 0; i-- {
		if name, ok := strings.CutPrefix(strings.TrimSpace(lastText(history[i].user)), "rename "); ok {
			return &name
		}
	}
	var first string
	if texts := allTexts(history[0].user); len(texts) > 0 {
		first = texts[0]
	}
	t := strings.TrimSpace(first)
	if len(t) > 40 {
		t = t[:40]
	}
	return &t
}

// Usage figures of usage_update after turn n: the context grows by
// usagePerTurn tokens a turn and the cumulative cost by costPerTurn USD (a
// power of two, so the amounts print exactly).
const (
	usageSize    = 200000
	usagePerTurn = 1000
	costPerTurn  = 0.25
)

// infoUpdates are the updates -info-updates sends at the end of a turn
// that ends with end_turn, before its response: session_info_update (title,
// updatedAt) and usage_update (used, size, cost), as claude-agent-acp and
// codex-acp do after every prompt.
func infoUpdates(title *string, turns int) []acp.SessionUpdate {
	return []acp.SessionUpdate{
		{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{SessionUpdate: "session_info_update",
			Title: title, UpdatedAt: acp.Ptr(updatedAt(turns))}},
		{UsageUpdate: &acp.SessionUsageUpdate{SessionUpdate: "usage_update",
			Used: usagePerTurn * turns, Size: usageSize,
			Cost: &acp.Cost{Amount: costPerTurn * float64(turns), Currency: "USD"}}},
	}
}

// AuthStatusLine is the exact line -auth-notice writes right after the
// initialize response, under the same write lock so nothing comes between:
// an extension notification with no session id, as the agents that report
// their login state send one. It includes the trailing newline.
func AuthStatusLine() []byte {
	return []byte(`{"jsonrpc":"2.0","method":"_auth/status_update","params":{"status":"authenticated"}}` + "\n")
}

// forkPoint reads the message a session/fork is asked to fork at from its
// _meta, as the SDK decoded it (-fork-at-message), the way claude-agent-acp
// 0.101.0 (dist/fork-session.js) and codex-acp 2.6.0 read it:
// `_meta.jetbrains.air.fork` {version 1, messageId}. The fork keeps the
// parent's turns up to the one whose answer carried that messageId.
func forkPoint(meta map[string]any) (string, bool) {
	raw, err := json.Marshal(meta)
	if err != nil {
		return "", false
	}
	var m struct {
		JetBrains struct {
			Air struct {
				Fork *struct {
					Version   int    `json:"version"`
					MessageID string `json:"messageId"`
				} `json:"fork"`
			} `json:"air"`
		} `json:"jetbrains"`
	}
	if json.Unmarshal(raw, &m) != nil || m.JetBrains.Air.Fork == nil || m.JetBrains.Air.Fork.Version != 1 {
		return "", false
	}
	id := strings.TrimSpace(m.JetBrains.Air.Fork.MessageID)
	return id, id != ""
}

// segmentOf is the ":segment:N" suffix older JetBrains AIR builds put on a
// message id, which the agents strip; "" when there is none.
func segmentOf(id string) string {
	i := strings.LastIndex(id, ":segment:")
	if i < 0 {
		return ""
	}
	if _, err := strconv.Atoi(id[i+len(":segment:"):]); err != nil {
		return ""
	}
	return id[i:]
}

package fakeagent

import (
	"flag"
	"strconv"
	"strings"
)

// Advisories and compactions: what today's agents send inside a turn that
// is not the conversation (../../../shared/acp/agents.md; the ACP schema's
// Notice, CompactionUpdate and CompactionSummaryChunk). acp-go-sdk v0.13.0
// has none of these updates, so they are written raw.
//
//	-notices     a prompt whose last text block contains NoticeTrigger
//	             gets, ahead of its reply line, a `notice` update (severity
//	             warning, NoticeTitle, NoticeDescription) and
//	             InformationalText as claude-agent-acp 0.101.0 writes a
//	             notice for a client without notices: an
//	             agent_message_chunk with _meta.claudeCode.kind
//	             "informational" and no messageId
//	-warns-in-text  with -notices, the same prompt also gets WarningText as
//	             codex-acp 2.6.0 writes a warning for a client without
//	             notices: an agent_message_chunk of plain text, "Warning:
//	             …", with no messageId (life.Habits.WarnsInText; the
//	             sidecar reads it so only from an agent that names itself
//	             codex-acp, -agent-name)
//	-compaction  a prompt whose last text block contains CompactTrigger
//	             gets, ahead of its reply line and after any notices, the
//	             compaction of its session: compaction_update in_progress,
//	             CompactionSummary in two compaction_summary_chunk updates,
//	             compaction_update completed, all with compactionId
//	             CompactionID(turn)
//
// Both are sent whatever the client's initialize advertised (a v1 agent
// sends compaction updates only to a client with
// clientCapabilities.session.compaction): the fake is there to test what
// the sidecar does with them. Neither changes the reply line or the text a
// turn's history keeps.

// advisoryFlags are the switches of this file.
type advisoryFlags struct {
	Notices     bool
	WarnsInText bool
	Compaction  bool
}

// bind adds the switches to fs, with their current values as defaults
// (newFlagSet parses twice).
func (f *advisoryFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.Notices, "notices", f.Notices, "a prompt containing \""+NoticeTrigger+"\" gets a notice update and a claude-style informational agent_message_chunk before its reply")
	fs.BoolVar(&f.WarnsInText, "warns-in-text", f.WarnsInText, "with -notices, a prompt containing \""+NoticeTrigger+"\" also gets a codex-style \"Warning: …\" agent_message_chunk with no messageId")
	fs.BoolVar(&f.Compaction, "compaction", f.Compaction, "a prompt containing \""+CompactTrigger+"\" gets compaction_update and compaction_summary_chunk updates before its reply")
}

// The triggers, and the texts they make the agent send. Every notice text
// holds NoticeMark, so a test can tell that none reached an answer or a
// handoff.
const (
	NoticeTrigger     = "+notice"
	CompactTrigger    = "+compact"
	NoticeMark        = "NOTICE-"
	NoticeTitle       = "fake-agent NOTICE-TITLE"
	NoticeDescription = "fake-agent NOTICE-DESCRIPTION"
	InformationalText = "**Warning:** fake-agent NOTICE-CHUNK from a hook\n"
	WarningText       = "Warning: fake-agent NOTICE-WARNING in the text\n\n"
)

// CompactionID is the compactionId of the compaction in turn n.
func CompactionID(n int) string { return "fake-cmp-" + strconv.Itoa(n) }

// CompactionSummary is the summary of the compaction in turn n of session
// sid: it names the turns before it, the ones it stands for.
func CompactionSummary(sid string, n int) string {
	return "fake-agent SUMMARY of " + sid + ": the " + strconv.Itoa(n-1) + " turns before turn " + strconv.Itoa(n) + " were compacted."
}

// advisories writes what the triggers in the prompt's last text block ask
// for, in the turn n of session sid.
func (t *turnRunner) advisories(sid, last string, n int) {
	if t.cfg.Notices && strings.Contains(last, NoticeTrigger) {
		t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"notice","severity":"warning","title":`+jsonString(NoticeTitle)+`,"description":`+jsonString(NoticeDescription)+`}`))
		t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":`+jsonString(InformationalText)+
			`},"_meta":{"claudeCode":{"kind":"informational","level":"warning"}}}`))
		if t.cfg.WarnsInText {
			t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":`+jsonString(WarningText)+`}}`))
		}
	}
	if t.cfg.Compaction && strings.Contains(last, CompactTrigger) {
		id := jsonString(CompactionID(n))
		first, second := splitHalf(CompactionSummary(sid, n))
		t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"compaction_update","compactionId":`+id+`,"status":"in_progress"}`))
		for _, part := range []string{first, second} {
			t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"compaction_summary_chunk","compactionId":`+id+`,"content":{"type":"text","text":`+jsonString(part)+`}}`))
		}
		t.w.writeRaw(updateLine(sid, `{"sessionUpdate":"compaction_update","compactionId":`+id+`,"status":"completed"}`))
	}
}

// updateLine is the session/update line of sid that carries update, the
// way the TypeScript SDK writes one.
func updateLine(sid, update string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + jsonString(sid) + `,"update":` + update + "}}\n")
}

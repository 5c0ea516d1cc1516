package fakeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// lastText is the last text block of a prompt: the user's own words even
// when the sidecar has prepended a handoff block. Quirk triggers look only
// here, so earlier conversation replayed in a handoff ("crash now") cannot
// fire them again.
func lastText(blocks []acp.ContentBlock) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Text != nil {
			return blocks[i].Text.Text
		}
	}
	return ""
}

func allTexts(blocks []acp.ContentBlock) []string {
	var out []string
	for _, b := range blocks {
		if b.Text != nil {
			out = append(out, b.Text.Text)
		}
	}
	return out
}

// splitHalf cuts s in two at a rune boundary near its middle, so the reply
// line always arrives in two agent_message_chunk updates and a client must
// concatenate them.
func splitHalf(s string) (string, string) {
	i := len(s) / 2
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], s[i:]
}

func filler(chunk, size int) string {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte('a' + (chunk+j)%26)
	}
	return string(b)
}

// errCode is the JSON-RPC code of an SDK call's error, for reply fields.
func errCode(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return strconv.Itoa(re.Code)
	}
	return "internal"
}

// turnRunner runs the client's prompts: each turn's reply line, the quirk
// its last text block triggers (the package doc's list; the "subagent",
// "background" and advisory ones have files of their own) and the updates
// that end it. It owns the cancel of every turn in flight, which stdin's
// end fires; the session a turn changes is the store's, under the store's
// lock.
type turnRunner struct {
	cfg      config
	cat      *catalog
	sessions *sessionStore
	peer     *peer // what the client can do for a turn
	w        *lineWriter
	crash    *crasher
	v2       *v2adapter
	stderr   io.Writer
	conn     *acp.AgentSideConnection // set by agent.connect, before stdin is read

	mu      sync.Mutex
	cancels map[int]context.CancelFunc // turns in flight, cancelled at stdin's end
	next    int                        // the last key handed out in cancels
	ended   bool                       // stdin ended: a turn that begins now is cancelled at once
}

// begin registers a turn in flight: the returned ctx ends at the turn's
// own cancel (session/cancel, through the SDK's ctx) or at stdin's end,
// and end, which the turn defers, forgets it.
func (t *turnRunner) begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	t.mu.Lock()
	t.next++
	key := t.next
	t.cancels[key] = cancel
	if t.ended {
		cancel()
	}
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		delete(t.cancels, key)
		t.mu.Unlock()
		cancel()
	}
}

// cancelAll cancels every turn in flight and every turn that begins from
// now on, as stdin's end does.
func (t *turnRunner) cancelAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	for _, c := range t.cancels {
		c()
	}
}

// Prompt implements acp.Agent: the turn runner runs it.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	return a.turns.run(ctx, p)
}

// run is session/prompt (agent.Prompt). See the package doc for the quirks
// the last text block can trigger.
func (t *turnRunner) run(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	t.sessions.mu.Lock()
	s, err := t.sessions.session(p.SessionId)
	if err != nil {
		t.sessions.mu.Unlock()
		return acp.PromptResponse{}, err
	}
	if s.phantom {
		t.sessions.mu.Unlock()
		return acp.PromptResponse{}, ThreadNotFound(string(p.SessionId))
	}
	s.history = append(s.history, turn{user: p.Prompt})
	idx := len(s.history) - 1
	s.history[idx].msgID = MessageID(string(p.SessionId), idx+1)
	t.sessions.persistLocked()
	st, cwd := s.st, s.cwd
	t.sessions.mu.Unlock()
	ctx, end := t.begin(ctx)
	defer end()
	fs, subagents := t.peer.abilities()

	sid := string(p.SessionId)
	last := strings.TrimSpace(lastText(p.Prompt))
	effort := st.Effort
	if effort == "" {
		effort = "-"
	}
	r := Reply{Session: sid, Model: st.Model, Mode: st.Mode, Effort: effort, Verbosity: st.Verbosity,
		Turns: idx + 1, Blocks: len(p.Prompt), Digest: Digest(p.Prompt), Text: excerpt(lastText(p.Prompt))}

	var text strings.Builder
	send := func(chunk string) error {
		text.WriteString(chunk)
		return t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: t.agentText(sid, idx+1, chunk)})
	}
	finish := func() (acp.PromptResponse, error) {
		t.sessions.mu.Lock()
		if idx < len(s.history) {
			s.history[idx].agent = text.String()
		}
		if s.unlisted < 0 {
			s.unlisted = t.cfg.ListLag // the turn's transcript is "written" now, and lands that many lists later
		}
		t.sessions.persistLocked()
		title := sessionTitle(s.history)
		t.sessions.mu.Unlock()
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		if t.cfg.InfoUpdates {
			for _, u := range infoUpdates(title, idx+1) {
				if err := t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
					return acp.PromptResponse{}, fmt.Errorf("send %s info updates: %w", sid, err)
				}
			}
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}

	chunks, size := t.cfg.Chunks, t.cfg.ChunkSize
	switch {
	case last == "meta":
		t.w.writeRaw(MetaLine(sid))
		text.WriteString("fake-agent meta <>&\n")
	case last == "unknown update":
		t.w.writeRaw(UnknownUpdateLine(sid))
	case last == "ext":
		if err := t.conn.NotifyExtension(ctx, "_fake/notice", map[string]any{"sessionId": sid, "turn": idx + 1}); err != nil {
			return acp.PromptResponse{}, fmt.Errorf("send _fake/notice: %w", err)
		}
	case last == "hang":
		// The chunk tells a test the prompt is in flight, so its cancel
		// cannot arrive before the prompt does.
		if err := send("fake-agent waiting for session/cancel\n"); err != nil {
			return acp.PromptResponse{}, fmt.Errorf("stream hang notice: %w", err)
		}
		<-ctx.Done() // until session/cancel or stdin EOF
		return finish()
	case strings.HasPrefix(last, "ask permission"):
		path := strings.TrimSpace(strings.TrimPrefix(last, "ask permission"))
		if path == "" {
			path = filepath.Join(cwd, "fake.txt")
		}
		perm, read := t.askPermission(ctx, p.SessionId, idx+1, path, fs.ReadTextFile)
		r.Extra = map[string]string{"permission": perm, "read": read}
	case last == "background":
		t.sessions.mu.Lock()
		s.afterAnswer(func() { t.runBackground(p.SessionId, idx+1) })
		t.sessions.mu.Unlock()
		r.Extra = map[string]string{"background": "started"}
	case last == "subagent" && t.cfg.Subagents:
		// The draft: the Agent MUST NOT send subagent_update unless the
		// Client advertised subagents.
		if !subagents {
			r.Extra = map[string]string{"subagent": "not-negotiated"}
			break
		}
		child, perm := t.runSubagent(ctx, sid, cwd)
		r.Extra = map[string]string{"subagent": child, "permission": perm}
	case strings.HasPrefix(last, "switch mode "):
		// The agent changes its own mode, as claude-agent-acp leaves plan
		// mode: it reports it in each surface the profile has.
		if err := t.switchMode(ctx, s, p.SessionId, strings.TrimSpace(strings.TrimPrefix(last, "switch mode "))); err != nil {
			return acp.PromptResponse{}, err
		}
		r.Mode = t.sessions.modeOf(s)
	case strings.HasPrefix(last, "stream "):
		f := strings.Fields(last)
		if len(f) == 3 {
			n, err1 := strconv.Atoi(f[1])
			sz, err2 := strconv.Atoi(f[2])
			if err1 == nil && err2 == nil && n >= 0 && sz >= 0 {
				chunks, size = n, sz
			}
		}
	}

	first, second := splitHalf(r.String() + "\n")
	t.advisories(sid, last, idx+1) // -notices, -compaction (notices.go)
	if err := send(first); err != nil {
		return acp.PromptResponse{}, fmt.Errorf("stream reply: %w", err)
	}
	if t.cfg.CrashMidTurn || last == "crash now" {
		t.crash.die(3)
		<-t.crash.stopped // never answer; Main has returned
		return acp.PromptResponse{}, errStopped
	}
	if err := send(second); err != nil {
		return acp.PromptResponse{}, fmt.Errorf("stream reply: %w", err)
	}
	if strings.HasPrefix(last, "echo:") {
		if err := send(echoSection(allTexts(p.Prompt))); err != nil {
			return acp.PromptResponse{}, fmt.Errorf("stream echo: %w", err)
		}
	}
	for i := 0; i < chunks && ctx.Err() == nil; i++ {
		if err := send(filler(i, size)); err != nil {
			return acp.PromptResponse{}, fmt.Errorf("stream chunk %d: %w", i+1, err)
		}
	}
	return finish()
}

// askPermission runs the agent→client requests of the "ask permission"
// prompt while the prompt is pending: a tool_call, session/request_permission
// and, if allowed and the client can read files, fs/read_text_file. The
// outcomes become reply fields: permission=selected:ID|cancelled|error:CODE
// and read=ok:BYTES:SHA256PREFIX|error:CODE|skipped.
func (t *turnRunner) askPermission(ctx context.Context, sid acp.SessionId, n int, path string, canRead bool) (perm, read string) {
	toolID := acp.ToolCallId("fake-tool-" + strconv.Itoa(n))
	titleText := "Read " + path
	_ = t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartReadToolCall(toolID, titleText, path,
		acp.WithStartStatus(acp.ToolCallStatusPending))})
	resp, err := t.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: sid,
		ToolCall: acp.ToolCallUpdate{ToolCallId: toolID, Title: &titleText,
			Kind: acp.Ptr(acp.ToolKindRead), Status: acp.Ptr(acp.ToolCallStatusPending)},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	allowed := false
	switch {
	case err != nil:
		perm = "error:" + errCode(err)
	case resp.Outcome.Selected != nil:
		perm = "selected:" + string(resp.Outcome.Selected.OptionId)
		allowed = resp.Outcome.Selected.OptionId == "allow"
	default:
		perm = "cancelled"
	}
	read = "skipped"
	status := acp.ToolCallStatusFailed
	if allowed && canRead {
		rr, err := t.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: sid, Path: path})
		if err != nil {
			read = "error:" + errCode(err)
		} else {
			read = "ok:" + strconv.Itoa(len(rr.Content)) + ":" + hexSum([]byte(rr.Content))[:16]
			status = acp.ToolCallStatusCompleted
		}
	}
	_ = t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(toolID, acp.WithUpdateStatus(status))})
	return perm, read
}

// switchMode sets the session's mode from inside a turn and reports it:
// config_option_update with configOptions, current_mode_update with legacy
// modes. A mode the catalog lacks is an error of the turn's.
func (t *turnRunner) switchMode(ctx context.Context, s *session, sid acp.SessionId, mode string) error {
	t.sessions.mu.Lock()
	st, err := t.cat.withMode(s.st, mode)
	if err != nil {
		t.sessions.mu.Unlock()
		return err
	}
	s.st = st
	t.sessions.persistLocked()
	t.sessions.mu.Unlock()
	var updates []acp.SessionUpdate
	if t.cfg.ConfigOptions {
		updates = append(updates, configUpdate(t.cat.options(st)))
	}
	if t.cfg.LegacyModes {
		updates = append(updates, modeUpdate(mode))
	}
	for _, u := range updates {
		if err := t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u}); err != nil {
			return fmt.Errorf("report the mode switch of %s: %w", sid, err)
		}
	}
	return nil
}

package fakeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
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

// Prompt implements acp.Agent. See the package doc for the quirks the last
// text block can trigger.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.mu.Lock()
	s, err := a.session(p.SessionId)
	if err != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, err
	}
	if s.phantom {
		a.mu.Unlock()
		return acp.PromptResponse{}, ThreadNotFound(string(p.SessionId))
	}
	s.history = append(s.history, turn{user: p.Prompt})
	idx := len(s.history) - 1
	s.history[idx].msgID = MessageID(string(p.SessionId), idx+1)
	a.persistLocked()
	st, cwd := s.st, s.cwd
	ctx, cancel := context.WithCancel(ctx)
	a.nextCancel++
	key := a.nextCancel
	a.cancels[key] = cancel
	if a.eof {
		cancel()
	}
	fs := a.clientCaps.Fs
	subagents := a.subagents
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.cancels, key)
		a.mu.Unlock()
		cancel()
	}()

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
		return a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: a.agentText(sid, idx+1, chunk)})
	}
	finish := func() (acp.PromptResponse, error) {
		a.mu.Lock()
		if idx < len(s.history) {
			s.history[idx].agent = text.String()
		}
		if s.unlisted < 0 {
			s.unlisted = a.cfg.ListLag // the turn's transcript is "written" now, and lands that many lists later
		}
		a.persistLocked()
		title := sessionTitle(s.history)
		a.mu.Unlock()
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		if a.cfg.InfoUpdates {
			for _, u := range infoUpdates(title, idx+1) {
				if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
					return acp.PromptResponse{}, fmt.Errorf("send %s info updates: %w", sid, err)
				}
			}
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}

	chunks, size := a.cfg.Chunks, a.cfg.ChunkSize
	switch {
	case last == "meta":
		a.writeRaw(MetaLine(sid))
		text.WriteString("fake-agent meta <>&\n")
	case last == "unknown update":
		a.writeRaw(UnknownUpdateLine(sid))
	case last == "ext":
		if err := a.conn.NotifyExtension(ctx, "_fake/notice", map[string]any{"sessionId": sid, "turn": idx + 1}); err != nil {
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
		perm, read := a.askPermission(ctx, p.SessionId, idx+1, path, fs.ReadTextFile)
		r.Extra = map[string]string{"permission": perm, "read": read}
	case last == "background":
		a.mu.Lock()
		s.afterAnswer(func() { a.runBackground(p.SessionId, idx+1) })
		a.mu.Unlock()
		r.Extra = map[string]string{"background": "started"}
	case last == "subagent" && a.cfg.Subagents:
		// The draft: the Agent MUST NOT send subagent_update unless the
		// Client advertised subagents.
		if !subagents {
			r.Extra = map[string]string{"subagent": "not-negotiated"}
			break
		}
		child, perm := a.runSubagent(ctx, sid, cwd)
		r.Extra = map[string]string{"subagent": child, "permission": perm}
	case strings.HasPrefix(last, "switch mode "):
		// The agent changes its own mode, as claude-agent-acp leaves plan
		// mode: it reports it in each surface the profile has.
		if err := a.switchMode(ctx, s, p.SessionId, strings.TrimSpace(strings.TrimPrefix(last, "switch mode "))); err != nil {
			return acp.PromptResponse{}, err
		}
		r.Mode = s.mode(a)
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
	a.advisories(sid, last, idx+1) // -notices, -compaction (notices.go)
	if err := send(first); err != nil {
		return acp.PromptResponse{}, fmt.Errorf("stream reply: %w", err)
	}
	if a.cfg.CrashMidTurn || last == "crash now" {
		a.die(3)
		<-a.stopped // never answer; Main has returned
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
func (a *agent) askPermission(ctx context.Context, sid acp.SessionId, n int, path string, canRead bool) (perm, read string) {
	toolID := acp.ToolCallId("fake-tool-" + strconv.Itoa(n))
	titleText := "Read " + path
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartReadToolCall(toolID, titleText, path,
		acp.WithStartStatus(acp.ToolCallStatusPending))})
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
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
		rr, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: sid, Path: path})
		if err != nil {
			read = "error:" + errCode(err)
		} else {
			read = "ok:" + strconv.Itoa(len(rr.Content)) + ":" + hexSum([]byte(rr.Content))[:16]
			status = acp.ToolCallStatusCompleted
		}
	}
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(toolID, acp.WithUpdateStatus(status))})
	return perm, read
}

// switchMode sets the session's mode from inside a turn and reports it:
// config_option_update with configOptions, current_mode_update with legacy
// modes. A mode the catalog lacks is an error of the turn's.
func (a *agent) switchMode(ctx context.Context, s *session, sid acp.SessionId, mode string) error {
	a.mu.Lock()
	st, err := a.cat.withMode(s.st, mode)
	if err != nil {
		a.mu.Unlock()
		return err
	}
	s.st = st
	a.persistLocked()
	a.mu.Unlock()
	var updates []acp.SessionUpdate
	if a.cfg.ConfigOptions {
		updates = append(updates, configUpdate(a.cat.options(st)))
	}
	if a.cfg.LegacyModes {
		updates = append(updates, modeUpdate(mode))
	}
	for _, u := range updates {
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u}); err != nil {
			return fmt.Errorf("report the mode switch of %s: %w", sid, err)
		}
	}
	return nil
}

// mode is the session's current mode.
func (s *session) mode(a *agent) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return s.st.Mode
}

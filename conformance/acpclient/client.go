package acpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// maxSDKLine is the longest line handed to the SDK connection, whose reader
// dies on lines over 10 MB. Longer lines are only recorded (Lines).
const maxSDKLine = 8 << 20

// Message is a notification or request the peer sent that is not a
// session/update, e.g. an extension notification like `_fake/notice`.
type Message struct {
	Method string
	Params json.RawMessage
}

// Client is a scripted ACP client on acp-go-sdk's ClientSideConnection.
//
// One reader goroutine reads every line the peer writes, records it, records
// session/update notifications itself (in wire order, before any later line
// is handled, so a call that returns has seen every update sent before its
// response), answers CallRaw responses, and hands requests and responses to
// the SDK, which answers session/request_permission, fs/* and terminal/*.
// Close ends the peer and waits for the reader.
//
// Its methods come from the owners it is made of: the Client itself makes
// the ACP calls and runs the reader and the peer's life; what the peer
// sent is kept by received (Lines, Updates, the waits), the files it
// serves by memFS (File, SetFile), and the calls past the SDK by rawCalls
// (CallRaw, NotifyRaw).
type Client struct {
	*received
	*memFS
	*rawCalls

	opts       Options
	conn       *acp.ClientSideConnection
	in         *lockedWriter
	proc       *process // nil after Connect
	sdkFeed    *io.PipeWriter
	readerDone chan struct{}

	closeOnce sync.Once
	closeCode int
	closeErr  error
}

// Start runs argv as a subprocess (in its own process group) and connects
// to it over its stdin and stdout. ctx bounds the subprocess's life: when it
// ends, the process group is killed.
func Start(ctx context.Context, argv []string, opts Options) (*Client, error) {
	p, stdin, stdout, err := startProcess(ctx, argv, opts)
	if err != nil {
		return nil, err
	}
	return connect(stdout, stdin, opts, p), nil
}

// Connect speaks ACP over an in-process peer: r is the peer's stdout, w its
// stdin. Close closes w and waits for r to end, so the caller must close the
// writer behind r when the peer is done.
func Connect(r io.Reader, w io.WriteCloser, opts Options) *Client {
	return connect(r, w, opts, nil)
}

func connect(r io.Reader, w io.WriteCloser, opts Options, p *process) *Client {
	in := &lockedWriter{w: w}
	readerDone := make(chan struct{})
	c := &Client{
		received:   newReceived(),
		memFS:      newMemFS(opts.Files),
		rawCalls:   newRawCalls(in, readerDone),
		opts:       opts,
		in:         in,
		proc:       p,
		readerDone: readerDone,
	}
	sdkOut, sdkFeed := io.Pipe()
	c.sdkFeed = sdkFeed
	c.conn = acp.NewClientSideConnection(sdkClient{c}, c.in, sdkOut)
	c.conn.SetLogger(slog.New(slog.DiscardHandler))
	go c.readPeer(r)
	return c
}

// readPeer is the only reader of the peer's stdout. It exits at EOF or a
// read error, and then ends the SDK connection and wakes every waiter.
func (c *Client) readPeer(r io.Reader) {
	defer close(c.readerDone)
	defer c.received.end()
	defer c.sdkFeed.Close()
	if f, ok := r.(*os.File); ok && c.proc != nil {
		defer f.Close() // Start's pipe is ours; Connect's reader is the caller's
	}
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			c.route(line)
		}
		if err != nil {
			return
		}
	}
}

func (c *Client) route(line []byte) {
	var p peek
	parsed := json.Unmarshal(line, &p) == nil
	forward := parsed && len(line) <= maxSDKLine
	if c.received.record(line, p, parsed) {
		forward = false // a notification: the client's alone
	}
	if parsed && p.Method == "" && strings.HasPrefix(string(p.ID), `"`+rawIDPrefix) {
		c.rawCalls.answer(p)
		forward = false
	}
	if forward {
		if _, err := c.sdkFeed.Write(append(line, '\n')); err != nil {
			return // the SDK connection is gone; the line is still recorded
		}
	}
}

// Code is the JSON-RPC error code inside err, or 0 if there is none.
func Code(err error) int {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

// Initialize sends initialize with protocol version 1 and the client
// capabilities fs.readTextFile and fs.writeTextFile (no terminal).
func (c *Client) Initialize(ctx context.Context) (acp.InitializeResponse, error) {
	res, err := c.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		},
		ClientInfo: &acp.Implementation{Name: "acpclient", Version: "1"},
	})
	if err != nil {
		return res, fmt.Errorf("initialize: %w", err)
	}
	return res, nil
}

// NewSession sends session/new with no MCP servers.
func (c *Client) NewSession(ctx context.Context, cwd string) (acp.NewSessionResponse, error) {
	res, err := c.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return res, fmt.Errorf("session/new: %w", err)
	}
	return res, nil
}

// Load sends session/load. The replayed history is in Updates(sid) when it
// returns.
func (c *Client) Load(ctx context.Context, sid acp.SessionId, cwd string) (acp.LoadSessionResponse, error) {
	res, err := c.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return res, fmt.Errorf("session/load %s: %w", sid, err)
	}
	return res, nil
}

// Resume sends session/resume.
func (c *Client) Resume(ctx context.Context, sid acp.SessionId, cwd string) (acp.ResumeSessionResponse, error) {
	res, err := c.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: sid, Cwd: cwd})
	if err != nil {
		return res, fmt.Errorf("session/resume %s: %w", sid, err)
	}
	return res, nil
}

// Fork sends the unstable session/fork.
func (c *Client) Fork(ctx context.Context, sid acp.SessionId, cwd string) (acp.UnstableForkSessionResponse, error) {
	res, err := c.conn.UnstableForkSession(ctx, acp.UnstableForkSessionRequest{SessionId: sid, Cwd: cwd})
	if err != nil {
		return res, fmt.Errorf("session/fork %s: %w", sid, err)
	}
	return res, nil
}

// List sends session/list, filtered by cwd unless it is empty.
func (c *Client) List(ctx context.Context, cwd string) (acp.ListSessionsResponse, error) {
	req := acp.ListSessionsRequest{}
	if cwd != "" {
		req.Cwd = &cwd
	}
	res, err := c.conn.ListSessions(ctx, req)
	if err != nil {
		return res, fmt.Errorf("session/list: %w", err)
	}
	return res, nil
}

// Prompt sends one text block per text and returns the stop reason and the
// agent's text of this turn: the agent_message_chunk text that arrived for
// sid between the request and its response.
func (c *Client) Prompt(ctx context.Context, sid acp.SessionId, text ...string) (acp.StopReason, string, error) {
	blocks := make([]acp.ContentBlock, len(text))
	for i, t := range text {
		blocks[i] = acp.TextBlock(t)
	}
	return c.PromptBlocks(ctx, sid, blocks)
}

// PromptBlocks is Prompt with any content blocks. On error the text holds
// what arrived before it.
func (c *Client) PromptBlocks(ctx context.Context, sid acp.SessionId, blocks []acp.ContentBlock) (acp.StopReason, string, error) {
	mark := len(c.Updates(sid))
	res, err := c.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: blocks})
	text := AgentText(c.Updates(sid)[mark:])
	if err != nil {
		return "", text, fmt.Errorf("session/prompt %s: %w", sid, err)
	}
	return res.StopReason, text, nil
}

// SetMode sends session/set_mode.
func (c *Client) SetMode(ctx context.Context, sid acp.SessionId, modeID string) error {
	if _, err := c.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sid, ModeId: acp.SessionModeId(modeID)}); err != nil {
		return fmt.Errorf("session/set_mode %s %q: %w", sid, modeID, err)
	}
	return nil
}

// SetConfigOption sends session/set_config_option for a select option and
// returns the full option list the agent answered.
func (c *Client) SetConfigOption(ctx context.Context, sid acp.SessionId, configID, value string) ([]acp.SessionConfigOption, error) {
	res, err := c.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: sid, ConfigId: acp.SessionConfigId(configID), Value: acp.SessionConfigValueId(value)}})
	if err != nil {
		return nil, fmt.Errorf("session/set_config_option %s %s=%q: %w", sid, configID, value, err)
	}
	return res.ConfigOptions, nil
}

// SetModel sends the legacy session/set_model.
func (c *Client) SetModel(ctx context.Context, sid acp.SessionId, modelID string) error {
	if _, err := c.conn.UnstableSetSessionModel(ctx, acp.UnstableSetSessionModelRequest{SessionId: sid, ModelId: acp.UnstableModelId(modelID)}); err != nil {
		return fmt.Errorf("session/set_model %s %q: %w", sid, modelID, err)
	}
	return nil
}

// Cancel sends the session/cancel notification.
func (c *Client) Cancel(ctx context.Context, sid acp.SessionId) error {
	if err := c.conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		return fmt.Errorf("session/cancel %s: %w", sid, err)
	}
	return nil
}

// CloseStdin closes the peer's stdin without waiting for anything.
func (c *Client) CloseStdin() error { return c.in.Close() }

// Done is closed when the peer's output has ended (for Start: usually when
// it exited).
func (c *Client) Done() <-chan struct{} { return c.readerDone }

// Wait waits for the subprocess to exit by itself and returns its exit
// status (-1 for a signal). For Connect it waits for the output to end.
func (c *Client) Wait(ctx context.Context) (int, error) {
	if c.proc == nil {
		select {
		case <-c.readerDone:
			return 0, nil
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for peer: %w", context.Cause(ctx))
		}
	}
	return c.proc.waitCtx(ctx)
}

// Pid is the subprocess's pid, which is also its process group id; 0 for
// Connect.
func (c *Client) Pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Kill SIGKILLs the subprocess's process group at once.
func (c *Client) Kill() error {
	if c.proc == nil {
		return errors.New("kill: peer is not a subprocess")
	}
	return c.proc.kill()
}

// Close closes the peer's stdin, waits (up to Options.CloseTimeout) for it
// to exit, kills its process group if it does not (returning ErrKilled),
// waits for its output to end, and returns its exit status. Calling it
// again returns the same result.
func (c *Client) Close() (int, error) {
	c.closeOnce.Do(func() { c.closeCode, c.closeErr = c.close() })
	return c.closeCode, c.closeErr
}

func (c *Client) close() (int, error) {
	timeout := c.opts.closeTimeout()
	var code int
	var err error
	if c.proc != nil {
		code, err = c.proc.shutdown(c.in, timeout)
	} else {
		c.in.Close()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.readerDone:
	case <-timer.C:
		if c.proc != nil {
			_ = c.proc.kill() // a grandchild may hold stdout open
		}
		return code, errors.Join(err, errors.New("close: peer output did not end"))
	}
	<-c.conn.Done()
	return code, err
}

// AgentText concatenates the agent_message_chunk text of updates.
func AgentText(updates []acp.SessionNotification) string {
	var b strings.Builder
	for _, u := range updates {
		if m := u.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
			b.WriteString(m.Content.Text.Text)
		}
	}
	return b.String()
}

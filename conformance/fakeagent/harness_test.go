package fakeagent_test

import (
	"context"
	"io"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// teeCloser copies what the client writes to the agent into sent.
type teeCloser struct {
	w    io.WriteCloser
	sent *acpclient.Buffer
}

func (t teeCloser) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.sent.Write(p[:n])
	return n, err
}

func (t teeCloser) Close() error { return t.w.Close() }

// agent is one fake agent run by Main in-process over io.Pipes.
type agent struct {
	*acpclient.Client
	code   chan int // Main's return value
	sent   *acpclient.Buffer
	stderr *acpclient.Buffer
	cancel context.CancelFunc
}

func (a *agent) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case c := <-a.code:
		a.code <- c
		return c
	case <-t.Context().Done():
		t.Fatal("Main did not return")
		return -1
	}
}

// start runs Main with args and connects a client to it. Main's stdout is
// closed when Main returns, which ends the client's reader.
func start(t *testing.T, opts acpclient.Options, args ...string) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agent{code: make(chan int, 1), sent: &acpclient.Buffer{}, stderr: &acpclient.Buffer{}, cancel: cancel}
	go func() {
		code := fakeagent.Main(ctx, args, inR, outW, a.stderr)
		outW.Close()
		a.code <- code
	}()
	a.Client = acpclient.Connect(outR, teeCloser{w: inW, sent: a.sent}, opts)
	t.Cleanup(func() {
		cancel()
		a.Close()
		inR.Close()
		if t.Failed() {
			t.Logf("fake agent stderr:\n%s", a.stderr.Bytes())
		}
	})
	return a
}

// session initializes and opens one session.
func (a *agent) session(t *testing.T) (acp.NewSessionResponse, context.Context) {
	t.Helper()
	ctx := t.Context()
	if _, err := a.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := a.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

func (a *agent) reply(ctx context.Context, t *testing.T, sid acp.SessionId, text ...string) fakeagent.Reply {
	t.Helper()
	stop, got, err := a.Prompt(ctx, sid, text...)
	if err != nil {
		t.Fatal(err)
	}
	if stop != acp.StopReasonEndTurn {
		t.Errorf("stopReason = %q, want end_turn", stop)
	}
	r, ok := fakeagent.ParseReply(got)
	if !ok {
		t.Fatalf("no reply line in %q", got)
	}
	return r
}

func optionIDs(opts []acp.SessionConfigOption) []string {
	var ids []string
	for _, o := range opts {
		if o.Select != nil {
			ids = append(ids, string(o.Select.Id))
		}
	}
	return ids
}

func option(opts []acp.SessionConfigOption, id string) *acp.SessionConfigOptionSelect {
	for _, o := range opts {
		if o.Select != nil && string(o.Select.Id) == id {
			return o.Select
		}
	}
	return nil
}

func values(o *acp.SessionConfigOptionSelect) []string {
	if o == nil || o.Options.Ungrouped == nil {
		return nil
	}
	var out []string
	for _, v := range *o.Options.Ungrouped {
		out = append(out, string(v.Value))
	}
	return out
}

// kinds lists the sessionUpdate kinds of updates.
func kinds(us []acp.SessionNotification) []string {
	var out []string
	for _, u := range us {
		switch x := u.Update; {
		case x.UserMessageChunk != nil:
			out = append(out, "user_message_chunk")
		case x.AgentMessageChunk != nil:
			out = append(out, "agent_message_chunk")
		case x.ToolCall != nil:
			out = append(out, "tool_call")
		case x.ToolCallUpdate != nil:
			out = append(out, "tool_call_update")
		case x.AvailableCommandsUpdate != nil:
			out = append(out, "available_commands_update")
		case x.CurrentModeUpdate != nil:
			out = append(out, "current_mode_update:"+string(x.CurrentModeUpdate.CurrentModeId))
		case x.ConfigOptionUpdate != nil:
			out = append(out, "config_option_update")
		default:
			out = append(out, "other")
		}
	}
	return out
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

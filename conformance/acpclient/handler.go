package acpclient

import (
	"context"
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

var (
	_ acp.Client                 = sdkClient{}
	_ acp.ExtensionMethodHandler = sdkClient{}
)

// sdkClient answers the peer's requests for a Client. Notifications never
// reach it: the Client's reader records them.
type sdkClient struct{ c *Client }

// defaultPermission picks the first allow option, else the first option,
// else cancels.
func defaultPermission(req acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
	for _, o := range req.Options {
		if o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways {
			return acp.NewRequestPermissionOutcomeSelected(o.OptionId)
		}
	}
	if len(req.Options) > 0 {
		return acp.NewRequestPermissionOutcomeSelected(req.Options[0].OptionId)
	}
	return acp.NewRequestPermissionOutcomeCancelled()
}

func (h sdkClient) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	h.c.received.permission(p)
	choose := h.c.opts.Permission
	if choose == nil {
		choose = defaultPermission
	}
	return acp.RequestPermissionResponse{Outcome: choose(p)}, nil
}

func notFound(path string) *acp.RequestError {
	return &acp.RequestError{Code: -32002, Message: "Resource not found: " + path, Data: map[string]any{"path": path}}
}

// ReadTextFile serves the in-memory file system, honouring line (1-based)
// and limit.
func (h sdkClient) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	content, ok := h.c.File(p.Path)
	if !ok {
		return acp.ReadTextFileResponse{}, notFound(p.Path)
	}
	if p.Line != nil || p.Limit != nil {
		lines := strings.SplitAfter(content, "\n")
		start := 0
		if p.Line != nil && *p.Line > 1 {
			start = min(*p.Line-1, len(lines))
		}
		end := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			end = min(start+*p.Limit, len(lines))
		}
		content = strings.Join(lines[start:end], "")
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (h sdkClient) WriteTextFile(_ context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	h.c.SetFile(p.Path, p.Content)
	return acp.WriteTextFileResponse{}, nil
}

// SessionUpdate is never called: the reader records updates in wire order.
func (h sdkClient) SessionUpdate(context.Context, acp.SessionNotification) error { return nil }

// The client advertises no terminal capability, so terminal/* get -32601.

func (h sdkClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (h sdkClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (h sdkClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (h sdkClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (h sdkClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// HandleExtensionMethod records an extension request from the peer and
// answers -32601.
func (h sdkClient) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	h.c.received.note(Message{Method: method, Params: params})
	return nil, acp.NewMethodNotFound(method)
}

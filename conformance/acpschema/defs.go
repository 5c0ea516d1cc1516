package acpschema

import "github.com/acp-sidecar/acp-sidecar/proxy"

// The sides a frame comes from, by the direction it travels: the client's
// frames go to the agent, the agent's (or the sidecar's in front of it) to
// the client.
const (
	client = proxy.ClientToAgent
	agent  = proxy.AgentToClient
)

// side is who sent a frame travelling in d, as messages name it.
func side(d proxy.Direction) string {
	if d == client {
		return "client"
	}
	return "agent"
}

// A version is where one ACP version's schema files are in the SDK's
// schema directory, and which definition judges each frame: the params of
// each method, by the side that calls it, and the result of each method,
// by the side that answers it. A method that is not named here is not
// judged (a strict Judge says so), so naming one judges more frames for
// every caller, the counts the conformance suite reports among them.
type version struct {
	dir     string               // "v1", under the schema directory
	params  [2]map[string]string // [client]: the client's methods; [agent]: the agent's
	results [2]map[string]string // [agent]: the agent's answers to the client's methods; [client]: the client's to the agent's
}

var versions = map[int]version{
	1: {dir: "v1",
		params: [2]map[string]string{
			client: {
				"initialize": "InitializeRequest", "authenticate": "AuthenticateRequest",
				"session/new": "NewSessionRequest", "session/load": "LoadSessionRequest",
				"session/resume": "ResumeSessionRequest", "session/fork": "ForkSessionRequest",
				"session/list": "ListSessionsRequest", "session/close": "CloseSessionRequest",
				"session/delete": "DeleteSessionRequest", "session/prompt": "PromptRequest",
				"session/set_mode": "SetSessionModeRequest", "session/set_config_option": "SetSessionConfigOptionRequest",
				"session/cancel": "CancelNotification",
			},
			agent: {
				"session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest",
				"fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
			},
		},
		results: [2]map[string]string{
			agent: {
				"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
				"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
				"session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
				"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
				"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
				"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
			},
			client: {
				"session/request_permission": "RequestPermissionResponse",
				"fs/read_text_file":          "ReadTextFileResponse", "fs/write_text_file": "WriteTextFileResponse",
			},
		}},
	// v2 has no session/load, set_mode, authenticate or client fs methods
	// (docs/v2.md).
	2: {dir: "v2",
		params: [2]map[string]string{
			client: {
				"initialize": "InitializeRequest", "session/new": "NewSessionRequest",
				"session/resume": "ResumeSessionRequest", "session/fork": "ForkSessionRequest",
				"session/list": "ListSessionsRequest", "session/close": "CloseSessionRequest",
				"session/delete": "DeleteSessionRequest", "session/prompt": "PromptRequest",
				"session/set_config_option": "SetSessionConfigOptionRequest", "session/cancel": "CancelSessionNotification",
			},
			agent: {
				"session/update": "UpdateSessionNotification", "session/request_permission": "RequestPermissionRequest",
			},
		},
		results: [2]map[string]string{
			agent: {
				"initialize":  "InitializeResponse",
				"session/new": "NewSessionResponse", "session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
				"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
				"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
				"session/set_config_option": "SetSessionConfigOptionResponse",
			},
			client: {"session/request_permission": "RequestPermissionResponse"},
		}},
}

// errorDef judges every JSON-RPC error, whoever sent it.
const errorDef = "Error"

// defNames are every definition v's frames are judged by.
func (v version) defNames() []string {
	names := []string{errorDef}
	for _, m := range append(v.params[:], v.results[:]...) {
		for _, d := range m {
			names = append(names, d)
		}
	}
	return names
}

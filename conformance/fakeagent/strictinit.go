package fakeagent

import (
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"
)

// Real agents built on the TypeScript ACP SDK's protocol router (codex-acp
// 2.6.0, claude-agent-acp 0.101.0 with @agentclientprotocol/sdk 2.4.0) look
// at every message before initialize (routeInitialize): a request of any
// other method gets -32600 "Invalid request" with data "first ACP request
// must be initialize", and a notification or a response is ignored. A
// sidecar that lets a client request reach a restarted agent ahead of its
// own initialize breaks there; acp-go-sdk, which the fake agent is built
// on, answers such a request as if the connection were up, so without
// -strict-init that bug goes unseen.

// NotInitializedLine is the exact line -strict-init writes in answer to a
// request with id that came before initialize: codex-acp 2.6.0's, member
// for member (routeInitialize, RequestError.invalidRequest). It includes
// the trailing newline.
func NotInitializedLine(id json.RawMessage) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32600,"message":"Invalid request","data":"first ACP request must be initialize"}}` + "\n")
}

// initGate is -strict-init: it keeps every message from the SDK until the
// first initialize request. Only the stdin reader calls it, so open needs
// no lock.
type initGate struct {
	strict bool // -strict-init
	open   bool // an initialize request has come
	w      *lineWriter
}

// beforeInit reports whether -strict-init keeps a message of method (id
// nil or null for a notification or a response) from the SDK because no
// initialize has come yet, and answers it if it is a request. The first
// initialize request opens the connection for good, as the router hands
// the stream to the agent then.
func (g *initGate) beforeInit(method string, id json.RawMessage) bool {
	if !g.strict || g.open {
		return false
	}
	hasID := len(id) > 0 && string(id) != "null"
	if method == acp.AgentMethodInitialize && hasID {
		g.open = true
		return false
	}
	if method != "" && hasID {
		g.w.writeRaw(NotInitializedLine(id))
	}
	return true
}

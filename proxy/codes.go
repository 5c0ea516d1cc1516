package proxy

import (
	"errors"

	"github.com/sourcegraph/jsonrpc2"
)

// The JSON-RPC error codes the sidecar answers with, in one place: the
// relay's own, and those of the stages that answer for it. JSON-RPC leaves
// -32000 to -32099 to implementations; ACP uses -32000 (auth required) and
// -32002 (resource not found), so the sidecar's own codes take five that
// neither uses.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeResourceNotFound is ACP's answer for a session the agent does
	// not know (session/load, session/resume, a prompt on it); the sidecar
	// reads it, and a rebuild that gets it asks no other way for the same
	// session.
	CodeResourceNotFound = -32002
	// CodeRequestCancelled answers a request cancelled before it ran, as
	// ACP v2 has it (the code LSP reserves for it).
	CodeRequestCancelled = -32800

	// CodeBlocked answers a prompt to a session whose config could not be
	// restored: no prompt runs on a partial config.
	CodeBlocked = -32010
	// CodeBusy answers a request that would race a rebuild in progress.
	CodeBusy = -32011
	// CodeAgentGone answers a request the agent received and then died
	// under, or one that waited past --hold-timeout for it.
	CodeAgentGone = -32012
	// CodeLeaseHeld answers a request on a session that another sidecar of
	// a fleet holds (its lease): the editor should reconnect to that one.
	CodeLeaseHeld = -32013
	// CodeSessionClosed answers a request on a session the client closed:
	// its own session/load or session/resume reopens it.
	CodeSessionClosed = -32014
)

// CodeOfCall is the JSON-RPC error code the agent answered one of the
// sidecar's own calls (Relay.Call) with, and false when err is not the
// agent's error response (the agent died, the call timed out).
func CodeOfCall(err error) (int, bool) {
	var e *jsonrpc2.Error
	if errors.As(err, &e) {
		return int(e.Code), true
	}
	return 0, false
}

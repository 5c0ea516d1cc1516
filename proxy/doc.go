// Package proxy moves newline-delimited JSON-RPC frames between a client and an
// agent process, byte for byte and in order per direction.
//
// It owns framing (whole lines up to a limit), the envelope peek (id, method,
// params.sessionId, params.update.sessionUpdate), the sidecar's own id space for
// requests it sends to the agent, and the agent process's life. Several relays,
// one per agent, can share one client (ClientPort): the client's frames are read
// and scanned once, and every relay writes to the one output. It knows nothing
// of ACP's meaning: what a frame is for is decided by the Hook that intercept/
// provides, and where a client frame goes by the route of the port's owner. It
// imports no other package of this module.
package proxy

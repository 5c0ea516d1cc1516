// Package acpclient drives ACP peers from Go tests and the demo.
//
// Client is a scripted ACP client on acp-go-sdk's ClientSideConnection. Start
// runs the peer (an agent, or the sidecar in front of one) as a real
// subprocess in its own process group; Connect speaks to an in-process peer
// over pipes. The client keeps every line and every session/update it
// receives, in order, and the wait helpers block on a condition rather than
// sleeping. It answers session/request_permission (Options.Permission),
// serves fs/read_text_file and fs/write_text_file from an in-memory map, and
// answers terminal/* with -32601. CallRaw sends any method, including
// `_sidecar/*` extensions, and returns the result bytes as received.
//
// RawClient writes exact bytes and collects exact lines, for byte-level
// comparisons the SDK would get in the way of.
//
// Both read lines of any length themselves. The SDK only sees lines of up to
// 8 MiB (its reader dies on lines over 10 MB); a longer response to an SDK
// call is recorded in Lines but never completes the call, so use CallRaw or
// RawClient for those.
package acpclient

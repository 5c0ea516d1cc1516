// Package demo is `acp-sidecar demo`: a scripted editor drives the real
// sidecar binary, wrapped around the built-in fake agent, over real pipes,
// and says what happened at each step. It grows with each capability.
//
// It owns the script and its story: a session set up with a model, an
// effort and a mode, a /reset, a /rewind, an agent that crashes mid-turn,
// and at the end what the record kept, read from the state dir once the
// sidecar has exited (a temporary one unless --keep-state names it).
//
// It never runs the sidecar in process and never imports intercept/ or
// proxy/: the editor is conformance/acpclient speaking ACP to the binary
// (exe), and what it tells of the agent is what the fake agent echoes back.
// Its only other way in is the store the sidecar left, opened after the
// sidecar is gone.
package demo

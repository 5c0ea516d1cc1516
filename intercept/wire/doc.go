// Package wire is what the sidecar knows of ACP's frames: the method names
// it reads or answers, the few payloads it decodes into state's types, and
// byte-span edits that rewrite one member of a frame and keep every other
// byte as it was. It holds no state and does no I/O, so every stage of the
// chain and the switchboard read frames the same way.
package wire

// Package acpschema judges ACP frames by the JSON schemas that
// @agentclientprotocol/sdk ships (its schema directory: v1/ and v2/, each
// with schema.json and schema.unstable.json).
//
// It exists because every frame a client gets must read as the ACP version
// the connection speaks, as an editor whose SDK validates what it receives
// (the TypeScript SDK's zod) reads it: the agent's frames the sidecar
// passes on, and above all the ones the sidecar makes or changes itself.
// Three places check that, and they must judge a frame alike: the product's
// `acp-sidecar conformance --schema DIR` (conformance/suite), the
// end-to-end tests' clients (conformance/e2e) and the fake agent's v2 tests
// (conformance/fakeagent), which check the client's own frames too.
//
// Load compiles one version's definitions from a schema directory, and
// LoadCache from where scripts/e2e-setup.sh installs the SDK, for tests. A
// Judge is fed one connection's frames in the order they crossed, and
// judges each by what it is: a request or notification by its method and
// the side that sent it, a result by the method of the request it answers,
// an error by the schema's Error.
//
// It knows the schema files and which definition each method's params and
// results are, and nothing of the suite, the sidecar or a test: whose a
// bad frame is, and what to make of it, is its callers' to say. It is not
// test code, as conformance/suite is product code and imports it.
package acpschema

// Package chaos proves the sidecar under faults: real sidecar processes
// (the built binary) around the built-in fake agent, with the agent and the
// sidecar SIGKILLed at random points, several sidecars sharing one state
// dir while its store owner is killed, and peers that stop reading or
// flood. It holds tests only.
//
//	go test ./conformance/chaos/...                         # the CI profile
//	go test ./conformance/chaos/... -chaos.full             # the full profile
//	ACP_SIDECAR_CHAOS=full go test ./conformance/chaos/...  # the same
//	go test ./conformance/chaos/... -chaos.seed N           # replay a seed
//
// Every test prints its seed and ends with one report line: runs, kills
// survived, turns lost (must be 0), hangs (must be 0), seed.
//
// The tests need Linux: they stop and kill processes by signal and read
// /proc, and their build tags say so.
package chaos

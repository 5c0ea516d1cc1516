package suite

import "context"

// Tier says what a check's failure means, as the official ACP test kit has
// it.
type Tier string

const (
	// Mandatory checks hold for every agent.
	Mandatory Tier = "mandatory"
	// Capability checks run when the agent advertises what they need, and
	// are skipped with the reason otherwise.
	Capability Tier = "capability"
	// Advisory checks are reported (a failure is a warn) and never fail
	// the run.
	Advisory Tier = "advisory"
)

// check is one conformance check. run returns nil for pass, a skipError
// for skip (with the reason), anything else for fail (with the detail; warn
// for an advisory check).
type check struct {
	id    string
	title string
	tier  Tier
	// needs, for a capability check, returns why the agent cannot be
	// checked ("" when it can); the check is then skipped without
	// starting anything.
	needs func(pr probeResult) string
	run   func(ctx context.Context, r *checkRun, pr probeResult) error
}

func checks() []check {
	return []check{
		{"transparency", "the same exchange directly and through the sidecar gives the same frames", Mandatory, nil, checkTransparency},
		{"record", "after each change, `show --json` live matches what the agent reported", Capability, needConfig, checkRecord},
		{"reset", "every option set to a non-default value survives /reset", Capability, needConfig, checkReset},
		{"restore-order", "a restore calls model, then mode, then options by id, re-reading the catalog after the model", Capability, needConfig, checkRestoreOrder},
		{"fail-closed", "a start-up --set value the agent does not offer is reported and never sent", Capability, needConfig, checkFailClosed},
		{"rollback", "/rewind: a fresh native session, the config held, the kept turns handed over once without the rewound turn", Mandatory, nil, checkRollback},
		{"crash", "the agent killed between turns: the prompt sent right after ends end_turn on the recorded config, with no retry", Mandatory, nil, checkCrash},
		{"load", "session/load after a sidecar restart replays the turns and answers", Mandatory, nil, checkLoad},
	}
}

const noConfig = "agent has no config options (no configOptions, modes or models)"

func needConfig(pr probeResult) string {
	if pr.cfg.empty() {
		return noConfig
	}
	return ""
}

package intercept

import "github.com/acp-sidecar/acp-sidecar/intercept/ledger"

// StageList is the chain cmd builds (cmd/acp-sidecar buildChain), for the
// tests that run frames through it: both lists name every stage in the
// same order.
func (c *Core) StageList() []Interceptor {
	lifeline := NewLifeline(c.Life(), c.Ledger(), c.Watch(), c.ChunkGate(), c.LifelineOps(), c.log)
	return []Interceptor{
		lifeline,
		NewEmulation(lifeline, c.EmulationOps(), c.Ledger(), c.Life()),
		NewCommands(c.Sessions(), c.Ledger(), c.Life(), c.Version(), c.MaxProtocol(), c.log),
		NewRecordStage(c.Recorder()),
		NewIDs(c.Ledger(), c.ChunkGate(), c.Natives()),
		NewPickers(c.Life(), c.Pickers()),
		NewTracker(c.Ledger()),
	}
}

// promptInFlight puts a prompt the record waits for in r's ledger, as a
// client's prompt on its way does: the record reads chunks while one is.
func promptInFlight(r *Core) {
	r.led.Update(func(f *ledger.Flight) { f.Requests.Record("test-prompt", "session/prompt", "s1") })
}

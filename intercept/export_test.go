package intercept

import "github.com/acp-sidecar/acp-sidecar/intercept/ledger"

// StageList is the chain cmd builds (cmd/acp-sidecar buildChain), for the
// tests that run frames through it: both lists name every stage in the
// same order.
func StageList(r *Core) []Interceptor {
	return []Interceptor{
		NewLifeline(r.Life(), r.Ledger(), r.Watch(), r.ChunkGate(), r.Sessions(), r.log),
		NewCommands(r.Sessions(), r.Ledger(), r.Life(), r.Version(), r.MaxProtocol(), r.log),
		NewRecordStage(r.Recorder()),
		NewIDs(r.Ledger(), r.ChunkGate(), r.Natives()),
		NewPickers(r.Life(), r.Pickers()),
		NewTracker(r.Ledger()),
	}
}

// promptInFlight puts a prompt the record waits for in r's ledger, as a
// client's prompt on its way does: the record reads chunks while one is.
func promptInFlight(r *Core) {
	r.led.Update(func(f *ledger.Flight) { f.Requests.Record("test-prompt", "session/prompt", "s1") })
}

package intercept

import "github.com/acp-sidecar/acp-sidecar/intercept/ledger"

// StageList is the chain cmd builds (cmd/acp-sidecar buildChain), for the
// tests that run frames through it: both lists name every stage in the
// same order.
func StageList(r *Core) []Interceptor {
	st := r.Stages()
	return []Interceptor{st.Lifeline, st.Commands, st.Record, st.IDs, st.Tracker}
}

// promptInFlight puts a prompt the record waits for in r's ledger, as a
// client's prompt on its way does: the record reads chunks while one is.
func promptInFlight(r *Core) {
	r.led.Update(func(f *ledger.Flight) { f.Record("test-prompt", "session/prompt", "s1") })
}

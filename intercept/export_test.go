package intercept

// Stages is the chain cmd builds (cmd/acp-sidecar buildChain), for the
// tests that run frames through it: both lists name every stage in the
// same order.
func Stages(r *Recorder) []Interceptor {
	return []Interceptor{r.Lifeline(), r.Commands(), r, r.IDs(), r.Tracker()}
}

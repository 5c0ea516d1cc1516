// Package intercept holds everything ACP-aware that happens to a frame in
// flight: observing, rewriting, answering or holding it. The proxy calls it
// through proxy.Hook; each Interceptor claims the few frames it cares about by
// their peeked envelope and lets the rest pass untouched.
package intercept

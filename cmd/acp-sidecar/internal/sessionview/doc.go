// Package sessionview gathers what the record says of one session, once,
// for every reader of it: `show` prints it on a terminal, `handoff` renders
// its kept turns, and `ui` draws it in a browser. It owns that gathering:
// the session and its turns read together, a running turn no sidecar serves
// any longer shown as interrupted, the config layers lined up by option id,
// an agent's command shortened for display.
//
// It only reads the store, through state.Store, and never writes it: a turn
// it settles is changed in the caller's copy alone. It writes to no
// terminal or page: each reader lays out what it gets. It knows neither ACP
// frames nor how the store is reached.
package sessionview

// Package ui is `acp-sidecar ui`: a local web view of the record (the
// sessions, each session's config layers, its native sessions drawn as a
// timeline with the handoff each was given, its turns), rendered on the
// server from the store the CLI opened, and live: a page follows the
// store's change feed over Server-Sent Events. docs/ui.md is its manual.
//
// It owns the pages and their guard (token, Host, Origin, CSRF, CSP) and
// reads the record through state.Store alone, with the data gathering it
// shares with `show` in internal/sessionview. It must not know how the
// store is reached (socket, badger or PostgreSQL), nor write to it but to
// delete a session a page asked to delete. Templates, CSS and the one
// script are embedded; nothing is fetched at run time.
package ui

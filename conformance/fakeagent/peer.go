package fakeagent

import (
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// peer is what the client said of itself in initialize, which a turn reads
// to know what it may ask of the client: the SDK hands the agent its
// capabilities (Initialize), and the stdin reader reads the one the SDK's
// type lacks, subagents, from the raw params before the SDK sees them, so
// before any prompt.
type peer struct {
	mu        sync.Mutex
	caps      acp.ClientCapabilities
	subagents bool // clientCapabilities.subagents is an object (subagentsAdvertised)
}

// setCaps records the capabilities of the client's initialize.
func (p *peer) setCaps(caps acp.ClientCapabilities) {
	p.mu.Lock()
	p.caps = caps
	p.mu.Unlock()
}

// setSubagents records whether the client's initialize advertised
// subagents.
func (p *peer) setSubagents(ok bool) {
	p.mu.Lock()
	p.subagents = ok
	p.mu.Unlock()
}

// abilities is the client's file system and whether it takes subagents.
func (p *peer) abilities() (acp.FileSystemCapabilities, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caps.Fs, p.subagents
}

package intercept

import "github.com/acp-sidecar/acp-sidecar/intercept/ledger"

// How the stages stand to chunks (see Chain). The sidecar's commands,
// the emulation and the request tracker never claim one; the record does
// while a turn runs, and takes it in one call; the lifeline and the id
// mapping claim one only while their shared gate is open. TestChunkScopes
// and TestChunkGate hold them to it.
//
// A ChunkGate is open while a stage gated by it may claim a chunk: while
// the replay of a native load is kept from the client, or while some
// session id may need splicing. They are the two conditions the lifeline's
// and the id mapping's Claims test for a chunk.
type ChunkGate struct{ led *ledger.Ledger }

func (g *ChunkGate) open() bool { return g.led.Hushing() || g.led.Splicing() }

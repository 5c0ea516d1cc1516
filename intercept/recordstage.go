package intercept

import (
	"context"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// recordStage is the record in the chain: what it claims is the record's
// to say (record.Recorder.Claims), and it takes a chunk in one call.
type recordStage struct {
	rec  *record.Recorder
	rest restOfChain
}

// NewRecordStage hands the frames the record reads to rec.
func NewRecordStage(rec *record.Recorder) Interceptor { return &recordStage{rec: rec} }

func (st *recordStage) goOnWith(rest restOfChain) { st.rest = rest }

// Claims is the record's.
func (st *recordStage) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return st.rec.Claims(dir, env)
}

// Intercept hands the frame to the record. A frame the record holds
// until it is written (a response that completes a config change or a
// turn, a v2 turn's end) then meets the stages after this one, as it
// would have unheld: the ids stage gives a turn's end the client's session
// id, and names a listed session by it. What the sidecar adds after it
// (its command list, the pickers' reports) is its own, made in the
// client's ids and dialect, and meets no stage.
func (st *recordStage) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	v, err := st.rec.Intercept(ctx, f)
	if v.Do != proxy.Hold || st.rest == nil {
		return v, err
	}
	// The request an agent's answer answers was taken out of the ledger
	// when the answer came (ledger.WithAnswered); the stages after this
	// one read it when the answer goes on.
	q, answered := ledger.AnsweredOf(ctx)
	dir, later := f.Dir, v.Later
	v.Later = func(ctx context.Context) proxy.Decision {
		lines := later(ctx).Forward
		if len(lines) == 0 {
			return proxy.Decision{}
		}
		if answered {
			ctx = ledger.WithAnswered(ctx, q)
		}
		out := st.rest(ctx, dir, lines[0])
		out.Forward = append(out.Forward, lines[1:]...)
		return out
	}
	return v, err
}

// ChunkPolicy: the record takes a chunk in one call (record.Text.TakeChunk).
func (st *recordStage) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Take: st.rec.Text().TakeChunk} }

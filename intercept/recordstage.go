package intercept

import (
	"context"

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

// Intercept hands the frame to the record. A notification the record holds
// until it is written (a v2 turn's end) then meets the stages after this
// one, as it would have unheld: the ids stage gives it the client's session
// id.
func (st *recordStage) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	v, err := st.rec.Intercept(ctx, f)
	if v.Do != proxy.Hold || f.Env.Kind != proxy.KindNotification || st.rest == nil {
		return v, err
	}
	dir, later := f.Dir, v.Later
	v.Later = func(ctx context.Context) proxy.Decision {
		var out proxy.Decision
		for _, l := range later(ctx).Forward {
			d := st.rest(ctx, dir, l)
			out.Forward = append(out.Forward, d.Forward...)
			out.Answer = append(out.Answer, d.Answer...)
		}
		return out
	}
	return v, err
}

// ChunkPolicy: the record takes a chunk in one call (record.Text.TakeChunk).
func (st *recordStage) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Take: st.rec.Text().TakeChunk} }

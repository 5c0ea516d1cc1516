package intercept

import (
	"context"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// recordStage is the record in the chain: what it claims is the record's
// to say (record.Recorder.Claims), and it takes a chunk in one call.
type recordStage struct{ rec *record.Recorder }

// NewRecordStage hands the frames the record reads to rec.
func NewRecordStage(rec *record.Recorder) Interceptor { return recordStage{rec: rec} }

// Claims is the record's.
func (st recordStage) Claims(dir proxy.Direction, env *proxy.Envelope) bool {
	return st.rec.Claims(dir, env)
}

// Intercept hands the frame to the record.
func (st recordStage) Intercept(ctx context.Context, f *proxy.Frame) (proxy.Verdict, error) {
	return st.rec.Intercept(ctx, f)
}

// ChunkPolicy: the record takes a chunk in one call (record.Text.TakeChunk).
func (st recordStage) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Take: st.rec.Text().TakeChunk} }

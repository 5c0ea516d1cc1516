package intercept_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// fiveFields are the calls of a five-field restore against the fake agent:
// a fresh session, then model, mode and the two other options.
var fiveFields = [][2]string{{"model", "deep-3"}, {"mode", "plan"}, {"effort", "max"}, {"verbosity", "verbose"}}

// BenchmarkRestore measures what the sidecar adds to a five-field restore
// (session/new and four set calls) on top of the agent's own round trips:
// the same five calls made by a client straight to the agent are the
// baseline, run in the same loop.
func BenchmarkRestore(b *testing.B) {
	ctx := context.Background()
	direct := directClient(b)
	r := newRig(b, intercept.Config{})
	sess, err := r.client.NewSession(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, kv := range fiveFields {
		if _, err := r.client.SetConfigOption(ctx, sess.SessionId, kv[0], kv[1]); err != nil {
			b.Fatal(err)
		}
	}
	var base, via time.Duration
	for b.Loop() {
		start := time.Now()
		s, err := direct.NewSession(ctx, "/tmp")
		if err != nil {
			b.Fatal(err)
		}
		for _, kv := range fiveFields {
			if _, err := direct.SetConfigOption(ctx, s.SessionId, kv[0], kv[1]); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(start)
		start = time.Now()
		if _, err := r.client.CallRaw(ctx, wire.ExtReset, map[string]any{"sessionId": sess.SessionId}); err != nil {
			b.Fatal(err)
		}
		via += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(base.Microseconds())/n/1000, "ms-direct")
	b.ReportMetric(float64(via.Microseconds())/n/1000, "ms-sidecar")
	b.ReportMetric(float64((via-base).Microseconds())/n/1000, "ms-added")
}

// directClient talks to a fake agent with no sidecar between them.
func directClient(b *testing.B) *acpclient.Client {
	ctx, cancel := context.WithCancel(context.Background())
	aInR, aInW := io.Pipe()
	aOutR, aOutW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The same call log as the rig's agent writes, so both do the same work.
		fakeagent.Main(ctx, []string{"-call-log", b.TempDir() + "/calls.jsonl"}, aInR, aOutW, io.Discard)
		aOutW.Close()
	}()
	c := acpclient.Connect(aOutR, aInW, acpclient.Options{})
	b.Cleanup(func() {
		aInW.Close()
		<-done
		cancel()
	})
	if _, err := c.Initialize(ctx); err != nil {
		b.Fatal(err)
	}
	return c
}

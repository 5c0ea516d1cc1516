package intercept_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// rig is a sidecar assembled in process: the fake agent over pipes, the
// relay with the interceptors, and a scripted client. Processes and their
// shutdown are the CLI's tests' business; these tests are about what the
// interceptors do to the conversation and the record.
type rig struct {
	client   *acpclient.Client
	store    state.Store
	recorder *intercept.Core
	relay    *proxy.Relay
	callLog  string

	agents   sync.WaitGroup
	restarts atomic.Int32
	exited   chan time.Time // when each agent's output ended, for the recovery benchmark
}

// rigOptions are the rig's own knobs.
type rigOptions struct {
	restart bool // start the fake agent again when it exits, as the CLI's supervisor does
}

func newRig(t testing.TB, cfg intercept.Config, agentArgs ...string) *rig {
	return newRigWith(t, rigOptions{}, cfg, agentArgs...)
}

func newRigWith(t testing.TB, opts rigOptions, cfg intercept.Config, agentArgs ...string) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{callLog: t.TempDir() + "/calls.jsonl", exited: make(chan time.Time, 64)}
	if cfg.Store == nil {
		cfg.Store = state.NewMemory()
	}
	r.store = cfg.Store
	cfg.Agent = []string{"fakeagent"}
	cInR, cInW := io.Pipe()
	cOutR, cOutW := io.Pipe()

	startAgent := func() (io.WriteCloser, io.Reader) {
		aInR, aInW := io.Pipe()
		aOutR, aOutW := io.Pipe()
		r.agents.Add(1)
		go func() {
			defer r.agents.Done()
			fakeagent.Main(ctx, append([]string{"-call-log", r.callLog}, agentArgs...), aInR, aOutW, io.Discard)
			aOutW.Close()
			aInR.Close()
		}()
		return aInW, aOutR
	}
	aIn, aOut := startAgent()
	r.recorder = intercept.New(cfg)
	pcfg := proxy.Config{
		ClientIn: cInR, ClientOut: cOutW, AgentIn: aIn, AgentOut: aOut,
		Hook: intercept.NewChain(nil, r.recorder.StageList()...).WithAnswers(r.recorder.Ledger(), true),
	}
	if opts.restart {
		pcfg.OnAgentEnd = r.recorder.Agent().End
		pcfg.OnAgentExit = func(ctx context.Context) (io.Writer, io.Reader, bool) {
			r.exited <- time.Now()
			r.recorder.Agent().Gone(ctx, "exit status 3")
			in, out := startAgent()
			r.restarts.Add(1)
			return in, out, true
		}
		// As the sidecar's supervisor does: the restarted agent is
		// initialized once the relay has its stdin in place. Started from
		// OnAgentExit, the initialize could go to the dead agent's stdin
		// and fail with ErrAgentGone (seen once in CI).
		pcfg.OnAgentStarted = func() {
			r.agents.Add(1)
			go func() {
				defer r.agents.Done()
				if err := r.recorder.Agent().Back(ctx); err != nil {
					t.Errorf("initialize the restarted agent: %v", err)
				}
			}()
		}
	}
	pcfg.Strict = true
	r.relay = proxy.NewRelay(pcfg)
	r.recorder.Bind(r.relay)
	r.recorder.Start(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.relay.Run(ctx) }()
	r.client = acpclient.Connect(cOutR, cInW, acpclient.Options{})
	t.Cleanup(func() {
		cInW.Close()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v", err)
		}
		cOutW.Close()
		r.agents.Wait()
		closeCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		if err := r.recorder.Close(closeCtx); err != nil {
			t.Errorf("recorder: %v", err)
		}
		cancel()
	})
	if _, err := r.client.Initialize(t.Context()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return r
}

// calls lists the methods the fake agent received, in order.
func (r *rig) calls(t testing.TB) []string {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(r.callLog)
	if err != nil {
		t.Fatalf("read call log: %v", err)
	}
	var out []string
	for _, c := range calls {
		s := c.Method
		var p struct {
			ConfigID string `json:"configId"`
			Value    any    `json:"value"`
			ModeID   string `json:"modeId"`
			ModelID  string `json:"modelId"`
		}
		jsonUnmarshal(c.Params, &p)
		switch {
		case p.ConfigID != "":
			s += " " + p.ConfigID + "=" + toString(p.Value)
		case p.ModeID != "":
			s += " " + p.ModeID
		case p.ModelID != "":
			s += " " + p.ModelID
		}
		out = append(out, s)
	}
	return out
}

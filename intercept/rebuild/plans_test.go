package rebuild

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/google/go-cmp/cmp"
	"github.com/sourcegraph/jsonrpc2"
)

// forksAtMessage is an agent that rewinds natively: it forks a session at
// one of its messages (life.Habits.ForksAtMessage).
var forksAtMessage = life.Caps{Fork: true, Habits: life.Habits{ForksAtMessage: true}}

// conversation is three turns on native-0, each with the message id the
// agent gave its answer, as a native rewind needs them.
func conversation() []state.Turn {
	var turns []state.Turn
	for i, p := range []string{"first question", "second question", "third question"} {
		t := turn(i+1, "native-0", p)
		t.MessageID = fmt.Sprintf("m%d", i+1)
		turns = append(turns, t)
	}
	return turns
}

// rejects answers the calls of one method with an agent's error, as an
// agent that lost a session or cannot fork at a message does.
func rejects(method string) func(call) error {
	return func(c call) error {
		if c.Method == method {
			return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "the agent could not do it"}
		}
		return nil
	}
}

// TestSettleRecordsNatives: each plan that gets a native session records
// it (state.Native) with the plan's event and the path the agent gave it;
// a reopen on another host than the session's last is a failover; a plan
// that keeps the native session it has records none.
func TestSettleRecordsNatives(t *testing.T) {
	for _, tt := range []struct {
		name     string
		opts     options
		lastHost string // the host the session's last native session was made on
		stale    bool   // the session's native session died with the agent
		fail     string // a method the agent rejects
		plan     func() Plan
		want     *state.Native // its ID "" for a fresh id; nil for no entry
	}{
		{name: "reset", opts: options{host: "host-a"}, lastHost: "host-a",
			plan: func() Plan { return Reset{Session: "s1"} }, want: &state.Native{Event: state.MadeReset, Path: "new"}},
		{name: "rollback", plan: func() Plan { return &Rollback{Session: "s1", Keep: 1} },
			want: &state.Native{Event: state.MadeRewind, Path: "new"}},
		{name: "rollback the agent forks", opts: options{caps: forksAtMessage},
			plan: func() Plan { return &Rollback{Session: "s1", Keep: 2} }, want: &state.Native{Event: state.MadeRewind, Path: "fork"}},
		{name: "recovery by resume", opts: options{caps: life.Caps{Resume: true, Load: true}}, stale: true,
			plan: func() Plan { return Recover{Session: "s1"} }, want: &state.Native{ID: "native-0", Event: state.MadeCrash, Path: "resume"}},
		{name: "recovery by load", opts: options{caps: life.Caps{Load: true}}, stale: true,
			plan: func() Plan { return Recover{Session: "s1"} }, want: &state.Native{ID: "native-0", Event: state.MadeCrash, Path: "load"}},
		{name: "recovery by load when the resume fails", opts: options{caps: life.Caps{Resume: true, Load: true}}, stale: true, fail: wire.SessionResume,
			plan: func() Plan { return Recover{Session: "s1"} }, want: &state.Native{ID: "native-0", Event: state.MadeCrash, Path: "load"}},
		{name: "recovery by a new session", stale: true,
			plan: func() Plan { return Recover{Session: "s1"} }, want: &state.Native{Event: state.MadeCrash, Path: "new"}},
		{name: "reopen on the same host", opts: options{host: "host-a", caps: life.Caps{Resume: true}}, lastHost: "host-a",
			plan: func() Plan { return &Reopen{Session: "s1", Method: wire.SessionResume, History: false} }, want: &state.Native{ID: "native-0", Event: state.MadeReopen, Path: "resume"}},
		{name: "reopen on another host", opts: options{host: "host-b", caps: life.Caps{Load: true}}, lastHost: "host-a",
			plan: func() Plan { return &Reopen{Session: "s1", Method: wire.SessionLoad, History: true} }, want: &state.Native{ID: "native-0", Event: state.MadeFailover, Path: "load"}},
		{name: "reopen on another host by a new session", opts: options{host: "host-b"}, lastHost: "host-a",
			plan: func() Plan { return &Reopen{Session: "s1", Method: wire.SessionResume, History: false} }, want: &state.Native{Event: state.MadeFailover, Path: "new"}},
		{name: "reopen where the last host is unknown", opts: options{host: "host-b", caps: life.Caps{Resume: true}},
			plan: func() Plan { return &Reopen{Session: "s1", Method: wire.SessionResume, History: false} }, want: &state.Native{ID: "native-0", Event: state.MadeReopen, Path: "resume"}},
		{name: "restore-original keeps its native session", opts: options{host: "host-a"}, lastHost: "host-a",
			plan: func() Plan { return RestoreOriginal{Session: "s1"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			s := h.session("s1", "native-0", configured(), conversation()...)
			s.Rec.Natives[0].Host = tt.lastHost
			s.Rec.Original = h.agent.configOf(defaults()) // restore-original has work to do
			h.seed(s)
			if tt.stale {
				h.kill() // the death the recovery follows
				h.life.Back()
			}
			if tt.fail != "" {
				h.agent.script(rejects(tt.fail), nil)
			}

			res, err := h.rb.Run(h.ctx(), tt.plan())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			rec := h.stored("s1")
			if tt.want == nil {
				if diff := cmp.Diff(s.Rec.Natives, rec.Natives); diff != "" || rec.NativeID != "native-0" {
					t.Errorf("a plan that kept its native session recorded natives (-before +after):\n%s", diff)
				}
				return
			}
			want := *tt.want
			want.Host, want.At = tt.opts.host, clock
			if want.ID == "" {
				want.ID = res.NativeSessionID
				if want.ID == "" || want.ID == "native-0" {
					t.Fatalf("the plan reported native session %q, want a fresh one", want.ID)
				}
			}
			if len(rec.Natives) != 2 {
				t.Fatalf("natives %+v, want the seeded one and one more", rec.Natives)
			}
			if diff := cmp.Diff(want, rec.Natives[1]); diff != "" {
				t.Errorf("the native session recorded (-want +got):\n%s", diff)
			}
			wantHistory := []string{"native-0"}
			if want.ID != "native-0" {
				wantHistory = append(wantHistory, want.ID)
			}
			if diff := cmp.Diff(wantHistory, rec.NativeHistory); diff != "" || rec.NativeID != want.ID {
				t.Errorf("native %q, history (-want +got):\n%s", rec.NativeID, diff)
			}
		})
	}
}

// TestRollbackPlan: a rollback marks the turns after the kept ones
// rolled_back, in the record's memory and in the store, and hands the
// kept turns to the fresh native session with its next prompt; an agent
// that forks at the last kept message keeps them itself, and needs none.
func TestRollbackPlan(t *testing.T) {
	for _, tt := range []struct {
		name    string
		caps    life.Caps
		fail    string // a method the agent rejects
		keep    int
		calls   []string // the agent's calls up to the first restore step
		path    string
		handoff bool // the next prompt carries the kept turns
	}{
		{name: "a fresh session", keep: 1, calls: []string{"session/new"}, path: "new", handoff: true},
		{name: "keep none", keep: 0, calls: []string{"session/new"}, path: "new"},
		{name: "the agent forks at the last kept message", caps: forksAtMessage, keep: 2, calls: []string{"session/fork"}, path: "fork"},
		{name: "a fork that fails falls back to a fresh session", caps: forksAtMessage, fail: wire.SessionFork, keep: 2,
			calls: []string{"session/fork", "session/new"}, path: "new", handoff: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{caps: tt.caps})
			h.seed(h.session("s1", "native-0", configured(), conversation()...))
			if tt.fail != "" {
				h.agent.script(rejects(tt.fail), nil)
			}
			p := &Rollback{Session: "s1", Keep: tt.keep}
			res, err := h.rb.Run(h.ctx(), p)
			rep := p.Report
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			prompts := []string{"first question", "second question", "third question"}
			if diff := cmp.Diff(RollbackReport{Kept: tt.keep, RolledBack: prompts[tt.keep:]}, rep); diff != "" {
				t.Errorf("rollback report (-want +got):\n%s", diff)
			}

			calls := h.agent.all()
			if len(calls) < len(tt.calls) {
				t.Fatalf("agent calls %v, want them to begin with %v", calls, tt.calls)
			}
			var first []string
			for _, c := range calls[:len(tt.calls)] {
				first = append(first, c.Method)
			}
			if diff := cmp.Diff(tt.calls, first); diff != "" {
				t.Errorf("agent calls (-want +got):\n%s", diff)
			}
			if tt.caps.Fork {
				fork := calls[0]
				if at := wire.ForkAtOf(fork.Params); at != fmt.Sprintf("m%d", tt.keep) || !strings.Contains(string(fork.Params), `"sessionId":"native-0"`) {
					t.Errorf("session/fork params %s, want native-0 forked at m%d", fork.Params, tt.keep)
				}
			}

			wantStatus := make([]state.TurnStatus, 3)
			for i := range wantStatus {
				wantStatus[i] = state.TurnCompleted
				if i >= tt.keep {
					wantStatus[i] = state.TurnRolledBack
				}
			}
			statuses := func(turns []state.Turn) []state.TurnStatus {
				var out []state.TurnStatus
				for _, t := range turns {
					out = append(out, t.Status)
				}
				return out
			}
			if diff := cmp.Diff(wantStatus, statuses(h.storedTurns("s1"))); diff != "" {
				t.Errorf("stored turn statuses (-want +got):\n%s", diff)
			}
			var pending bool
			var inMemory []state.TurnStatus
			h.inRecord("s1", func(s *record.Session) { pending, inMemory = s.Rec.HandoffPending, statuses(s.Turns) })
			if diff := cmp.Diff(wantStatus, inMemory); diff != "" {
				t.Errorf("turn statuses in the record's memory (-want +got):\n%s", diff)
			}

			rec := h.stored("s1")
			if rec.HandoffPending != tt.handoff || pending != tt.handoff {
				t.Errorf("handoff pending: stored %v, in memory %v; want %v", rec.HandoffPending, pending, tt.handoff)
			}
			text, armed := h.armed("s1")
			if armed != tt.handoff {
				t.Errorf("handoff armed %v, want %v", armed, tt.handoff)
			}
			for i, p := range prompts {
				if kept := i < tt.keep; armed && strings.Contains(text, p) != kept {
					t.Errorf("the handoff carries %q: %v, want %v:\n%s", p, !kept, kept, text)
				}
			}
			if last := rec.LastNative(); last == nil || last.Event != state.MadeRewind || last.Path != tt.path || last.ID != res.NativeSessionID {
				t.Errorf("last native %+v, want a rewind by %s to %q", last, tt.path, res.NativeSessionID)
			}
			if diff := cmp.Diff(configured(), ConfigMap(rec.Live)); diff != "" || res.Blocked {
				t.Errorf("config after the rollback: blocked %v (-want +got):\n%s", res.Blocked, diff)
			}
		})
	}
}

// TestRetryMapsTheNativeItBringsBack: the agent died under the restore on
// a session/new the recovery fell back to; the retry resumes the session's
// own native session, and the client's id must lead there, where the
// record says it runs.
func TestRetryMapsTheNativeItBringsBack(t *testing.T) {
	h := newHarness(t, options{caps: life.Caps{Resume: true}})
	ctx := h.ctx()
	h.seed(h.session("s1", "native-0", configured()))
	h.kill()
	h.life.Back()
	first := h.life.Gen()
	h.agent.script(func(c call) error {
		switch {
		case c.Life == first && c.Method == wire.SessionResume:
			return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "busy, try later"}
		case c.Life == first && c.String() == "session/set_config_option a-mode=plan":
			h.kill()
			return fmt.Errorf("call %s: %w", c.Method, proxy.ErrAgentGone)
		}
		return nil
	}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := h.rb.Run(ctx, Recover{Session: "s1"})
		done <- err
	}()
	h.awaitGaveUp(ctx)
	h.life.Back()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("recovery: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the recovery never ended")
	}
	rec := h.stored("s1")
	if last := rec.LastNative(); last == nil || last.Path != "resume" || rec.NativeID != "native-0" {
		t.Fatalf("recorded native %q, last %+v; want native-0 resumed", rec.NativeID, last)
	}
	if got := h.led.NativeOf("s1"); got != rec.NativeID {
		t.Errorf("the ledger leads the client's id to %q, the record says it runs on %q", got, rec.NativeID)
	}
}

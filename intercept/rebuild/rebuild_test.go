package rebuild

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
	"github.com/google/go-cmp/cmp"
	"github.com/sourcegraph/jsonrpc2"
)

// configured is a session the client moved off every default: a model,
// an effort only that model offers, a mode and a tone.
func configured() map[string]string {
	return map[string]string{"zz-model": "deep-3", "a-mode": "plan", "effort": "max", "tone": "warm"}
}

// restoreOf is the agent's side of restoring configured() on a fresh
// session/new, in the order DESIGN.md fixes: the model (by category,
// though its id sorts last), the mode, then effort and tone by id.
var restoreOf = []string{
	"session/new",
	"session/set_config_option zz-model=deep-3",
	"session/set_config_option a-mode=plan",
	"session/set_config_option effort=max",
	"session/set_config_option tone=warm",
}

func TestRunRefusesABusySession(t *testing.T) {
	h := newHarness(t, options{})
	h.seed(h.session("s1", "native-0", configured()))
	end, _, ok := begin(h.led, "s1", "rollback")
	if !ok {
		t.Fatal("begin on an idle session refused")
	}
	defer end()
	before := h.stored("s1")

	_, err := h.rb.Run(h.ctx(), Reset{Session: "s1"})
	if codeOf(err) != proxy.CodeBusy || !strings.Contains(err.Error(), "rollback") {
		t.Fatalf("reset on a session a rollback holds: err %v (code %d), want code %d naming the rollback", err, codeOf(err), proxy.CodeBusy)
	}
	if calls := h.agent.all(); len(calls) != 0 {
		t.Errorf("the refused reset called the agent: %v", calls)
	}
	if got := h.led.BusyWith("s1"); got != "rollback" {
		t.Errorf("after the refusal the session is busy with %q, want the holder's %q: the refused plan ended a mark it did not make", got, "rollback")
	}
	if diff := cmp.Diff(before, h.stored("s1")); diff != "" {
		t.Errorf("the refused reset changed the record (-before +after):\n%s", diff)
	}
}

// TestRunSharedPlan runs the restore after the agent's own session/load
// (openRestore, a Shared plan under a held response) the way the record starts it,
// on the record's goroutine: under a holder it runs anyway and leaves the
// holder's mark alone, and on a free session it marks the session itself
// throughout and ends its mark.
func TestRunSharedPlan(t *testing.T) {
	for _, tt := range []struct {
		name, holder string
		wantBusy     string // what the session is busy with during the calls
	}{
		{name: "under a holder", holder: "reopen", wantBusy: "reopen"},
		{name: "on a free session", wantBusy: "restore after session/load"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{})
			ctx := h.ctx()
			h.seed(h.session("s1", "native-0", configured()))
			h.agent.adopt("native-0", defaults()) // the agent's own load dropped the config
			if tt.holder != "" {
				end, _, ok := begin(h.led, "s1", tt.holder)
				if !ok {
					t.Fatal("begin on an idle session refused")
				}
				defer end()
			}
			var mu sync.Mutex
			var busy []string
			var hushed []ledger.Hush
			h.agent.script(func(call) error {
				mu.Lock()
				defer mu.Unlock()
				busy = append(busy, h.led.BusyWith("s1"))
				hushed = append(hushed, h.led.HushOf("native-0"))
				return nil
			}, nil)

			result, err := json.Marshal(h.agent.config(defaults()))
			if err != nil {
				t.Fatal(err)
			}
			line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "result": json.RawMessage(result)})
			if err != nil {
				t.Fatal(err)
			}
			released := make(chan [][]byte, 1)
			ev := record.Event{Dir: proxy.AgentToClient, Raw: line, Req: &record.Request{ID: "7", Method: wire.SessionLoad, SID: "s1"},
				Release: func(lines ...[]byte) { released <- lines }}
			want := h.agent.configOf(configured())
			err = h.rec.Do(ctx, func(ctx context.Context) {
				s := h.rec.Session("s1")
				s.Rec.Live = h.agent.configOf(defaults()) // as the load's result reported it
				h.rb.FollowUps().Opened(ctx, s, ev.Req, ev, result, want)
			})
			if err != nil {
				t.Fatalf("start the restore after the load: %v", err)
			}
			var lines [][]byte
			select {
			case lines = <-released:
			case <-ctx.Done():
				t.Fatal("the held load response was never let go")
			}
			h.close() // waits for the plan's goroutine, and with it its end of the mark

			wantCalls := restoreOf[1:] // the session it has: no session/new
			if diff := cmp.Diff(wantCalls, h.agent.received(0)); diff != "" {
				t.Errorf("agent calls (-want +got):\n%s", diff)
			}
			mu.Lock()
			for i, b := range busy {
				if b != tt.wantBusy {
					t.Errorf("during call %d the session was busy with %q, want %q", i, b, tt.wantBusy)
				}
				if hushed[i] != ledger.HushConfig {
					t.Errorf("during call %d the agent's config reports were hushed %d, want %d: they would reach the client after the held response", i, hushed[i], ledger.HushConfig)
				}
			}
			mu.Unlock()
			if got := h.led.BusyWith("s1"); got != tt.holder {
				t.Errorf("after the plan the session is busy with %q, want %q", got, tt.holder)
			}
			if len(lines) == 0 {
				t.Fatal("the response was let go with no lines")
			}
			var res struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(lines[0], &res); err != nil || res.ID != 7 {
				t.Fatalf("first line let go is not the load's response: %s (%v)", lines[0], err)
			}
			if diff := cmp.Diff(configured(), ConfigMap(wire.ConfigFromResult(res.Result))); diff != "" {
				t.Errorf("the load's response names the config (-want +got):\n%s", diff)
			}
			if rec := h.stored("s1"); rec.Blocked != nil || !cmp.Equal(configured(), ConfigMap(rec.Live)) {
				t.Errorf("record after the restore: blocked %+v, live %v; want unblocked on %v", rec.Blocked, ConfigMap(rec.Live), configured())
			}
		})
	}
}

// TestRunReadRefusal: a plan whose read refuses (or finds nothing to do)
// calls no agent and leaves the record and the ledger as they were, its
// busy mark included.
func TestRunReadRefusal(t *testing.T) {
	running := func(s *record.Session) {
		s.Turns = append(s.Turns, state.Turn{Index: 3, PromptText: "still going", NativeID: "native-0", Status: state.TurnRunning})
		s.Turn = &s.Turns[len(s.Turns)-1]
	}
	for _, tt := range []struct {
		name  string
		setup func(s *record.Session)
		plan  func() Plan
		code  int // 0: no error
	}{
		{name: "reset while a turn runs", setup: running, plan: func() Plan { return Reset{Session: "s1"} }, code: proxy.CodeBusy},
		{name: "reset of a session the record does not know", plan: func() Plan { return Reset{Session: "nobody"} }, code: proxy.CodeInvalidParams},
		{name: "rollback while a turn runs", setup: running, plan: func() Plan { return &Rollback{Session: "s1", Keep: 1} }, code: proxy.CodeBusy},
		{name: "rollback past the conversation", plan: func() Plan { return &Rollback{Session: "s1", Keep: 3} }, code: proxy.CodeInvalidParams},
		{name: "rollback to a negative count", plan: func() Plan { return &Rollback{Session: "s1", Keep: -1} }, code: proxy.CodeInvalidParams},
		{name: "restore-original without an original", setup: func(s *record.Session) { s.Rec.Original = nil },
			plan: func() Plan { return RestoreOriginal{Session: "s1"} }, code: proxy.CodeInvalidParams},
		{name: "recovery of a session that is not stale", plan: func() Plan { return Recover{Session: "s1"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{caps: life.Caps{Resume: true, Load: true}})
			s := h.session("s1", "native-0", configured(), turn(1, "native-0", "first"), turn(2, "native-0", "second"))
			if tt.setup != nil {
				tt.setup(s)
			}
			h.seed(s)
			before, turns := h.stored("s1"), h.storedTurns("s1")

			plan := tt.plan()
			_, err := h.rb.Run(h.ctx(), plan)
			if codeOf(err) != tt.code {
				t.Fatalf("Run: err %v (code %d), want code %d", err, codeOf(err), tt.code)
			}
			if calls := h.agent.all(); len(calls) != 0 {
				t.Errorf("the plan called the agent: %v", calls)
			}
			if diff := cmp.Diff(before, h.stored("s1")); diff != "" {
				t.Errorf("the record changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(turns, h.storedTurns("s1")); diff != "" {
				t.Errorf("the turns changed (-before +after):\n%s", diff)
			}
			if rb, ok := plan.(*Rollback); ok && !cmp.Equal(RollbackReport{}, rb.Report) {
				diff := cmp.Diff(RollbackReport{}, rb.Report)
				t.Errorf("the rollback report was filled in (-want +got):\n%s", diff)
			}
			if got := h.led.BusyWith("s1"); got != "" {
				t.Errorf("the session is left busy with %q", got)
			}
			if b := h.led.BlockedOf("s1"); b != nil {
				t.Errorf("the session is left blocked: %+v", b)
			}
			if owed := h.owed("s1"); owed != nil {
				t.Errorf("the session is left owing %v", owed)
			}
			if got := h.led.NativeOf("s1"); got != "native-0" {
				t.Errorf("the session now runs on %q, want native-0", got)
			}
		})
	}
}

// TestRestoreOrder: a reset restores the model, then the mode, then the
// other options by id, each only when the fresh session is not at it
// already, and tells the client under its own id.
func TestRestoreOrder(t *testing.T) {
	for _, tt := range []struct {
		name         string
		legacyModes  bool
		live         map[string]string
		calls        []string
		restored     []string
		toldTheState []string
	}{
		{
			name: "options", live: configured(), calls: restoreOf,
			restored: []string{"model", "mode", "effort", "tone"}, toldTheState: []string{"s1 config_option_update"},
		},
		{
			name: "the mode by the legacy picker", legacyModes: true, live: configured(),
			calls: []string{"session/new", "session/set_config_option zz-model=deep-3", "session/set_mode plan",
				"session/set_config_option effort=max", "session/set_config_option tone=warm"},
			restored: []string{"model", "mode", "effort", "tone"}, toldTheState: []string{"s1 config_option_update", "s1 current_mode_update"},
		},
		{
			name: "fields at their value already", live: map[string]string{"zz-model": "deep-3", "a-mode": "ask", "effort": "low", "tone": "plain"},
			calls: []string{"session/new", "session/set_config_option zz-model=deep-3"}, restored: []string{"model"},
			toldTheState: []string{"s1 config_option_update"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{legacyModes: tt.legacyModes})
			h.seed(h.session("s1", "native-0", tt.live))
			rep, err := h.rb.Run(h.ctx(), Reset{Session: "s1"})
			if err != nil {
				t.Fatalf("reset: %v", err)
			}
			if diff := cmp.Diff(tt.calls, h.agent.received(0)); diff != "" {
				t.Errorf("agent calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.restored, rep.Restored); diff != "" || rep.Blocked || len(rep.Failed) > 0 {
				t.Errorf("report: blocked %v, failed %v, restored (-want +got):\n%s", rep.Blocked, rep.Failed, diff)
			}
			want := ConfigMap(h.agent.configOf(tt.live))
			rec := h.stored("s1")
			if diff := cmp.Diff(want, ConfigMap(rec.Live)); diff != "" || rec.Blocked != nil {
				t.Errorf("recorded: blocked %+v, live (-want +got):\n%s", rec.Blocked, diff)
			}
			if diff := cmp.Diff(tt.toldTheState, updates(h.agent.lines())); diff != "" {
				t.Errorf("what the client was told (-want +got):\n%s", diff)
			}
			if rep.NativeSessionID == "native-0" || rec.NativeID != rep.NativeSessionID || h.led.NativeOf("s1") != rep.NativeSessionID {
				t.Errorf("native session: report %q, record %q, ledger %q; want one fresh id", rep.NativeSessionID, rec.NativeID, h.led.NativeOf("s1"))
			}
		})
	}
}

// TestRestoreFailsClosed: a value the fresh catalog does not offer is
// never sent, and a call the agent rejects stops nothing after it; either
// blocks the session in the ledger and the record, and leaves the whole
// target owed, while live keeps only what the agent reported.
func TestRestoreFailsClosed(t *testing.T) {
	sharp := configured()
	sharp["tone"] = "sharp" // an earlier version of the agent offered it
	fastMax := configured()
	fastMax["zz-model"] = "fast-1" // the effort was accepted once, and fast-1 no longer offers max
	for _, tt := range []struct {
		name   string
		live   map[string]string
		reject string // the option whose set_config_option the agent rejects
		calls  []string
		failed []string
		live2  map[string]string // what the agent holds after the restore
	}{
		{
			name: "a value the fresh catalog does not offer", live: sharp,
			calls:  restoreOf[:4],
			failed: []string{"tone"},
			live2:  map[string]string{"zz-model": "deep-3", "a-mode": "plan", "effort": "max", "tone": "plain"},
		},
		{
			name: "a value the catalog offers under another model only", live: fastMax,
			calls:  []string{"session/new", "session/set_config_option a-mode=plan", "session/set_config_option tone=warm"},
			failed: []string{"effort"},
			live2:  map[string]string{"zz-model": "fast-1", "a-mode": "plan", "effort": "low", "tone": "warm"},
		},
		{
			name: "a call the agent rejects", live: configured(), reject: "effort",
			calls:  restoreOf,
			failed: []string{"effort"},
			live2:  map[string]string{"zz-model": "deep-3", "a-mode": "plan", "effort": "low", "tone": "warm"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{})
			s := h.session("s1", "native-0", tt.live)
			h.seed(s)
			target := ConfigMap(s.Rec.Live)
			h.agent.script(func(c call) error {
				if tt.reject != "" && strings.Contains(c.String(), " "+tt.reject+"=") {
					return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "the provider refused"}
				}
				return nil
			}, nil)

			rep, err := h.rb.Run(h.ctx(), Reset{Session: "s1"})
			if err != nil {
				t.Fatalf("reset: %v", err)
			}
			if diff := cmp.Diff(tt.calls, h.agent.received(0)); diff != "" {
				t.Errorf("agent calls (-want +got):\n%s", diff)
			}
			var failed []string
			for _, f := range rep.Failed {
				failed = append(failed, f.Field)
			}
			if diff := cmp.Diff(tt.failed, failed); diff != "" || !rep.Blocked {
				t.Errorf("report: blocked %v, failed fields (-want +got):\n%s", rep.Blocked, diff)
			}
			if b := h.led.BlockedOf("s1"); b == nil || !cmp.Equal(tt.failed, b.Fields) {
				t.Errorf("ledger's block %+v, want fields %v", b, tt.failed)
			}
			rec := h.stored("s1")
			if rec.Blocked == nil || !cmp.Equal(tt.failed, rec.Blocked.Fields) || !strings.Contains(rec.Blocked.Reason, tt.failed[0]) {
				t.Errorf("recorded block %+v, want fields %v", rec.Blocked, tt.failed)
			}
			if diff := cmp.Diff(tt.live2, ConfigMap(rec.Live)); diff != "" {
				t.Errorf("recorded live, which only the agent's reports make (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(target, h.owed("s1")); diff != "" {
				t.Errorf("owed after the failed restore (-want +got):\n%s", diff)
			}
			if text := rep.Text("reset"); !strings.Contains(text, "/reset") || !strings.Contains(text, tt.failed[0]) {
				t.Errorf("report text %q does not say which field failed and how to go on", text)
			}
		})
	}
}

// TestKillConverges: whenever the agent dies under a rebuild (the call
// fails with the agent gone, before or after the life moves, or the life
// moves under a call that was answered), nothing of the attempt is
// settled, the target stays owed, and once the agent is back the attempt
// runs again whole, from the capture it began with, whatever the record
// heard meanwhile.
func TestKillConverges(t *testing.T) {
	recovery := []string{
		"session/resume",
		"session/set_config_option zz-model=deep-3",
		"session/set_config_option a-mode=plan",
		"session/set_config_option effort=max",
		"session/set_config_option tone=warm",
	}
	for _, tt := range []struct {
		name      string
		recover   bool // RecoverPlan (resume) rather than ResetPlan
		at        int  // the call of the first life the agent dies under
		answered  bool // the agent answers that call, and dies before the attempt settles
		lifeFirst bool // the life moves before the call fails
	}{
		{name: "reset, under session/new", at: 0},
		{name: "reset, under session/new, life first", at: 0, lifeFirst: true},
		{name: "reset, under the model", at: 1},
		{name: "reset, under the mode", at: 2, lifeFirst: true},
		{name: "reset, under an option", at: 3},
		{name: "reset, after the last call", at: 4, answered: true},
		{name: "reset, between the model and the mode", at: 1, answered: true},
		{name: "recovery, under the resume", recover: true, at: 0},
		{name: "recovery, under the mode", recover: true, at: 2},
		{name: "recovery, after the last call", recover: true, at: 4, answered: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{caps: life.Caps{Resume: true}})
			ctx := h.ctx()
			h.seed(h.session("s1", "native-0", configured()))
			var plan Plan = Reset{Session: "s1"}
			want, event, path := restoreOf, state.MadeReset, "new"
			if tt.recover {
				h.kill() // the death the recovery follows
				h.life.Back()
				plan, want, event, path = Recover{Session: "s1"}, recovery, state.MadeCrash, "resume"
			}
			first := h.life.Gen()
			target := configured()

			killed := make(chan struct{})
			var mu sync.Mutex
			n := 0
			var owedAtRetry map[string]string
			retried := false
			dies := func(c call) bool {
				mu.Lock()
				defer mu.Unlock()
				if c.Life != first {
					if !retried {
						retried, owedAtRetry = true, h.owed("s1")
					}
					return false
				}
				n++
				return n-1 == tt.at
			}
			h.agent.script(func(c call) error {
				if tt.answered || !dies(c) {
					return nil
				}
				if tt.lifeFirst {
					h.kill()
				}
				close(killed)
				return fmt.Errorf("call %s: %w", c.Method, proxy.ErrAgentGone)
			}, func(c call) {
				if tt.answered && dies(c) {
					h.kill()
					close(killed)
				}
			})

			type result struct {
				rep Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := h.rb.Run(ctx, plan)
				done <- result{rep, err}
			}()
			select {
			case <-killed:
			case r := <-done:
				t.Fatalf("the plan ended before the agent died: %+v, %v", r.rep, r.err)
			case <-ctx.Done():
				t.Fatal("the agent never died")
			}
			if h.life.Gen() == first {
				h.kill() // the supervisor tells of the exit after the call saw it
			}
			h.awaitGaveUp(ctx)
			// What the dead attempt's fresh session reported reaches the
			// record meanwhile; the retry aims at the capture all the same.
			if err := h.rec.Do(ctx, func(context.Context) { h.rec.Session("s1").Rec.Live = h.agent.configOf(defaults()) }); err != nil {
				t.Fatal(err)
			}
			if s := h.stored("s1"); len(s.Natives) != 1 || s.NativeID != "native-0" {
				t.Errorf("the dead attempt was settled: natives %+v", s.Natives)
			}
			h.life.Back()
			var r result
			select {
			case r = <-done:
			case <-ctx.Done():
				t.Fatal("the plan never ended after the agent came back")
			}
			if r.err != nil || r.rep.Blocked {
				t.Fatalf("Run: %+v, %v", r.rep, r.err)
			}

			// What follows the fatal call in the dead life failed unanswered.
			if got := h.agent.received(first); len(got) < tt.at+1 || !cmp.Equal(want[:tt.at+1], got[:tt.at+1]) {
				t.Errorf("calls to the agent that died: %q, want them to begin with %q", got, want[:tt.at+1])
			}
			if diff := cmp.Diff(want, h.agent.received(first+1)); diff != "" {
				t.Errorf("calls to the agent that came back (-want +got):\n%s", diff)
			}
			if tt.at > 0 { // a target exists once the attempt has its session
				if diff := cmp.Diff(target, owedAtRetry); diff != "" {
					t.Errorf("owed when the attempt ran again (-want +got):\n%s", diff)
				}
			}
			rec := h.stored("s1")
			if diff := cmp.Diff(target, ConfigMap(rec.Live)); diff != "" || rec.Blocked != nil {
				t.Errorf("recorded: blocked %+v, live (-want +got):\n%s", rec.Blocked, diff)
			}
			native := r.rep.NativeSessionID
			if len(rec.Natives) == 0 {
				t.Fatal("the record lost its natives")
			}
			wantNatives := []state.Native{
				rec.Natives[0],
				{ID: native, Event: event, Path: path, At: clock},
			}
			if diff := cmp.Diff(wantNatives, rec.Natives); diff != "" || rec.NativeID != native {
				t.Errorf("natives, one for the attempt that settled (-want +got):\n%s", diff)
			}
			if tt.recover && native != "native-0" {
				t.Errorf("the recovery resumed %q, want native-0", native)
			}
			if owed := h.owed("s1"); owed != nil {
				t.Errorf("still owed after the restore landed: %v", owed)
			}
			if h.led.IsStale("s1") || h.led.IsBusy("s1") || h.led.NativeOf("s1") != native {
				t.Errorf("ledger: stale %v, busy %q, native %q; want settled on %q", h.led.IsStale("s1"), h.led.BusyWith("s1"), h.led.NativeOf("s1"), native)
			}
		})
	}
}

// TestKillAfterDeath: a rebuild whose agent will not be restarted again
// ends with the agent-gone refusal, and leaves the target owed for
// whoever tries next.
func TestKillAfterDeath(t *testing.T) {
	h := newHarness(t, options{})
	h.seed(h.session("s1", "native-0", configured()))
	h.agent.script(func(c call) error {
		if c.String() == "session/set_config_option a-mode=plan" {
			h.kill()
			h.life.Dead("restart budget used up")
			return fmt.Errorf("call %s: %w", c.Method, proxy.ErrAgentGone)
		}
		return nil
	}, nil)
	_, err := h.rb.Run(h.ctx(), Reset{Session: "s1"})
	if codeOf(err) != proxy.CodeAgentGone || !strings.Contains(err.Error(), "restart budget used up") {
		t.Fatalf("Run: err %v (code %d), want code %d with the last exit", err, codeOf(err), proxy.CodeAgentGone)
	}
	if diff := cmp.Diff(configured(), h.owed("s1")); diff != "" {
		t.Errorf("owed (-want +got):\n%s", diff)
	}
	if s := h.stored("s1"); len(s.Natives) != 1 {
		t.Errorf("a rebuild that never settled recorded natives %+v", s.Natives)
	}
	if h.led.IsBusy("s1") {
		t.Errorf("left busy with %q", h.led.BusyWith("s1"))
	}
}

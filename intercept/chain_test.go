package intercept

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// chunkFrames are streamed chunks (wire.IsChunk) and frames that are nearly
// chunks but not: another update kind, another method, a request, the
// other direction.
var chunkFrames = []struct {
	dir   proxy.Direction
	raw   string
	chunk bool
}{
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`, true},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}}}`, true},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"no session"}}}}`, true},
	{proxy.AgentToClient, `{"method":"session/update","params":{"update":{"sessionUpdate":"agent_\u006dessage_chunk"},"sessionId":"s1"},"jsonrpc":"2.0"}`, true},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"me"}}}}`, false},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"current_mode_update","currentModeId":"plan"}}}`, false},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`, false},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","method":"_sidecar/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}`, false},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","id":4,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}`, false},
	{proxy.AgentToClient, `{"jsonrpc":"2.0","id":4,"result":{"update":{"sessionUpdate":"agent_message_chunk"}}}`, false},
	{proxy.ClientToAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}`, false},
}

func scanFrame(t *testing.T, dir proxy.Direction, raw string) *proxy.Frame {
	t.Helper()
	env, err := proxy.Scan([]byte(raw))
	if err != nil {
		t.Fatalf("scan %s: %v", raw, err)
	}
	return &proxy.Frame{Dir: dir, Raw: []byte(raw), Env: env}
}

func TestIsChunk(t *testing.T) {
	for _, tt := range chunkFrames {
		f := scanFrame(t, tt.dir, tt.raw)
		if got := wire.IsChunk(f.Dir, &f.Env); got != tt.chunk {
			t.Errorf("wire.IsChunk(%s %s) = %v, want %v", tt.dir, tt.raw, got, tt.chunk)
		}
	}
}

// TestChunkScopes holds the recorder's parts to what they tell the chain
// (chunks.go): the sidecar's commands, the picker bridge and the request
// tracker claim no chunk in any state they can be in, so the chain may
// skip them; the others are asked.
func TestChunkScopes(t *testing.T) {
	r := New(Config{Store: state.NewMemory(), Queue: 64})
	ctx := context.Background()
	c := NewChain(nil, r.StageList()...).WithAnswers(r.Ledger(), true)
	// Put every part in a busy state: a prompt and an initialize in
	// flight, a replay suppressed, a session being created.
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`,
	} {
		c.Frame(ctx, scanFrame(t, proxy.ClientToAgent, raw))
	}
	r.led.Update(func(f *ledger.Flight) {
		f.Natives.Hush("n1", ledger.HushAll)
		f.Natives.BeginCreating()
	})
	var scoped, asked []string
	for _, ic := range r.StageList() {
		name := strings.TrimPrefix(fmt.Sprintf("%T", ic), "*")
		if !policyOf(ic).Never {
			asked = append(asked, name)
			continue
		}
		scoped = append(scoped, name)
		for _, tt := range chunkFrames {
			f := scanFrame(t, tt.dir, tt.raw)
			if tt.chunk && ic.Claims(f.Dir, &f.Env) {
				t.Errorf("%s says it claims no chunk, but claims %s", name, tt.raw)
			}
		}
	}
	if got, want := strings.Join(scoped, " "), "intercept.emulation intercept.commands intercept.pickers intercept.tracker"; got != want {
		t.Errorf("parts that never claim a chunk: %s, want %s", got, want)
	}
	if got, want := strings.Join(asked, " "), "intercept.Lifeline intercept.recordStage intercept.idMapper"; got != want {
		t.Errorf("parts asked about chunks: %s, want %s", got, want)
	}
}

// TestTakeChunkIsClaimsThenIntercept: the recorder's one-call path for a
// chunk does what Claims and then Intercept do, with and without a turn
// running.
func TestTakeChunkIsClaimsThenIntercept(t *testing.T) {
	for _, running := range []bool{false, true} {
		slow := New(Config{Store: state.NewMemory()})
		fast := New(Config{Store: state.NewMemory()})
		if running {
			promptInFlight(slow)
			promptInFlight(fast)
		}
		for _, tt := range chunkFrames {
			if !tt.chunk {
				continue
			}
			f := scanFrame(t, tt.dir, tt.raw)
			if slow.rec.Claims(f.Dir, &f.Env) {
				if v, err := slow.rec.Intercept(context.Background(), f); err != nil || v.Do != proxy.Pass {
					t.Fatalf("Intercept(%s) = %v, %v: want a pass", tt.raw, v, err)
				}
			}
			fast.rec.Text().TakeChunk(f)
		}
		got, want := fast.rec.Text().TakeAnswer("s1"), slow.rec.Text().TakeAnswer("s1")
		if got != want || running != (want != "") {
			t.Errorf("running %v: takeChunk collected %q, Claims and Intercept %q", running, got, want)
		}
		if running && slow.rec.Text().TakeAnswer("s1") != "" {
			t.Error("the answer was not taken")
		}
	}
}

// recordingInterceptor notes the frames it is asked about and answers
// Claims with claim; rewrite, when set, replaces what it claims.
type recordingInterceptor struct {
	name    string
	asked   *[]string
	scope   *bool // nil: no chunk policy
	claim   bool
	rewrite string
}

func (ri *recordingInterceptor) Claims(_ proxy.Direction, env *proxy.Envelope) bool {
	*ri.asked = append(*ri.asked, ri.name+":"+string(env.Update))
	return ri.claim
}

func (ri *recordingInterceptor) Intercept(context.Context, *proxy.Frame) (proxy.Verdict, error) {
	if ri.rewrite != "" {
		return proxy.Verdict{Do: proxy.Rewrite, Line: []byte(ri.rewrite)}, nil
	}
	return proxy.Verdict{}, nil
}

type scopedInterceptor struct{ *recordingInterceptor }

func (s scopedInterceptor) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Never: !*s.scope} }

func TestChainOffersChunksOnlyToThoseThatMayClaim(t *testing.T) {
	const chunk = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`
	const plan = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}}`
	no, yes := false, true
	t.Run("rewritten after a skipped one", func(t *testing.T) {
		// The lane is plain and may; the full chain resumes after plain.
		var asked []string
		c := NewChain(nil,
			scopedInterceptor{&recordingInterceptor{name: "never1", asked: &asked, scope: &no}},
			&recordingInterceptor{name: "plain", asked: &asked, claim: true, rewrite: plan},
			scopedInterceptor{&recordingInterceptor{name: "never2", asked: &asked, scope: &no}},
			scopedInterceptor{&recordingInterceptor{name: "may", asked: &asked, scope: &yes}},
		).WithAnswers(ledger.New(nil), true)
		v := c.Frame(context.Background(), scanFrame(t, proxy.AgentToClient, chunk))
		if got, want := strings.Join(asked, " "), "plain:agent_message_chunk never2:plan may:plan"; got != want {
			t.Errorf("asked %s, want %s", got, want)
		}
		if v.Do != proxy.Rewrite || string(v.Line) != plan {
			t.Errorf("verdict %v %s, want the rewrite", v.Do, v.Line)
		}
	})
	for _, tt := range []struct {
		name    string
		rewrite string // what the first interceptor turns the chunk into
		frame   string
		want    string
	}{
		{"chunk", "", chunk, "plain:agent_message_chunk may:agent_message_chunk"},
		{"other frame", "", plan, "plain:plan never:plan may:plan"},
		// A chunk rewritten into another frame is offered to everyone
		// after the interceptor that rewrote it.
		{"chunk rewritten", plan, chunk, "plain:agent_message_chunk never:plan may:plan"},
		{"chunk rewritten into a chunk", chunk, chunk, "plain:agent_message_chunk may:agent_message_chunk"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			c := NewChain(nil,
				&recordingInterceptor{name: "plain", asked: &asked, claim: tt.rewrite != "", rewrite: tt.rewrite},
				scopedInterceptor{&recordingInterceptor{name: "never", asked: &asked, scope: &no}},
				scopedInterceptor{&recordingInterceptor{name: "may", asked: &asked, scope: &yes}},
			).WithAnswers(ledger.New(nil), true)
			c.Frame(context.Background(), scanFrame(t, proxy.AgentToClient, tt.frame))
			if got := strings.Join(asked, " "); got != tt.want {
				t.Errorf("asked %s, want %s", got, tt.want)
			}
		})
	}
}

// TestChunkGate holds the lifeline and the id mapping to their gate: in
// every state where their gate is shut, neither claims any chunk, so the
// chain may pass them over.
func TestChunkGate(t *testing.T) {
	for bits := range 8 {
		r := New(Config{Store: state.NewMemory()})
		suppress, mapped, creating := bits&1 != 0, bits&2 != 0, bits&4 != 0
		r.led.Update(func(f *ledger.Flight) {
			if suppress {
				f.Natives.Hush("n1", ledger.HushAll)
			}
			if mapped {
				f.Remap("c1", "n1", 0)
			}
			if creating {
				f.Natives.BeginCreating()
			}
		})
		if got, want := r.gate.open(), suppress || mapped || creating; got != want {
			t.Errorf("suppress %v, mapped %v, creating %v: gate open %v, want %v", suppress, mapped, creating, got, want)
		}
		if r.gate.open() {
			continue
		}
		for _, ic := range r.StageList() {
			p := policyOf(ic)
			if p.Gate == nil {
				continue
			}
			if p.Gate != r.gate {
				t.Errorf("%T is gated by another recorder's gate", ic)
			}
			for _, tt := range chunkFrames {
				f := scanFrame(t, tt.dir, tt.raw)
				if tt.chunk && ic.Claims(f.Dir, &f.Env) {
					t.Errorf("%T claims %s with its gate shut", ic, tt.raw)
				}
			}
		}
	}
}

type gatedInterceptor struct {
	*recordingInterceptor
	gate *ChunkGate
}

func (g gatedInterceptor) ChunkPolicy() ChunkPolicy { return ChunkPolicy{Gate: g.gate} }

func TestChainPassesOverShutGates(t *testing.T) {
	const chunk = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`
	const plan = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}}`
	r := New(Config{Store: state.NewMemory()})
	var asked []string
	c := NewChain(nil,
		gatedInterceptor{&recordingInterceptor{name: "gated", asked: &asked}, r.gate},
		&recordingInterceptor{name: "plain", asked: &asked},
	).WithAnswers(r.Ledger(), true)
	for _, tt := range []struct {
		name  string
		open  bool
		frame string
		want  string
	}{
		{"shut", false, chunk, "plain:agent_message_chunk"},
		{"open", true, chunk, "gated:agent_message_chunk plain:agent_message_chunk"},
		{"shut, not a chunk", false, plan, "gated:plan plain:plan"},
	} {
		asked = nil
		// A native session whose updates are kept back opens the gate.
		r.led.Update(func(f *ledger.Flight) {
			if f.Natives.Unhush("n1", ledger.HushAll); tt.open {
				f.Natives.Hush("n1", ledger.HushAll)
			}
		})
		c.Frame(context.Background(), scanFrame(t, proxy.AgentToClient, tt.frame))
		if got := strings.Join(asked, " "); got != tt.want {
			t.Errorf("%s: asked %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestResponseThatLooksLikeAChunk: a response is a response, whatever else
// its envelope carries; taking it for a message chunk would leave its
// request pending and its turn running for good.
func TestResponseThatLooksLikeAChunk(t *testing.T) {
	r := New(Config{Store: state.NewMemory(), Queue: 8})
	ctx := context.Background()
	c := NewChain(nil, r.StageList()...).WithAnswers(r.Ledger(), true)
	c.Frame(ctx, scanFrame(t, proxy.ClientToAgent, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`))
	c.Frame(ctx, scanFrame(t, proxy.AgentToClient, `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"},"params":{"update":{"sessionUpdate":"agent_message_chunk"}}}`))
	if _, pending := r.led.Request("2"); pending {
		t.Error("the prompt's response was taken for a chunk: its request is still pending")
	}
}

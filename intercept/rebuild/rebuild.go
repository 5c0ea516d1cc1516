package rebuild

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/ledger"
	"github.com/acp-sidecar/acp-sidecar/intercept/life"
	"github.com/acp-sidecar/acp-sidecar/intercept/record"
	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// begin marks sid busy with what, so its requests wait, and returns what
// ends the mark; when a rebuild runs on the session already it fails,
// saying what runs. Run marks every plan with it, and the switch marks the
// session it lends out (Sessions.Lend).
func begin(led *ledger.Ledger, sid, what string) (end func(), cur string, ok bool) {
	led.Update(func(f *ledger.Flight) { cur, ok = f.Sessions.Begin(sid, what) })
	if !ok {
		return func() {}, cur, false
	}
	return func() { led.Update(func(f *ledger.Flight) { f.Sessions.End(sid) }) }, "", true
}

// Report says what a rebuild or restore did, for the slash command's message
// and the `_sidecar/*` result alike.
type Report struct {
	SessionID       string              `json:"sessionId"`
	NativeSessionID string              `json:"nativeSessionId"`
	Restored        []string            `json:"restored"`
	Failed          []replay.FieldError `json:"failed"`
	Blocked         bool                `json:"blocked"`
	Config          map[string]string   `json:"config"`
}

func (r Report) Text(what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "acp-sidecar: %s done", what)
	if what == "reset" {
		b.WriteString(": a fresh context")
	}
	if len(r.Config) > 0 {
		b.WriteString(", config ")
		b.WriteString(ConfigLine(r.Config))
	}
	if len(r.Restored) > 0 {
		fmt.Fprintf(&b, " (restored: %s)", strings.Join(r.Restored, ", "))
	}
	b.WriteString(".")
	if len(r.Failed) > 0 {
		b.WriteString("\nThese could not be restored:")
		for _, f := range r.Failed {
			fmt.Fprintf(&b, "\n- %s = %s: %s", f.Field, f.Want, f.Reason)
		}
		b.WriteString("\nPrompts are refused until you send /reset to try again or /accept-config to continue on the agent's current config.")
	}
	return b.String()
}

func ConfigLine(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

// ConfigMap is a config's current values as text, model and mode by category.
func ConfigMap(c *state.Config) map[string]string {
	out := map[string]string{}
	if c == nil {
		return out
	}
	for _, o := range c.Options {
		out[o.ID] = wire.Unquote(o.Current)
	}
	if c.Model != nil && c.ByCategory("model") == nil {
		out["model"] = c.Model.Current
	}
	if c.Mode != nil && c.ByCategory("mode") == nil {
		out["mode"] = c.Mode.Current
	}
	return out
}

// Snapshot is what a rebuild needs of a session, copied off the recorder.
type Snapshot struct {
	Client string
	Native string
	Live   *state.Config
	Orig   *state.Config
	Cwd    string
	Mcp    json.RawMessage
	Dirs   []string
	Meta   json.RawMessage // the client's creation _meta (state.Session.Meta)
	// Params are the other members the client made the session with
	// (state.Session.NewParams).
	Params  json.RawMessage
	Running bool
	Born    time.Time // record.Session.Born
}

// snapshotOf copies what a rebuild needs of s; it runs on the recorder's
// goroutine.
func snapshotOf(s *record.Session) Snapshot {
	snap := SnapshotOfRecord(&s.Rec)
	snap.Running, snap.Born = s.Turn != nil, s.Born
	return snap
}

// SnapshotOfRecord is what a rebuild needs of a session's record: its ids,
// its config, and the inputs the client made it with, which every native
// session made for it gets again.
func SnapshotOfRecord(rec *state.Session) Snapshot {
	return Snapshot{
		Client: rec.ClientID, Native: rec.NativeID, Live: record.CloneConfig(rec.Live), Orig: record.CloneConfig(rec.Original),
		Cwd: rec.Cwd, Mcp: rec.McpServers, Dirs: rec.AdditionalDirectories, Meta: rec.Meta, Params: rec.NewParams,
	}
}

// SnapshotIn takes the Snapshot of sid on the record's goroutine.
func SnapshotIn(ctx context.Context, rec *record.Recorder, sid string) (Snapshot, error) {
	var snap Snapshot
	err := rec.OnSession(ctx, sid, func(_ context.Context, s *record.Session) { snap = snapshotOf(s) })
	return snap, err
}

// Sidecar is what the rebuilds need of the relay: the sidecar's calls to
// the agent, and frames of its own. *proxy.Relay implements it.
type Sidecar interface {
	Call(ctx context.Context, method string, params, result any) error
	Send(dir proxy.Direction, line []byte) error
	// Again decides a client request again, whose error answer the
	// sidecar dropped (proxy.Relay.Again).
	Again(ctx context.Context, line []byte) error
}

var _ Sidecar = (*proxy.Relay)(nil)

// Config is what the rebuilds read of the sidecar's settings.
type Config struct {
	Store state.Store
	// Agent and Name are the agent's command line and configured name,
	// kept with each session a rebuild makes.
	Agent []string
	Name  string
	// Settings are the start-up --set, put on every new session.
	Settings []record.Setting
	// HandoffBudget bounds the kept-turn handoff in bytes (0: the default).
	HandoffBudget int
	// Host names this sidecar's host in each native session it records
	// (state.Native.Host), "" when it is not known.
	Host string
	// CallTimeout bounds each of the sidecar's own calls.
	CallTimeout time.Duration
	// NoPickers turns the picker bridge off (--pickers=off): the client
	// sees only the dialect the agent speaks (pickers.go).
	NoPickers bool
	Now       func() time.Time
	Log       *slog.Logger
	// Commands is the sidecar's command list to send after the open of a
	// native session (the commands stage's), nil when none is owed.
	Commands func(native, client string) [][]byte
}

// Rebuilder carries out Plans (Run) on the native sessions behind the
// record's sessions: it asks the engine for a native session and a
// restore, and settles the Outcome on the record's goroutine.
type Rebuilder struct {
	rec   *record.Recorder // the record; its sessions live on its goroutine (Do)
	sc    Sidecar          // the relay (Bind)
	ctx   context.Context  // the rebuilds' own, which outlives a request (Start)
	eng   *engine
	led   *ledger.Ledger
	life  *life.Life
	watch *Watch
	log   *slog.Logger
	cfg   Config
}

// New builds the rebuilds over the record, the ledger and the agent's
// life; watch is how they wait for the agent.
func New(cfg Config, rec *record.Recorder, led *ledger.Ledger, lf *life.Life, watch *Watch) *Rebuilder {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Commands == nil {
		cfg.Commands = func(string, string) [][]byte { return nil }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	eng := &engine{led: led, life: lf, watch: watch, log: cfg.Log, callTimeout: cfg.CallTimeout, now: cfg.Now}
	return &Rebuilder{ctx: context.Background(), rec: rec, eng: eng, led: led, life: lf, watch: watch, log: cfg.Log, cfg: cfg}
}

// Again decides a client request again, through the relay, whose error
// answer the sidecar dropped (Sidecar.Again).
func (b *Rebuilder) Again(ctx context.Context, line []byte) error { return b.sc.Again(ctx, line) }

// Bind gives the rebuilds the relay they act through. Call it before
// frames flow.
func (b *Rebuilder) Bind(sc Sidecar) { b.sc, b.eng.sc = sc, sc }

// Start gives the rebuilds their own context: their work outlives the
// request that started it, so it has ctx's values, not its end.
func (b *Rebuilder) Start(ctx context.Context) { b.ctx = context.WithoutCancel(ctx) }

// made is the native session attempt a got, for the event that made it,
// as the record keeps it (state.Native); its Path is "" when the attempt
// kept the one it had.
func (b *Rebuilder) made(event string, a *Attempt) state.Native {
	return state.Native{ID: a.native, Event: event, Path: a.path, Host: b.cfg.Host, At: b.cfg.Now()}
}

// Attempt is one try of a plan, on one life of the agent.
type Attempt struct {
	gen     uint64
	Snap    Snapshot
	native  string
	Catalog *state.Config // the native session's config before the restore
	// path is how the agent gave native: "new", "fork", or the rung of a
	// climb that held ("resume", "load" or "new"); "" for one kept.
	path string
	// replayed: the agent replayed the conversation to the client (a load,
	// or v2's resume with replayFrom), so the sidecar sends none.
	replayed bool
	target   *state.Config
	Out      Outcome
}

// blockedBy is the mark of a session whose restore failed: the fields it
// names refuse prompts until the user resets or accepts (fail closed).
func blockedBy(out Outcome, at time.Time) *state.Blocked {
	re := &replay.RestoreError{Fields: out.failed}
	return &state.Blocked{Fields: re.Names(), Reason: re.Error(), At: at}
}

func NilOr(c *state.Config) any {
	if c == nil {
		return nil
	}
	return ConfigMap(c)
}

// fresh gets attempt a a new native session like the client's.
func (b *Rebuilder) fresh(ctx context.Context, what string, a *Attempt) error {
	native, catalog, err := b.eng.newNative(ctx, a.Snap.Client, a.Snap)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, a.Snap.Client, err)
	}
	a.native, a.Catalog, a.path = native, catalog, "new"
	return nil
}

// bringBack gets attempt a a native session by the ladder, resume, load,
// new, for a session the client is not opening: a native load's replay is
// kept from the client, which has the history (engine.climb).
func (b *Rebuilder) bringBack(ctx context.Context, a *Attempt) error {
	c, err := b.eng.climb(ctx, a.Snap.Client, a.Snap, true, false)
	a.took(c)
	return err
}

// reopen gets attempt a a native session by the ladder for the client's
// own load or resume, whose replay the client sees; with history, the
// client asked for the conversation, which in v2 the agent's resume
// replays (engine.climb).
func (b *Rebuilder) reopen(ctx context.Context, a *Attempt, history bool) error {
	c, err := b.eng.climb(ctx, a.Snap.Client, a.Snap, false, history)
	a.took(c)
	return err
}

// took puts where a climb ended on the attempt.
func (a *Attempt) took(c climbed) {
	a.native, a.Catalog, a.path, a.replayed = c.native, c.cfg, c.path, c.replayed
}

// version is the ACP version the connection speaks, as the agent chose it.
func (b *Rebuilder) version() wire.Version { return wire.Version(b.life.Caps().Protocol) }

// owed is what a rebuild restores: the config a failed restore still owes,
// else live.
func (b *Rebuilder) owed(a *Attempt) *state.Config { return b.led.TargetOr(a.Snap.Client, a.Snap.Live) }

// Arm marks the session's native session as lacking the kept turns, and
// readies the text its next prompt carries.
func (b *Rebuilder) Arm(s *record.Session) {
	h := replay.BuildHandoff(replay.Kept(b.conversation(s)), b.cfg.HandoffBudget)
	s.Rec.HandoffPending = h.Text != ""
	b.led.Update(func(f *ledger.Flight) { f.Sessions.Arm(s.Rec.ClientID, h) })
}

// conversation is what a fresh native session must be told for s.
func (b *Rebuilder) conversation(s *record.Session) []state.Turn {
	return replay.Conversation(&s.Rec, b.rec.FullTurns(b.ctx, s), b.Lookup(b.ctx))
}

// settle records a rebuild's Outcome, blocks the session when a field
// failed, and tells the client what changed. fresh says the agent made
// native for it (a session/new), and not brought back an older one.
func (b *Rebuilder) settle(ctx context.Context, sid string, made state.Native, out Outcome, also func(*record.Session)) Report {
	native, fresh := made.ID, made.Path == "new"
	rep := Report{SessionID: sid, NativeSessionID: native, Failed: out.failed, Blocked: len(out.failed) > 0, Config: ConfigMap(out.Catalog)}
	for _, s := range out.applied {
		rep.Restored = append(rep.Restored, s.Field)
	}
	var blocked *state.Blocked
	if len(out.failed) > 0 {
		blocked = blockedBy(out, b.cfg.Now())
		b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(sid, out.target) })
	} else {
		b.led.Update(func(f *ledger.Flight) { f.Sessions.Owe(sid, nil) })
	}
	b.led.Update(func(f *ledger.Flight) { f.Sessions.SetBlocked(sid, blocked) })
	err := b.rec.Do(ctx, func(ctx context.Context) {
		s := b.rec.Session(sid)
		if s == nil {
			return
		}
		if s.Rec.NativeID != native {
			s.Born = time.Time{}
			if fresh {
				s.Born = b.cfg.Now()
			}
		}
		if made.Path != "" { // "": the plan kept the native session it had
			s.Rec.Behind(made)
		}
		keep := s.Rec.Title != "" && s.Rec.MadeByRebuild(native)
		b.led.Update(func(f *ledger.Flight) {
			f.Sessions.TitleFrom(sid, native, keep)
			if made.Path == "resume" {
				f.Sessions.Resumed(sid, native) // the first prompt proves it (lifeline)
			}
		})
		s.Rec.Live = out.Catalog
		s.Rec.Blocked = blocked
		if also != nil {
			also(s)
		}
		b.rec.PutSession(ctx, s)
		b.rec.Flush(ctx)
	})
	if err != nil {
		// Only a stopping recorder refuses: the session lives on the
		// fresh native session, and the record keeps the one before.
		b.log.Error("rebuilt session not recorded", "session", sid, "native", native, "err", err)
	}
	for _, line := range b.notifications(out, sid) {
		SendOwn(b.sc, b.log, proxy.AgentToClient, line)
	}
	if blocked != nil {
		b.log.Error("restore failed; prompts to this session are refused", "session", sid, "fields", strings.Join(blocked.Fields, ","))
	}
	return rep
}

// Lookup finds a fork's parent for its inheritance: in this process, else
// in the store (the parent may belong to an earlier run).
func (b *Rebuilder) Lookup(ctx context.Context) replay.Lookup {
	return func(id string) (*state.Session, []state.Turn, bool) {
		if p := b.rec.Session(id); p != nil {
			return &p.Rec, b.rec.FullTurns(ctx, p), true
		}
		rec, err := b.cfg.Store.Session(ctx, id)
		if err != nil {
			return nil, nil, false
		}
		turns, err := b.cfg.Store.Turns(ctx, id)
		if err != nil {
			return nil, nil, false
		}
		return rec, turns, true
	}
}

// WithPickers completes an open's result for the client: completePickers,
// then the dialect bridge.
func (b *Rebuilder) WithPickers(result json.RawMessage, recorded, now *state.Config) json.RawMessage {
	return b.Bridge(completePickers(b.version(), result, recorded, now))
}

// Bridge adds the pickers the client's dialect lacks to a session result
// (wire.Bridge), unless --pickers=off or the connection speaks v2. Only
// the client sees them: the record keeps the agent's own words.
func (b *Rebuilder) Bridge(result json.RawMessage) json.RawMessage {
	if b.cfg.NoPickers || b.version() >= wire.V2 {
		return result // v2 has config options only: no other dialect to bridge to
	}
	init, _ := b.life.Params()
	return wire.Bridge(result, wire.ReadsOptions(init))
}

// ReopenResult is the result of a load or resume the sidecar answered on
// the native session a's plan ended on: the agent's newest full option
// list, and the pickers with the values it accepted in the restore.
func (b *Rebuilder) ReopenResult(a *Attempt) json.RawMessage {
	out, catalog := a.Out, a.Catalog
	result := map[string]any{}
	if out.OptionsRaw != nil {
		result["configOptions"] = out.OptionsRaw
	} else if catalog != nil && len(catalog.Raw) > 0 {
		var p wire.ConfigPayload
		if json.Unmarshal(catalog.Raw, &p) == nil && p.ConfigOptions != nil {
			result["configOptions"] = p.ConfigOptions
		}
	}
	return b.WithPickers(wire.Encode(result), a.Snap.Live, out.Catalog)
}

// notifications are the restore's own report of where the config settled
// (Outcome.notifications), and, for a client shown modes the agent offers
// only as an option (Bridge), the legacy report of the mode: the agent's
// own reports of the restore's calls name interim values, and the last
// word must be the settled one, in the words the client reads.
func (b *Rebuilder) notifications(out Outcome, sid string) [][]byte {
	v2 := b.version() >= wire.V2 // config options are all v2 has
	lines := out.notifications(sid, !v2)
	if v2 || b.cfg.NoPickers || out.Catalog == nil || out.Catalog.Mode != nil || !b.life.WithoutLegacyModes() {
		return lines
	}
	if init, _ := b.life.Params(); wire.ReadsOptions(init) {
		return lines
	}
	if o := out.Catalog.ByCategory("mode"); o != nil {
		if cur := wire.Unquote(o.Current); cur != "" {
			lines = append(lines, wire.SessionUpdate(sid, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": cur}))
		}
	}
	return lines
}

package fakeagent_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

func TestProfiles(t *testing.T) {
	all := []string{"model", "effort", "mode", "verbosity"}
	tests := []struct {
		args                  []string
		load, modes, models   bool
		options               []string
		resume, list, forkCap bool
		legacyModel           string // the current legacy model id ("" for smart-2)
	}{
		{args: nil, load: true, modes: true, models: true, options: all},
		{args: []string{"-profile", "default"}, load: true, modes: true, models: true, options: all},
		{args: []string{"-profile", "legacy-only"}, load: true, modes: true, models: true},
		{args: []string{"-profile", "config-options-only"}, load: true, options: all},
		{args: []string{"-profile", "model-dependent"}, load: true, options: all, resume: true, list: true, forkCap: true},
		{args: []string{"-profile", "no-load"}, modes: true, models: true, options: all},
		{args: []string{"--profile=no-load", "-load"}, load: true, modes: true, models: true, options: all},
		{args: []string{"-profile", "legacy-only", "-config-options", "-models=false"}, load: true, modes: true, options: all},
		{args: []string{"-resume", "-list", "-fork"}, load: true, modes: true, models: true, options: all, resume: true, list: true, forkCap: true},
		{args: []string{"-profile", "claude-current"}, load: true, modes: true, options: all, resume: true, list: true, forkCap: true},
		{args: []string{"-profile", "codex-current"}, modes: true, models: true, options: all, resume: true, list: true, forkCap: true, legacyModel: "smart-2[medium]"},
		{args: []string{"-profile", "codex-current", "-load", "-subagents=false"}, load: true, modes: true, models: true, options: all, resume: true, list: true, forkCap: true, legacyModel: "smart-2[medium]"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			a := start(t, acpclient.Options{}, tt.args...)
			ctx := t.Context()
			init, err := a.Initialize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			caps := init.AgentCapabilities
			if caps.LoadSession != tt.load {
				t.Errorf("loadSession = %v, want %v", caps.LoadSession, tt.load)
			}
			sc := caps.SessionCapabilities
			if (sc.Resume != nil) != tt.resume || (sc.List != nil) != tt.list || (sc.Fork != nil) != tt.forkCap {
				t.Errorf("sessionCapabilities resume/list/fork = %v/%v/%v, want %v/%v/%v",
					sc.Resume != nil, sc.List != nil, sc.Fork != nil, tt.resume, tt.list, tt.forkCap)
			}
			s, err := a.NewSession(ctx, "/home/me")
			if err != nil {
				t.Fatal(err)
			}
			if s.SessionId != "fake-sess-1" {
				t.Errorf("sessionId = %q, want fake-sess-1", s.SessionId)
			}
			if diff := cmp.Diff(tt.options, optionIDs(s.ConfigOptions)); diff != "" {
				t.Errorf("configOptions ids (-want +got):\n%s", diff)
			}
			if (s.Modes != nil) != tt.modes || (s.Models != nil) != tt.models {
				t.Errorf("modes/models present = %v/%v, want %v/%v", s.Modes != nil, s.Models != nil, tt.modes, tt.models)
			}
			if s.Modes != nil && s.Modes.CurrentModeId != "code" {
				t.Errorf("currentModeId = %q, want code", s.Modes.CurrentModeId)
			}
			wantModel := tt.legacyModel
			if wantModel == "" {
				wantModel = "smart-2"
			}
			if s.Models != nil && string(s.Models.CurrentModelId) != wantModel {
				t.Errorf("currentModelId = %q, want %s", s.Models.CurrentModelId, wantModel)
			}
			if m := option(s.ConfigOptions, "model"); m != nil && (m.Category == nil || *m.Category != "model") {
				t.Errorf("model option category = %v, want model", m.Category)
			}
			if e := option(s.ConfigOptions, "effort"); e != nil && (e.Category == nil || *e.Category != "thought_level" || e.CurrentValue != "medium") {
				t.Errorf("effort option = %+v, want category thought_level, value medium", e)
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-profile", "nope"}, {"-nope"}, {"extra"}, {"-default-model", "gpt-9"},
		{"-die-on", ""}, {"-die-on", "session/load:0"}, {"-die-on", ":2"}, {"-die-on", "session/new:x"}, {"-die-on", "session/new,"}} {
		var stderr acpclient.Buffer
		if code := fakeagent.Main(t.Context(), args, strings.NewReader(""), &acpclient.Buffer{}, &stderr); code != 2 {
			t.Errorf("Main(%q) = %d, want 2; stderr %s", args, code, stderr.Bytes())
		}
	}
}

func TestSetSemantics(t *testing.T) {
	a := start(t, acpclient.Options{})
	s, ctx := a.session(t)
	sid := s.SessionId

	if err := a.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	// Like claude and codex, set_mode is followed by current_mode_update and
	// config_option_update, after its response.
	if _, err := a.WaitUpdates(ctx, sid, func(us []acp.SessionNotification) bool {
		k := kinds(us)
		return count(k, "current_mode_update:plan") == 1 && count(k, "config_option_update") == 1
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetMode(ctx, sid, "bogus"); acpclient.Code(err) != -32602 {
		t.Errorf("set_mode bogus: err = %v, want -32602", err)
	}
	opts, err := a.SetConfigOption(ctx, sid, "mode", "ask")
	if err != nil {
		t.Fatal(err)
	}
	if got := option(opts, "mode").CurrentValue; got != "ask" {
		t.Errorf("mode after set_config_option = %q, want ask", got)
	}
	for _, bad := range [][2]string{{"effort", "max"}, {"nope", "x"}, {"model", "gpt-9"}, {"verbosity", "loud"}} {
		if _, err := a.SetConfigOption(ctx, sid, bad[0], bad[1]); acpclient.Code(err) != -32602 {
			t.Errorf("set_config_option %s=%s: err = %v, want -32602", bad[0], bad[1], err)
		}
	}
	if _, err := a.SetConfigOption(ctx, sid, "verbosity", "terse"); err != nil {
		t.Fatal(err)
	}
	if err := a.SetModel(ctx, sid, "deep-3"); err != nil {
		t.Fatal(err)
	}
	if err := a.SetModel(ctx, sid, "gpt-9"); acpclient.Code(err) != -32602 {
		t.Errorf("set_model gpt-9: err = %v, want -32602", err)
	}
	r := a.reply(ctx, t, sid, "hi")
	// medium is one of deep-3's efforts, so the switch keeps it.
	want := fakeagent.Reply{Session: "fake-sess-1", Model: "deep-3", Mode: "ask", Effort: "medium", Verbosity: "terse",
		Turns: 1, Blocks: 1, Digest: fakeagent.Digest([]acp.ContentBlock{acp.TextBlock("hi")}), Text: "hi"}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("reply (-want +got):\n%s", diff)
	}
}

func TestSetSemanticsByProfile(t *testing.T) {
	t.Run("legacy-only", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-profile", "legacy-only")
		s, ctx := a.session(t)
		if _, err := a.SetConfigOption(ctx, s.SessionId, "mode", "ask"); acpclient.Code(err) != -32601 {
			t.Errorf("set_config_option: err = %v, want -32601", err)
		}
		if err := a.SetModel(ctx, s.SessionId, "fast-1"); err != nil {
			t.Fatal(err)
		}
		if r := a.reply(ctx, t, s.SessionId, "x"); r.Model != "fast-1" || r.Effort != "-" {
			t.Errorf("model/effort = %s/%s, want fast-1/-", r.Model, r.Effort)
		}
	})
	t.Run("config-options-only", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-profile", "config-options-only")
		s, ctx := a.session(t)
		if err := a.SetModel(ctx, s.SessionId, "fast-1"); acpclient.Code(err) != -32601 {
			t.Errorf("set_model: err = %v, want -32601", err)
		}
		// set_mode still answers, as opencode's does without legacy modes.
		if err := a.SetMode(ctx, s.SessionId, "plan"); err != nil {
			t.Fatal(err)
		}
		opts, err := a.SetConfigOption(ctx, s.SessionId, "model", "fast-1")
		if err != nil {
			t.Fatal(err)
		}
		if got := values(option(opts, "effort")); !cmp.Equal(got, []string{"low", "medium", "high"}) {
			t.Errorf("static effort values = %v", got)
		}
	})
	t.Run("accept-unknown", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-accept-unknown")
		s, ctx := a.session(t)
		if err := a.SetModel(ctx, s.SessionId, "gpt-9"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.SetConfigOption(ctx, s.SessionId, "nope", "x"); acpclient.Code(err) != -32602 {
			t.Errorf("unknown option id: err = %v, want -32602 even with -accept-unknown", err)
		}
		if r := a.reply(ctx, t, s.SessionId, "x"); r.Model != "gpt-9" || r.Effort != "-" {
			t.Errorf("model/effort = %s/%s, want gpt-9/-", r.Model, r.Effort)
		}
	})
	t.Run("broken-set-config", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-profile", "broken-set-config")
		s, ctx := a.session(t)
		opts, err := a.SetConfigOption(ctx, s.SessionId, "mode", "plan")
		if err != nil {
			t.Fatal(err)
		}
		if got := option(opts, "mode").CurrentValue; got != "code" {
			t.Errorf("mode in answer = %q, want unchanged code", got)
		}
		if r := a.reply(ctx, t, s.SessionId, "x"); r.Mode != "code" {
			t.Errorf("mode = %s, want code", r.Mode)
		}
	})
}

func TestModelDependentEffort(t *testing.T) {
	a := start(t, acpclient.Options{}, "-profile", "model-dependent")
	s, ctx := a.session(t)
	sid := s.SessionId
	updates := func() int { return count(kinds(a.Updates(sid)), "config_option_update") }

	steps := []struct {
		id, value  string
		wantEffort []string // nil: no effort option
		wantValue  string
		wantUpdate bool
	}{
		{"model", "fast-1", nil, "", true},
		{"model", "deep-3", []string{"medium", "high", "max"}, "high", true},
		{"effort", "max", []string{"medium", "high", "max"}, "max", false},
		{"model", "smart-2", []string{"low", "medium", "high"}, "medium", true},
		{"verbosity", "verbose", []string{"low", "medium", "high"}, "medium", false},
	}
	for _, st := range steps {
		before := updates()
		opts, err := a.SetConfigOption(ctx, sid, st.id, st.value)
		if err != nil {
			t.Fatalf("%s=%s: %v", st.id, st.value, err)
		}
		eff := option(opts, "effort")
		if diff := cmp.Diff(st.wantEffort, values(eff)); diff != "" {
			t.Errorf("%s=%s: effort values (-want +got):\n%s", st.id, st.value, diff)
		}
		if eff != nil && string(eff.CurrentValue) != st.wantValue {
			t.Errorf("%s=%s: effort = %s, want %s", st.id, st.value, eff.CurrentValue, st.wantValue)
		}
		if st.wantUpdate {
			us, err := a.WaitUpdates(ctx, sid, func(us []acp.SessionNotification) bool {
				return count(kinds(us), "config_option_update") > before
			})
			if err != nil {
				t.Fatal(err)
			}
			last := us[len(us)-1].Update.ConfigOptionUpdate
			if diff := cmp.Diff(optionIDs(opts), optionIDs(last.ConfigOptions)); diff != "" {
				t.Errorf("%s=%s: config_option_update ids differ from the answer:\n%s", st.id, st.value, diff)
			}
		}
	}
	// An effort the model does not have is rejected.
	if _, err := a.SetConfigOption(ctx, sid, "model", "fast-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetConfigOption(ctx, sid, "effort", "low"); acpclient.Code(err) != -32602 {
		t.Errorf("effort on fast-1: err = %v, want -32602", err)
	}
	// A prompt is answered after every update sent before its response, so
	// counting now is exact: four model changes announced, none otherwise.
	a.reply(ctx, t, sid, "sync")
	if got := updates(); got != 4 {
		t.Errorf("config_option_update count = %d, want 4", got)
	}
}

func TestReplyLine(t *testing.T) {
	a := start(t, acpclient.Options{}, "-id-prefix", "A-")
	s, ctx := a.session(t)
	r1 := a.reply(ctx, t, s.SessionId, "first prompt")
	if r1.Session != "A-1" || r1.Turns != 1 || r1.Text != "first prompt" {
		t.Errorf("reply 1 = %+v", r1)
	}
	long := strings.Repeat("é", 100) + "\nline two"
	blocks := []acp.ContentBlock{acp.TextBlock("handoff: earlier turns"), acp.TextBlock(long)}
	stop, text, err := a.PromptBlocks(ctx, s.SessionId, blocks)
	if err != nil || stop != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", stop, err)
	}
	r2, ok := fakeagent.ParseReply(text)
	if !ok {
		t.Fatalf("no reply in %q", text)
	}
	want := fakeagent.Reply{Session: "A-1", Model: "smart-2", Mode: "code", Effort: "medium", Verbosity: "normal",
		Turns: 2, Blocks: 2, Digest: fakeagent.Digest(blocks), Text: strings.Repeat("é", 80)}
	if diff := cmp.Diff(want, r2); diff != "" {
		t.Errorf("reply 2 (-want +got):\n%s", diff)
	}
	// The reply line is streamed in two chunks.
	us := a.Updates(s.SessionId)
	if got := count(kinds(us), "agent_message_chunk"); got != 4 {
		t.Errorf("agent_message_chunk count = %d, want 4", got)
	}
	// A second session counts its own turns.
	s2, err := a.NewSession(ctx, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if r := a.reply(ctx, t, s2.SessionId, "x"); r.Session != "A-2" || r.Turns != 1 {
		t.Errorf("second session reply = %+v", r)
	}
}

func TestParseReplyRoundTrip(t *testing.T) {
	r := fakeagent.Reply{Session: "s", Model: "m", Mode: "code", Effort: "-", Verbosity: "normal", Turns: 3, Blocks: 2,
		Digest: "00ff", Extra: map[string]string{"read": "ok:1:ab", "permission": "cancelled"}, Text: `a\b` + "\nc\rd text=x"}
	got, ok := fakeagent.ParseReply("preamble\n" + r.String() + "\nmore")
	if !ok {
		t.Fatal("ParseReply failed")
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, ok := fakeagent.ParseReply("no reply here"); ok {
		t.Error("ParseReply found a reply in plain text")
	}
}

func TestLoad(t *testing.T) {
	a := start(t, acpclient.Options{})
	s, ctx := a.session(t)
	sid := s.SessionId
	if err := a.SetModel(ctx, sid, "deep-3"); err != nil {
		t.Fatal(err)
	}
	a.reply(ctx, t, sid, "one")
	a.reply(ctx, t, sid, "two", "three")
	before := len(a.Updates(sid))

	res, err := a.Load(ctx, sid, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	// Like claude, codex and gemini, a load goes back to the defaults.
	if got := option(res.ConfigOptions, "model").CurrentValue; got != "smart-2" {
		t.Errorf("model after load = %s, want smart-2", got)
	}
	// The replay comes before the response; available_commands_update
	// follows it and may or may not have arrived yet.
	var replay []acp.SessionNotification
	for _, u := range a.Updates(sid)[before:] {
		if u.Update.AvailableCommandsUpdate == nil {
			replay = append(replay, u)
		}
	}
	var users []string
	for _, u := range replay {
		if c := u.Update.UserMessageChunk; c != nil {
			users = append(users, c.Content.Text.Text)
		}
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, users); diff != "" {
		t.Errorf("replayed user chunks (-want +got):\n%s", diff)
	}
	if got := kinds(replay); !cmp.Equal(got, []string{"user_message_chunk", "agent_message_chunk", "user_message_chunk", "user_message_chunk", "agent_message_chunk"}) {
		t.Errorf("replay kinds = %v", got)
	}
	r, ok := fakeagent.ParseReply(acpclient.AgentText(replay[:2]))
	if !ok || r.Turns != 1 || r.Model != "deep-3" {
		t.Errorf("replayed first reply = %+v, %v", r, ok)
	}
	if r := a.reply(ctx, t, sid, "four"); r.Turns != 3 || r.Model != "smart-2" {
		t.Errorf("reply after load = %+v", r)
	}
	if _, err := a.Load(ctx, "nope", "/home/me"); acpclient.Code(err) != -32002 {
		t.Errorf("load unknown: err = %v, want -32002", err)
	}

	t.Run("keeps-config", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-load-keeps-config")
		s, ctx := a.session(t)
		if err := a.SetModel(ctx, s.SessionId, "deep-3"); err != nil {
			t.Fatal(err)
		}
		res, err := a.Load(ctx, s.SessionId, "/home/me")
		if err != nil {
			t.Fatal(err)
		}
		if res.Models.CurrentModelId != "deep-3" {
			t.Errorf("model after load = %s, want deep-3", res.Models.CurrentModelId)
		}
	})
	t.Run("load-fails", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-load-fails")
		s, ctx := a.session(t)
		if _, err := a.Load(ctx, s.SessionId, "/home/me"); acpclient.Code(err) != -32603 {
			t.Errorf("load: err = %v, want -32603", err)
		}
	})
	t.Run("no-load", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-profile", "no-load")
		s, ctx := a.session(t)
		if _, err := a.Load(ctx, s.SessionId, "/home/me"); acpclient.Code(err) != -32601 {
			t.Errorf("load: err = %v, want -32601", err)
		}
	})
}

func TestResumeListFork(t *testing.T) {
	a := start(t, acpclient.Options{}, "-profile", "model-dependent")
	s, ctx := a.session(t)
	sid := s.SessionId
	if _, err := a.SetConfigOption(ctx, sid, "model", "deep-3"); err != nil {
		t.Fatal(err)
	}
	a.reply(ctx, t, sid, "hello world")
	before := len(a.Updates(sid))
	if _, err := a.Resume(ctx, sid, "/home/me"); err != nil {
		t.Fatal(err)
	}
	if got := len(a.Updates(sid)); got != before {
		t.Errorf("resume sent %d updates, want none", got-before)
	}
	if _, err := a.SetConfigOption(ctx, sid, "model", "deep-3"); err != nil {
		t.Fatal(err)
	}
	f, err := a.Fork(ctx, sid, "/other")
	if err != nil {
		t.Fatal(err)
	}
	if f.SessionId != "fake-sess-2" || len(f.ConfigOptions) == 0 || f.ConfigOptions[0].Select.CurrentValue != "deep-3" {
		t.Errorf("fork = %+v", f)
	}
	if r := a.reply(ctx, t, f.SessionId, "in fork"); r.Turns != 2 || r.Model != "deep-3" {
		t.Errorf("fork reply = %+v, want turns 2 (inherited) and deep-3", r)
	}
	l, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, si := range l.Sessions {
		ids = append(ids, string(si.SessionId)+"@"+si.Cwd)
	}
	if diff := cmp.Diff([]string{"fake-sess-1@/home/me", "fake-sess-2@/other"}, ids); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if l, err := a.List(ctx, "/other"); err != nil || len(l.Sessions) != 1 {
		t.Errorf("list /other = %+v, %v", l, err)
	}
	if _, err := a.Resume(ctx, "nope", "/home/me"); acpclient.Code(err) != -32002 {
		t.Errorf("resume unknown: err = %v, want -32002", err)
	}
}

// TestReopenDropsLegacy: session/new has all three surfaces, session/load
// and session/resume only configOptions, as codex-acp 2.6.0's resume.
func TestReopenDropsLegacy(t *testing.T) {
	a := start(t, acpclient.Options{}, "-reopen-drops-legacy", "-resume")
	s, ctx := a.session(t)
	if s.Modes == nil || s.Models == nil || len(s.ConfigOptions) == 0 {
		t.Fatalf("session/new = %+v, want configOptions, modes and models", s)
	}
	l, err := a.Load(ctx, s.SessionId, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if l.Modes != nil || l.Models != nil || len(l.ConfigOptions) == 0 {
		t.Errorf("session/load = %+v, want configOptions only", l)
	}
	r, err := a.Resume(ctx, s.SessionId, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes != nil || r.Models != nil || len(r.ConfigOptions) == 0 {
		t.Errorf("session/resume = %+v, want configOptions only", r)
	}
	for _, line := range a.Lines() {
		if bytes.Contains(line, []byte(`"result":{"configOptions"`)) && !bytes.Contains(line, []byte(`"sessionId"`)) &&
			(bytes.Contains(line, []byte(`"modes"`)) || bytes.Contains(line, []byte(`"models"`))) {
			t.Errorf("reopen result with a legacy surface: %s", line)
		}
	}
}

// TestCloseThenLoad: session/close answers {} and leaves the session
// loadable, as a real agent's closed session stays on disk; the history
// and the turn count survive the close.
func TestCloseThenLoad(t *testing.T) {
	a := start(t, acpclient.Options{}, "-close")
	s, ctx := a.session(t)
	sid := s.SessionId
	a.reply(ctx, t, sid, "one")
	got, err := a.CallRaw(ctx, acp.AgentMethodSessionClose, map[string]any{"sessionId": sid})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{}" {
		t.Errorf("session/close result = %s, want {}", got)
	}
	if _, err := a.Load(ctx, sid, "/home/me"); err != nil {
		t.Fatalf("load after close: %v", err)
	}
	if r := a.reply(ctx, t, sid, "two"); r.Turns != 2 {
		t.Errorf("turns after close and load = %d, want 2", r.Turns)
	}
	if _, err := a.CallRaw(ctx, acp.AgentMethodSessionClose, map[string]any{"sessionId": "nope"}); acpclient.Code(err) != -32002 {
		t.Errorf("close unknown: err = %v, want -32002", err)
	}

	t.Run("without -close", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		s, ctx := a.session(t)
		if _, err := a.CallRaw(ctx, acp.AgentMethodSessionClose, map[string]any{"sessionId": s.SessionId}); acpclient.Code(err) != -32601 {
			t.Errorf("close: err = %v, want -32601", err)
		}
	})
}

func TestBigLine(t *testing.T) {
	dir := t.TempDir()
	a := start(t, acpclient.Options{}, "-stdin-log", filepath.Join(dir, "stdin"), "-call-log", filepath.Join(dir, "calls"))
	s, ctx := a.session(t)
	text := strings.Repeat("0123456789abcdef", 20<<20/16) // 20 MiB
	// Raw params: the SDK's union types would encode 20 MiB three times.
	params := json.RawMessage(`{"sessionId":"` + string(s.SessionId) + `","prompt":[{"type":"text","text":"` + text + `"}]}`)
	raw, err := a.CallRaw(ctx, "session/prompt", params)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		StopReason string   `json:"stopReason"`
		Bytes      int      `json:"bytes"`
		SHA256     string   `json:"sha256"`
		TextSHA256 []string `json:"textSha256"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(text))
	if res.StopReason != "end_turn" || res.Bytes <= len(text) || len(res.TextSHA256) != 1 || res.TextSHA256[0] != hex.EncodeToString(sum[:]) {
		t.Errorf("big prompt result = %.200s", raw)
	}
	// The agent is still alive and its SDK connection intact.
	if r := a.reply(ctx, t, s.SessionId, "after"); r.Turns != 1 {
		t.Errorf("turns after big prompt = %d, want 1 (big prompts are not history)", r.Turns)
	}
	a.Close()
	a.exitCode(t)
	logged, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(logged, a.sent.Bytes()) {
		t.Errorf("stdin log (%d bytes) differs from what the client sent (%d bytes)", len(logged), len(a.sent.Bytes()))
	}
	var line []byte
	for _, l := range bytes.Split(logged, []byte("\n")) {
		if len(l) > len(text) {
			line = l
		}
	}
	if got := sha256.Sum256(line); hex.EncodeToString(got[:]) != res.SHA256 || len(line) != res.Bytes {
		t.Errorf("result sha256/bytes do not describe the line received")
	}
	calls, err := fakeagent.ReadCallLog(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"initialize", "session/new", "session/prompt", "session/prompt"}
	if diff := cmp.Diff(want, fakeagent.Methods(calls)); diff != "" {
		t.Errorf("call log (-want +got):\n%s", diff)
	}
	if c := calls[2]; c.Params != nil || c.Bytes != res.Bytes || c.SHA256 != res.SHA256 || c.SessionID != string(s.SessionId) {
		t.Errorf("big call logged as %+v", c)
	}
	if c := calls[3]; !bytes.Contains(c.Params, []byte(`"after"`)) {
		t.Errorf("call params = %s", c.Params)
	}
}

func TestRawBytes(t *testing.T) {
	dir := t.TempDir()
	a := start(t, acpclient.Options{}, "-stdout-log", filepath.Join(dir, "stdout"))
	s, ctx := a.session(t)
	sid := s.SessionId
	a.reply(ctx, t, sid, "meta")
	a.reply(ctx, t, sid, "unknown update")
	for _, want := range [][]byte{fakeagent.MetaLine(string(sid)), fakeagent.UnknownUpdateLine(string(sid))} {
		if _, err := a.WaitLine(ctx, func(l []byte) bool { return bytes.Equal(append(l, '\n'), want) }); err != nil {
			t.Errorf("line %s not received exactly: %v", want, err)
		}
	}
	if !bytes.Contains(fakeagent.MetaLine("x"), []byte(`{"big":12345678901234567890,"html":"<>&"}`)) {
		t.Error("MetaLine lost its raw _meta")
	}
	a.Close()
	a.exitCode(t)
	logged, err := os.ReadFile(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	received := append(bytes.Join(a.Lines(), []byte("\n")), '\n')
	if !bytes.Equal(logged, received) {
		t.Errorf("stdout log differs from what the client received:\n%s\n---\n%s", logged, received)
	}
}

func TestPromptQuirks(t *testing.T) {
	perm := func(choice string) acpclient.Options {
		return acpclient.Options{
			Files: map[string]string{"/home/me/fake.txt": "hello file\n"},
			Permission: func(req acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
				if choice == "" {
					return acp.NewRequestPermissionOutcomeCancelled()
				}
				return acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(choice))
			},
		}
	}
	fileSum := sha256.Sum256([]byte("hello file\n"))
	tests := []struct {
		name  string
		opts  acpclient.Options
		args  []string
		text  []string
		check func(t *testing.T, a *agent, r fakeagent.Reply, text string)
	}{
		{name: "echo", text: []string{"handoff\nblock", "echo: me"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, _ string) {
			if diff := cmp.Diff([]string{"handoff\nblock", "echo: me"}, r.Echo); diff != "" {
				t.Errorf("echo (-want +got):\n%s", diff)
			}
		}},
		{name: "stream", text: []string{"stream 3 5"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, text string) {
			if _, rest, _ := strings.Cut(text, "\n"); rest != "abcdebcdefcdefg" {
				t.Errorf("streamed filler = %q", rest)
			}
		}},
		{name: "chunks flags", args: []string{"-chunks", "2", "-chunk-size", "3"}, text: []string{"x"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, text string) {
			if _, rest, _ := strings.Cut(text, "\n"); rest != "abcbcd" {
				t.Errorf("streamed filler = %q", rest)
			}
		}},
		{name: "ext", text: []string{"ext"}, check: func(t *testing.T, a *agent, _ fakeagent.Reply, _ string) {
			n := a.Notifications()
			if len(n) != 1 || n[0].Method != "_fake/notice" {
				t.Errorf("notifications = %+v", n)
			}
		}},
		{name: "ask permission allowed", opts: perm("allow"), text: []string{"ask permission"}, check: func(t *testing.T, a *agent, r fakeagent.Reply, _ string) {
			want := map[string]string{"permission": "selected:allow", "read": "ok:11:" + hex.EncodeToString(fileSum[:])[:16]}
			if diff := cmp.Diff(want, r.Extra); diff != "" {
				t.Errorf("extra (-want +got):\n%s", diff)
			}
			if p := a.Permissions(); len(p) != 1 || p[0].ToolCall.ToolCallId != "fake-tool-1" {
				t.Errorf("permissions = %+v", p)
			}
		}},
		{name: "ask permission missing file", text: []string{"ask permission /nope"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, _ string) {
			if want := map[string]string{"permission": "selected:allow", "read": "error:-32002"}; !cmp.Equal(want, r.Extra) {
				t.Errorf("extra = %v, want %v", r.Extra, want)
			}
		}},
		{name: "ask permission rejected", opts: perm("reject"), text: []string{"ask permission"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, _ string) {
			if want := map[string]string{"permission": "selected:reject", "read": "skipped"}; !cmp.Equal(want, r.Extra) {
				t.Errorf("extra = %v, want %v", r.Extra, want)
			}
		}},
		{name: "ask permission cancelled", opts: perm(""), text: []string{"ask permission"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, _ string) {
			if r.Extra["permission"] != "cancelled" {
				t.Errorf("extra = %v", r.Extra)
			}
		}},
		{name: "trigger only in last block", text: []string{"crash now", "fine"}, check: func(t *testing.T, _ *agent, r fakeagent.Reply, _ string) {
			if r.Blocks != 2 {
				t.Errorf("blocks = %d", r.Blocks)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := start(t, tt.opts, tt.args...)
			s, ctx := a.session(t)
			stop, text, err := a.Prompt(ctx, s.SessionId, tt.text...)
			if err != nil || stop != acp.StopReasonEndTurn {
				t.Fatalf("prompt: %q %v", stop, err)
			}
			r, ok := fakeagent.ParseReply(text)
			if !ok {
				t.Fatalf("no reply in %q", text)
			}
			tt.check(t, a, r, text)
		})
	}
}

func TestExtensionEcho(t *testing.T) {
	a := start(t, acpclient.Options{})
	_, ctx := a.session(t)
	got, err := a.CallRaw(ctx, "_fake/echo", json.RawMessage(`{"a":[1,2],"b":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"a":[1,2],"b":"x"}` {
		t.Errorf("_fake/echo = %s", got)
	}
	if _, err := a.CallRaw(ctx, "_fake/other", nil); acpclient.Code(err) != -32601 {
		t.Errorf("_fake/other: err = %v, want -32601", err)
	}
}

// hangingPrompt starts a "hang" prompt and returns once the agent is in it.
func hangingPrompt(t *testing.T, a *agent, sid acp.SessionId) <-chan acp.StopReason {
	t.Helper()
	done := make(chan acp.StopReason, 1)
	go func() {
		stop, _, err := a.Prompt(t.Context(), sid, "hang")
		// When the agent answers and exits at once (stdin EOF), the SDK's
		// connection can see the end of the stream before it hands the
		// answer over; the caller then reads the answer from the lines.
		if err != nil && !strings.Contains(err.Error(), "peer disconnected") {
			t.Errorf("hang prompt: %v", err) // Errorf is safe off the test goroutine
		}
		done <- stop
	}()
	if _, err := a.WaitUpdates(t.Context(), sid, func(us []acp.SessionNotification) bool {
		return strings.Contains(acpclient.AgentText(us), "waiting for session/cancel")
	}); err != nil {
		t.Fatal(err)
	}
	return done
}

func TestCancel(t *testing.T) {
	a := start(t, acpclient.Options{})
	s, ctx := a.session(t)
	done := hangingPrompt(t, a, s.SessionId)
	if err := a.Cancel(ctx, s.SessionId); err != nil {
		t.Fatal(err)
	}
	if stop := <-done; stop != acp.StopReasonCancelled {
		t.Errorf("stopReason = %q, want cancelled", stop)
	}
}

func TestExit(t *testing.T) {
	t.Run("eof", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		s, _ := a.session(t)
		done := hangingPrompt(t, a, s.SessionId)
		// EOF cancels the prompt in flight, answers it, then exits 0.
		if _, err := a.Close(); err != nil {
			t.Fatal(err)
		}
		answered := false
		for _, l := range a.Lines() {
			answered = answered || bytes.Contains(l, []byte(`"stopReason":"cancelled"`))
		}
		if stop := <-done; stop != acp.StopReasonCancelled && !answered {
			t.Errorf("stopReason = %q and no cancelled answer on the wire, want cancelled", stop)
		}
		if code := a.exitCode(t); code != 0 {
			t.Errorf("exit = %d, want 0", code)
		}
	})
	t.Run("ignore-eof", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-profile", "ignores-eof")
		a.session(t)
		if err := a.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-a.code:
			t.Fatalf("Main returned %d at stdin EOF", code)
		default:
		}
		a.cancel() // only ctx ends it (the subprocess test in acpclient kills it)
		if code := a.exitCode(t); code != 0 {
			t.Errorf("exit = %d, want 0", code)
		}
	})
	t.Run("crash now", func(t *testing.T) {
		a := start(t, acpclient.Options{})
		s, ctx := a.session(t)
		_, text, err := a.Prompt(ctx, s.SessionId, "crash now")
		if err == nil {
			t.Fatal("prompt answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 3 {
			t.Errorf("exit = %d, want 3", code)
		}
		if !strings.HasPrefix(text, fakeagent.ReplyPrefix) || strings.Contains(text, "\n") {
			t.Errorf("text before crash = %q, want the first half of the reply line", text)
		}
	})
	t.Run("crash-mid-turn", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-crash-mid-turn")
		s, ctx := a.session(t)
		if _, _, err := a.Prompt(ctx, s.SessionId, "x"); err == nil {
			t.Fatal("prompt answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 3 {
			t.Errorf("exit = %d, want 3", code)
		}
	})
	t.Run("die-after", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-die-after", "2", "-die-code", "7")
		s, ctx := a.session(t)
		a.reply(ctx, t, s.SessionId, "one")
		// The second prompt is answered, then the agent exits at once. The
		// client's SDK can see the end of the stream before it hands the
		// answer over (its wait selects on both), so the call may fail
		// with "peer disconnected"; the answer is checked on the wire,
		// where the client's reader records every line before the SDK
		// sees it, and before it reports the end.
		_, _, err := a.Prompt(ctx, s.SessionId, "two")
		if err != nil && !strings.Contains(err.Error(), "peer disconnected") {
			t.Fatal(err)
		}
		if code := a.exitCode(t); code != 7 {
			t.Errorf("exit = %d, want 7", code)
		}
		if err != nil {
			answers := 0
			for _, l := range a.Lines() {
				if bytes.Contains(l, []byte(`"stopReason":"end_turn"`)) {
					answers++
				}
			}
			if answers != 2 {
				t.Errorf("%d end_turn answers on the wire, want 2 (the second prompt answered before the exit)", answers)
			}
		}
		if _, err := a.NewSession(ctx, "/home/me"); err == nil {
			t.Error("session/new answered after -die-after")
		}
	})
}

func TestSessionNewUpdates(t *testing.T) {
	for _, tt := range []struct {
		profile string
		early   bool
	}{{"default", false}, {"early-updates", true}} {
		t.Run(tt.profile, func(t *testing.T) {
			a := start(t, acpclient.Options{}, "-profile", tt.profile)
			s, ctx := a.session(t)
			if _, err := a.WaitUpdates(ctx, s.SessionId, func(us []acp.SessionNotification) bool {
				return count(kinds(us), "available_commands_update") == 1
			}); err != nil {
				t.Fatal(err)
			}
			// Where the first update for the session sits relative to the
			// session/new response, byte for byte.
			lines := a.Lines()
			resp, update := -1, -1
			for i, l := range lines {
				if resp < 0 && bytes.Contains(l, []byte(`"result":{`)) && bytes.Contains(l, []byte(`"sessionId":"fake-sess-1"`)) {
					resp = i
				}
				if update < 0 && bytes.Contains(l, []byte(`"session/update"`)) {
					update = i
				}
			}
			if (update < resp) != tt.early {
				t.Errorf("update at line %d, response at %d; early = %v", update, resp, tt.early)
			}
			if tt.early && count(kinds(a.Updates(s.SessionId)), "config_option_update") != 1 {
				t.Error("early-updates sent no config_option_update")
			}
		})
	}
}

// diedBefore checks that the agent died on receiving the call it logged
// last, with method, before answering it: the call log has it, the wire has
// no response to its id. The client's call must have failed already, so its
// reader has recorded every line.
func diedBefore(t *testing.T, a *agent, log, method string) {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 || calls[len(calls)-1].Method != method {
		t.Fatalf("call log %v, want it to end with %s", fakeagent.Methods(calls), method)
	}
	id := calls[len(calls)-1].ID
	for _, l := range a.Lines() {
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(l, &env) == nil && env.Method == "" && bytes.Equal(env.ID, id) {
			t.Errorf("%s (id %s) answered: %s", method, id, l)
		}
	}
}

func TestDieOn(t *testing.T) {
	t.Run("set_config_option:3", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "calls.jsonl")
		a := start(t, acpclient.Options{}, "-die-on", "session/set_config_option:3", "-die-code", "9", "-call-log", log)
		s, ctx := a.session(t)
		for _, set := range [][2]string{{"verbosity", "terse"}, {"effort", "high"}} {
			if _, err := a.SetConfigOption(ctx, s.SessionId, set[0], set[1]); err != nil {
				t.Fatalf("set %s before the crash point: %v", set[0], err)
			}
		}
		if _, err := a.SetConfigOption(ctx, s.SessionId, "verbosity", "verbose"); err == nil {
			t.Fatal("third set_config_option answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 9 {
			t.Errorf("exit = %d, want 9", code)
		}
		diedBefore(t, a, log, acp.AgentMethodSessionSetConfigOption)
		if got := count(fakeagent.Methods(mustCalls(t, log)), acp.AgentMethodSessionSetConfigOption); got != 3 {
			t.Errorf("%d set_config_option calls logged, want 3", got)
		}
	})
	t.Run("comma separated", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "calls.jsonl")
		a := start(t, acpclient.Options{}, "-die-on", "session/set_mode:5, session/load", "-call-log", log)
		s, ctx := a.session(t)
		a.reply(ctx, t, s.SessionId, "one")
		if _, err := a.Load(ctx, s.SessionId, "/home/me"); err == nil {
			t.Fatal("session/load answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 1 {
			t.Errorf("exit = %d, want 1 (the default -die-code)", code)
		}
		diedBefore(t, a, log, acp.AgentMethodSessionLoad)
		if got := kinds(a.Updates(s.SessionId)); count(got, "user_message_chunk") != 0 {
			t.Errorf("updates %v: a replay began before the crash", got)
		}
	})
	t.Run("die-once", func(t *testing.T) {
		dir := t.TempDir()
		once := filepath.Join(dir, "died")
		args := []string{"-die-on", "session/set_config_option:2", "-die-once", once}

		a := start(t, acpclient.Options{}, args...)
		s, ctx := a.session(t)
		if _, err := a.SetConfigOption(ctx, s.SessionId, "verbosity", "terse"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.SetConfigOption(ctx, s.SessionId, "verbosity", "verbose"); err == nil {
			t.Fatal("second set_config_option answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 1 {
			t.Errorf("exit = %d, want 1", code)
		}
		if _, err := os.Stat(once); err != nil {
			t.Fatalf("-die-once file after the crash: %v", err)
		}

		// The same argv again, as the sidecar restarts an agent: it lives.
		b := start(t, acpclient.Options{}, args...)
		s, ctx = b.session(t)
		for _, v := range []string{"terse", "verbose", "normal"} {
			if _, err := b.SetConfigOption(ctx, s.SessionId, "verbosity", v); err != nil {
				t.Fatalf("set verbosity %s in the second life: %v", v, err)
			}
		}
		if _, err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if code := b.exitCode(t); code != 0 {
			t.Errorf("second life exit = %d, want 0 (stdin EOF)", code)
		}
	})
	t.Run("die-mid-load", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, "calls.jsonl")
		args := []string{"-die-mid-load", "-die-code", "5", "-die-once", filepath.Join(dir, "died"),
			"-state", filepath.Join(dir, "state.json"), "-call-log", log}

		a := start(t, acpclient.Options{}, args...)
		s, ctx := a.session(t)
		sid := s.SessionId
		a.reply(ctx, t, sid, "one")
		a.reply(ctx, t, sid, "two")
		mark := len(a.Updates(sid))
		if _, err := a.Load(ctx, sid, "/home/me"); err == nil {
			t.Fatal("session/load answered; want the agent gone")
		}
		if code := a.exitCode(t); code != 5 {
			t.Errorf("exit = %d, want 5", code)
		}
		diedBefore(t, a, log, acp.AgentMethodSessionLoad)
		replay := a.Updates(sid)[mark:]
		if got := kinds(replay); !cmp.Equal(got, []string{"user_message_chunk"}) || replay[0].Update.UserMessageChunk.Content.Text.Text != "one" {
			t.Errorf("replay before the crash = %v, want the first user_message_chunk only", got)
		}

		// The restarted agent (same argv, same -state) replays it all.
		b := start(t, acpclient.Options{}, args...)
		if _, err := b.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Load(ctx, sid, "/home/me"); err != nil {
			t.Fatalf("load in the second life: %v", err)
		}
		var users []string
		for _, u := range b.Updates(sid) {
			if c := u.Update.UserMessageChunk; c != nil {
				users = append(users, c.Content.Text.Text)
			}
		}
		if diff := cmp.Diff([]string{"one", "two"}, users); diff != "" {
			t.Errorf("replay in the second life (-want +got):\n%s", diff)
		}
	})
	t.Run("die-mid-load nothing to replay", func(t *testing.T) {
		a := start(t, acpclient.Options{}, "-die-mid-load")
		s, ctx := a.session(t)
		if _, err := a.Load(ctx, s.SessionId, "/home/me"); err != nil {
			t.Fatalf("load of an empty session: %v", err)
		}
	})
}

func mustCalls(t *testing.T, log string) []fakeagent.Call {
	t.Helper()
	calls, err := fakeagent.ReadCallLog(log)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// TestListLag: under -list-lag 2 a session without a turn is never
// listed, and one whose first turn has ended is left out of the next two
// session/list calls and listed from the third on, as claude-agent-acp
// 0.23.1's listing catches up with the claude CLI's transcript write; a
// fork of a session with turns is listed at once.
func TestListLag(t *testing.T) {
	a := start(t, acpclient.Options{}, "-list", "-fork", "-list-lag", "2")
	s, ctx := a.session(t)
	sid := s.SessionId
	listed := func() []string {
		t.Helper()
		l, err := a.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, si := range l.Sessions {
			ids = append(ids, string(si.SessionId))
		}
		return ids
	}
	if got := listed(); len(got) != 0 {
		t.Errorf("before any turn: listed %q, want none", got)
	}
	a.reply(ctx, t, sid, "hello")
	var got [][]string
	for range 4 {
		got = append(got, listed())
	}
	want := [][]string{{}, {}, {"fake-sess-1"}, {"fake-sess-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the lists after the turn (-want +got):\n%s", diff)
	}
	f, err := a.Fork(ctx, sid, "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fake-sess-1", string(f.SessionId)}, listed()); diff != "" {
		t.Errorf("the list after a fork (-want +got):\n%s", diff)
	}
}

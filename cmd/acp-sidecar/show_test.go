package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// showT0 is the fixed clock of the seeded sessions.
var showT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func showOption(id, category, current string) state.Option {
	return state.Option{ID: id, Category: category, Type: "select", Current: json.RawMessage(current)}
}

// seedShowStore records two sessions in the store s:
//
//   - "s-orig": configOptions, an original, live changed from the baseline
//     (model smart-2 → deep-3), one override, a fork, a --set error and three
//     turns, the last rolled back.
//   - "s-none": no original, legacy modes only (ask → code), no turns. Its
//     record is older, so it lists second.
func seedShowStore(t *testing.T, s state.Store) {
	t.Helper()
	ctx := t.Context()
	base := &state.Config{Options: []state.Option{
		showOption("model", "model", `"smart-2"`),
		showOption("effort", "thought_level", `"low"`),
	}}
	orig := &state.Config{Options: []state.Option{
		showOption("model", "model", `"smart-2"`),
		showOption("effort", "thought_level", `"high"`),
	}}
	live := &state.Config{Options: []state.Option{
		showOption("model", "model", `"deep-3"`),
		showOption("effort", "thought_level", `"high"`),
	}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutSession(ctx, &state.Session{
		ClientID: "s-orig", NativeID: "n-2", NativeHistory: []string{"n-1", "n-2"},
		Agent: []string{"/opt/bin/fake-agent", "--fast"}, Cwd: "/home/me/project",
		McpServers: json.RawMessage(`[{"name":"x","env":[{"name":"TOKEN","value":"secret"}]}]`),
		Created:    showT0, Updated: showT0.Add(time.Minute),
		Baseline: base, Original: orig, Live: live,
		Overrides: []state.Override{{OptionID: "model", Category: "model", Value: json.RawMessage(`"deep-3"`), At: showT0.Add(30 * time.Second)}},
		Lineage:   &state.Lineage{ParentID: "s-parent", ForkTurn: 2},
		SetErrors: []state.SetError{{OptionID: "effort", Value: "max", Err: "value not offered"}},
	}))
	turns := []state.Turn{
		{Index: 1, PromptText: "hello there\nsecond line", Answer: "hi", StopReason: "end_turn", Status: state.TurnCompleted, NativeID: "n-1",
			ToolCalls: []state.ToolCall{{ID: "t1", Title: "read file", Status: "completed"}}},
		{Index: 2, PromptText: "write a poem", Answer: "roses \x1b[31mred\x1b[0m", StopReason: "end_turn", Status: state.TurnCompleted, NativeID: "n-2"},
		{Index: 3, PromptText: "undo that", Answer: "", StopReason: "cancelled", Status: state.TurnRolledBack, NativeID: "n-2"},
	}
	for i := range turns {
		turns[i].Started = showT0.Add(time.Duration(2+i) * time.Minute)
		turns[i].Ended = turns[i].Started.Add(10 * time.Second)
		must(s.PutTurn(ctx, "s-orig", &turns[i]))
	}
	must(s.PutSession(ctx, &state.Session{
		ClientID: "s-none", NativeID: "m-1", Agent: []string{"other-agent"}, Cwd: "/tmp/elsewhere",
		Created: showT0.Add(-time.Hour), Updated: showT0.Add(-time.Hour),
		Baseline: &state.Config{Mode: &state.Legacy{Current: "ask", Available: []string{"ask", "code"}}},
		Live:     &state.Config{Mode: &state.Legacy{Current: "code", Available: []string{"ask", "code"}}},
	}))
	must(s.Flush(ctx))
}

// seededShowDir is a state dir holding seedShowStore's sessions, closed, so
// the CLI opens badger itself.
func seededShowDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := state.Open(t.Context(), dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seedShowStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runShowCLI runs the CLI in process and returns its stdout, stderr and exit
// status.
func runShowCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	tmp := t.TempDir()
	files := make([]*os.File, 3)
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		f, err := os.Create(filepath.Join(tmp, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	code = runMain(t.Context(), append([]string{"acp-sidecar"}, args...), stdio{in: files[0], out: files[1], err: files[2]})
	out, err := os.ReadFile(files[1].Name())
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := os.ReadFile(files[2].Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(errOut), code
}

func runShowJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errOut, code := runShowCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: stdout is not a JSON object: %v\n%s", args, err, out)
	}
	return m
}

// jsonRound decodes a JSON literal the way the output decodes, for comparing.
func jsonRound(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func checkJSON(t *testing.T, m map[string]any, key, want string) {
	t.Helper()
	if got, w := m[key], jsonRound(t, want); !reflect.DeepEqual(got, w) {
		gotJSON, _ := json.Marshal(got)
		t.Errorf("%s = %s, want %s", key, gotJSON, want)
	}
}

func TestShowJSON(t *testing.T) {
	dir := seededShowDir(t)
	m := runShowJSON(t, "show", "s-orig", "--json", "--state-dir", dir)

	for _, k := range []string{"sessionId", "nativeSessionId", "nativeHistory", "agent", "cwd", "created", "updated",
		"lineage", "baseline", "original", "live", "changed", "overrides", "blocked", "setErrors", "handoff", "turns"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if _, ok := m["mcpServers"]; ok {
		t.Error("mcpServers shown; its env may hold credentials")
	}
	checkJSON(t, m, "sessionId", `"s-orig"`)
	checkJSON(t, m, "nativeSessionId", `"n-2"`)
	checkJSON(t, m, "nativeHistory", `["n-1","n-2"]`)
	checkJSON(t, m, "agent", `["/opt/bin/fake-agent","--fast"]`)
	checkJSON(t, m, "cwd", `"/home/me/project"`)
	checkJSON(t, m, "created", `"2025-03-01T12:00:00Z"`)
	checkJSON(t, m, "lineage", `{"parentId":"s-parent","forkTurn":2}`)
	// The original is untouched by the client's change; live has it.
	checkJSON(t, m, "baseline", `{"values":{"model":"smart-2","effort":"low"},"categories":{"model":"model","effort":"thought_level"}}`)
	checkJSON(t, m, "original", `{"values":{"model":"smart-2","effort":"high"},"categories":{"model":"model","effort":"thought_level"}}`)
	checkJSON(t, m, "live", `{"values":{"model":"deep-3","effort":"high"},"categories":{"model":"model","effort":"thought_level"}}`)
	checkJSON(t, m, "changed", `[
		{"optionId":"model","category":"model","legacy":false,"from":"smart-2","to":"deep-3"},
		{"optionId":"effort","category":"thought_level","legacy":false,"from":"low","to":"high"}]`)
	checkJSON(t, m, "overrides", `[{"optionId":"model","category":"model","value":"deep-3","at":"2025-03-01T12:00:30Z"}]`)
	checkJSON(t, m, "blocked", `null`)
	checkJSON(t, m, "setErrors", `[{"optionId":"effort","value":"max","error":"value not offered"}]`)
	checkJSON(t, m, "handoff", `null`)

	turns, _ := m["turns"].([]any)
	if len(turns) != 3 {
		t.Fatalf("turns = %v, want 3", m["turns"])
	}
	want := []struct{ status, stop, prompt, answer string }{
		{"completed", "end_turn", "hello there\nsecond line", "hi"},
		{"completed", "end_turn", "write a poem", "roses \x1b[31mred\x1b[0m"},
		{"rolled_back", "cancelled", "undo that", ""},
	}
	for i, w := range want {
		tj, _ := turns[i].(map[string]any)
		got := []any{tj["index"], tj["status"], tj["stopReason"], tj["prompt"], tj["answer"]}
		if exp := []any{float64(i + 1), w.status, w.stop, w.prompt, w.answer}; !reflect.DeepEqual(got, exp) {
			t.Errorf("turns[%d] = %q, want %q", i, got, exp)
		}
	}
	checkJSON(t, turns[0].(map[string]any), "toolCalls", `[{"id":"t1","title":"read file","status":"completed"}]`)
}

// A session without an original says so (null), and its legacy mode shows as
// the layers' mode and as a legacy change.
func TestShowJSONNoOriginal(t *testing.T) {
	dir := seededShowDir(t)
	m := runShowJSON(t, "show", "--json", "--state-dir", dir, "s-none")
	checkJSON(t, m, "original", `null`)
	checkJSON(t, m, "baseline", `{"values":{},"categories":{},"mode":"ask"}`)
	checkJSON(t, m, "live", `{"values":{},"categories":{},"mode":"code"}`)
	checkJSON(t, m, "changed", `[{"optionId":"mode","category":"mode","legacy":true,"from":"ask","to":"code"}]`)
	checkJSON(t, m, "lineage", `null`)
	checkJSON(t, m, "overrides", `[]`)
	checkJSON(t, m, "setErrors", `[]`)
	checkJSON(t, m, "turns", `[]`)
}

func TestShowTable(t *testing.T) {
	dir := seededShowDir(t)
	out, errOut, code := runShowCLI(t, "--state-dir", dir, "show", "s-orig")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"session  s-orig",
		"native   n-2 (history: n-1, n-2)",
		"agent    /opt/bin/fake-agent --fast",
		"lineage  forked from s-parent at turn 2",
		"model: smart-2 → deep-3",
		"effort (thought_level): low → high",
		"effort=max: value not offered",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The layers side by side: baseline, original, live.
	for _, fields := range [][]string{
		{"OPTION", "CATEGORY", "BASELINE", "ORIGINAL", "LIVE"},
		{"model", "model", "smart-2", "smart-2", "deep-3"},
		{"effort", "thought_level", "low", "high", "high"},
		{"1", "completed", "end_turn", "hello", "there", "…", "hi"},
		{"3", "rolled_back", "cancelled", "undo", "that"},
	} {
		if !hasFieldsLine(out, fields) {
			t.Errorf("no line with fields %q:\n%s", fields, out)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "secret") {
		t.Errorf("output carries an escape sequence or the mcpServers env:\n%q", out)
	}
	if strings.Contains(out, "none recorded") {
		t.Errorf("s-orig has an original, output says none:\n%s", out)
	}

	out, _, code = runShowCLI(t, "show", "s-none", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "original: (none recorded)") ||
		!hasFieldsLine(out, []string{"mode", "(legacy)", "mode", "ask", "-", "code"}) ||
		!strings.Contains(out, "mode (legacy): ask → code") {
		t.Errorf("show s-none: exit %d, output:\n%s", code, out)
	}
}

func hasFieldsLine(out string, fields []string) bool {
	for line := range strings.Lines(out) {
		if reflect.DeepEqual(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

func TestShowUnknownSession(t *testing.T) {
	dir := seededShowDir(t)
	for _, args := range [][]string{
		{"show", "nope", "--state-dir", dir},
		{"show", "--json", "nope", "--state-dir", dir},
		{"show", "nope", "--state-dir", filepath.Join(dir, "absent")}, // no store at all
	} {
		out, errOut, code := runShowCLI(t, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, `no session "nope"`) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1, nothing, no session", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); err == nil {
		t.Error("a read-only command created the state dir")
	}
}

func TestShowCorruptStore(t *testing.T) {
	dir := seededShowDir(t)
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show", "s-orig"}, {"sessions"}} {
		out, errOut, code := runShowCLI(t, append(args, "--state-dir", dir)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "damaged") || !strings.Contains(errOut, dir) {
			t.Errorf("%q on a damaged store: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

func TestSessions(t *testing.T) {
	dir := seededShowDir(t)
	out, errOut, code := runShowCLI(t, "sessions", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows:\n%s", out)
	}
	last := showTime(showT0.Add(4*time.Minute + 10*time.Second)) // turn 3's end
	wantRows := [][]string{
		{"SESSION", "AGENT", "CWD", "TURNS", "LAST", "ACTIVITY", "LIVE"},
		append([]string{"s-orig", "fake-agent", "--fast", "/home/me/project", "2"}, strings.Fields(last)...),
		append([]string{"s-none", "other-agent", "/tmp/elsewhere", "0"}, strings.Fields(showTime(showT0.Add(-time.Hour)))...),
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d = %q, want %q", i, got, want)
		}
	}
}

// The JSON listing, read while a sidecar (here the test) holds the store open:
// the CLI joins it over its socket and sees its sessions as live.
func TestSessionsJSONLive(t *testing.T) {
	dir := t.TempDir()
	s, err := state.Open(t.Context(), dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	seedShowStore(t, s)

	out, errOut, code := runShowCLI(t, "--state-dir", dir, "sessions", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	want := jsonRound(t, `[
		{"sessionId":"s-orig","agent":["/opt/bin/fake-agent","--fast"],"cwd":"/home/me/project","turns":2,"lastActivity":"2025-03-01T12:04:10Z","live":true,"closed":false},
		{"sessionId":"s-none","agent":["other-agent"],"cwd":"/tmp/elsewhere","turns":0,"lastActivity":"2025-03-01T11:00:00Z","live":true,"closed":false}]`)
	gotAny := jsonRound(t, out)
	if !reflect.DeepEqual(gotAny, want) {
		t.Errorf("sessions --json = %s", out)
	}

	// The show command reads through the same socket.
	m := runShowJSON(t, "show", "s-orig", "--json", "--state-dir", dir)
	checkJSON(t, m, "sessionId", `"s-orig"`)
}

func TestSessionsEmpty(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		out, errOut, code := runShowCLI(t, "sessions", "--json", "--state-dir", dir)
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Errorf("sessions --json on %s: exit %d, stdout %q, stderr %q; want []", dir, code, out, errOut)
		}
	}
}

// --state-dir after the subcommand wins over one before it and over the
// environment; one before it wins over the environment.
func TestShowStateDirPrecedence(t *testing.T) {
	dir := seededShowDir(t)
	empty := t.TempDir()
	t.Setenv("ACP_SIDECAR_STATE_DIR", empty)
	t.Setenv("XDG_STATE_HOME", empty)
	for _, tt := range []struct {
		args []string
		want int // sessions listed
	}{
		{[]string{"sessions", "--json"}, 0},
		{[]string{"--state-dir", dir, "sessions", "--json"}, 2},
		{[]string{"sessions", "--json", "--state-dir", dir}, 2},
		{[]string{"--state-dir", empty, "sessions", "--json", "--state-dir", dir}, 2},
		{[]string{"--state-dir", dir, "sessions", "--json", "--state-dir", empty}, 0},
	} {
		out, errOut, code := runShowCLI(t, tt.args...)
		var got []any
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != tt.want {
			t.Errorf("%q: exit %d, %d sessions, stderr %q; want %d sessions", tt.args, code, len(got), errOut, tt.want)
		}
	}
}

// seedMovedSession records "s-moved" in s: a session that ran turns 1 and 2
// on agent "claude", then moved to "codex" (its agent now) for turn 3, and
// whose next prompt carries the handoff. It lists first.
func seedMovedSession(t *testing.T, s state.Store) {
	t.Helper()
	ctx := t.Context()
	t1 := showT0.Add(time.Hour)
	if err := s.PutSession(ctx, &state.Session{
		ClientID: "s-moved", NativeID: "c-1", NativeHistory: []string{"a-1", "c-1"},
		Agent: []string{"/opt/bin/codex-acp", "--x"}, AgentName: "codex", Cwd: "/home/me/project",
		Created: t1, Updated: t1, HandoffPending: true,
	}); err != nil {
		t.Fatal(err)
	}
	turns := []state.Turn{
		{Index: 1, PromptText: "plan the change", Answer: "here is a plan", Agent: "claude", NativeID: "a-1"},
		{Index: 2, PromptText: "write it", Answer: "written", Agent: "claude", NativeID: "a-1"},
		{Index: 3, PromptText: "review it", Answer: "looks fine", Agent: "codex", NativeID: "c-1"},
	}
	for i := range turns {
		turns[i].StopReason, turns[i].Status = "end_turn", state.TurnCompleted
		turns[i].Started = t1.Add(time.Duration(1+i) * time.Minute)
		turns[i].Ended = turns[i].Started.Add(10 * time.Second)
		if err := s.PutTurn(ctx, "s-moved", &turns[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// movedShowDir is a closed state dir holding seedShowStore's sessions and
// "s-moved".
func movedShowDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := state.Open(t.Context(), dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seedShowStore(t, s)
	seedMovedSession(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A session that moved between agents lists under its agent's name; the
// unnamed sessions beside it list as they always have.
func TestSessionsAgentNames(t *testing.T) {
	dir := movedShowDir(t)
	out, errOut, code := runShowCLI(t, "sessions", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range [][]string{
		append([]string{"s-moved", "codex", "(codex-acp", "--x)", "/home/me/project", "3"},
			strings.Fields(showTime(showT0.Add(time.Hour+3*time.Minute+10*time.Second)))...),
		append([]string{"s-orig", "fake-agent", "--fast", "/home/me/project", "2"},
			strings.Fields(showTime(showT0.Add(4*time.Minute+10*time.Second)))...),
	} {
		if !hasFieldsLine(out, want) {
			t.Errorf("no line with fields %q:\n%s", want, out)
		}
	}

	out, errOut, code = runShowCLI(t, "sessions", "--json", "--state-dir", dir)
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 {
		t.Fatalf("sessions --json: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	byID := map[string]map[string]any{}
	for _, s := range list {
		byID[s["sessionId"].(string)] = s
	}
	checkJSON(t, byID["s-moved"], "agentName", `"codex"`)
	checkJSON(t, byID["s-moved"], "agent", `["/opt/bin/codex-acp","--x"]`)
	for _, id := range []string{"s-orig", "s-none"} {
		if v, ok := byID[id]["agentName"]; ok {
			t.Errorf("%s: agentName = %v, want it left out for an unnamed agent", id, v)
		}
	}
}

// show names the session's agent and the agent behind each turn; a record
// without names keeps its old header and turn table (TestShowTable).
func TestShowAgentNames(t *testing.T) {
	dir := movedShowDir(t)
	out, errOut, code := runShowCLI(t, "show", "s-moved", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if want := "agent    codex (/opt/bin/codex-acp --x)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	for _, fields := range [][]string{
		{"#", "AGENT", "STATUS", "STOP", "PROMPT", "ANSWER"},
		{"1", "claude", "completed", "end_turn", "plan", "the", "change", "here", "is", "a", "plan"},
		{"2", "claude", "completed", "end_turn", "write", "it", "written"},
		{"3", "codex", "completed", "end_turn", "review", "it", "looks", "fine"},
	} {
		if !hasFieldsLine(out, fields) {
			t.Errorf("no line with fields %q:\n%s", fields, out)
		}
	}

	m := runShowJSON(t, "show", "s-moved", "--json", "--state-dir", dir)
	checkJSON(t, m, "agentName", `"codex"`)
	checkJSON(t, m, "agent", `["/opt/bin/codex-acp","--x"]`)
	turns, _ := m["turns"].([]any)
	if len(turns) != 3 {
		t.Fatalf("turns = %v, want 3", m["turns"])
	}
	for i, want := range []string{`"claude"`, `"claude"`, `"codex"`} {
		checkJSON(t, turns[i].(map[string]any), "agentName", want)
	}

	m = runShowJSON(t, "show", "s-orig", "--json", "--state-dir", dir)
	if v, ok := m["agentName"]; ok {
		t.Errorf("s-orig: agentName = %v, want it left out", v)
	}
	for i, tj := range m["turns"].([]any) {
		if v, ok := tj.(map[string]any)["agentName"]; ok {
			t.Errorf("s-orig turns[%d]: agentName = %v, want it left out", i, v)
		}
	}
}

// handoff prints each answer under the agent that gave it, and says which
// agent the next prompt goes to; an unnamed record's text has no names.
func TestHandoffAgentNames(t *testing.T) {
	dir := movedShowDir(t)
	out, errOut, code := runShowCLI(t, "handoff", "s-moved", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"<turn 1 user>\nplan the change\n",
		"<turn 1 assistant from agent claude>\nhere is a plan\n</turn 1 assistant>",
		"<turn 2 assistant from agent claude>\nwritten\n",
		"<turn 3 user>\nreview it\n",
		"<turn 3 assistant from agent codex>\nlooks fine\n</turn 3 assistant>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("handoff lacks %q:\n%s", want, out)
		}
	}
	if want := "armed: the next prompt on agent codex carries this text"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}

	out, errOut, code = runShowCLI(t, "handoff", "s-orig", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "<turn 1 assistant>\nhi\n") || strings.Contains(out, "from agent") ||
		!strings.Contains(errOut, "not armed: the native session holds the conversation") {
		t.Errorf("handoff s-orig: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

func TestShowNamedAgent(t *testing.T) {
	for _, tt := range []struct{ name, command, want string }{
		{"", "claude-agent-acp", "claude-agent-acp"},
		{"", "-", "-"},
		{"codex", "codex-acp --x", "codex (codex-acp --x)"},
		{"codex", "", "codex"},
		{"codex", "-", "codex"},
	} {
		if got := namedAgent(tt.name, tt.command); got != tt.want {
			t.Errorf("namedAgent(%q, %q) = %q, want %q", tt.name, tt.command, got, tt.want)
		}
	}
}

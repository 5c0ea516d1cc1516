package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state"
)

// newsDir is a state dir with one session the agent titled and compacted in
// turn 2, whose turn 1 had a notice, beside seedShowStore's two.
func newsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := state.Open(t.Context(), dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seedShowStore(t, s)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutSession(ctx, &state.Session{
		ClientID: "s-news", NativeID: "k-1", Agent: []string{"claude-agent-acp"}, Cwd: "/tmp/news",
		Created: showT0, Updated: showT0.Add(2 * time.Hour),
		Title:      "Fix the \x1b[31mrelay\x1b[0m",
		Compaction: &state.Compaction{ID: "cmp_1", Turn: 2, Summary: "SUMMARY line one\nline two", At: showT0.Add(90 * time.Minute)},
	}))
	for i, tu := range []state.Turn{
		{Index: 1, PromptText: "EARLY question", Answer: "EARLY answer", Notices: []string{"**Warning:** NOTICE hook blocked"}, Status: state.TurnCompleted},
		{Index: 2, PromptText: "/compact", Answer: "compacted", Status: state.TurnCompleted},
		{Index: 3, PromptText: "LATE question", Answer: "LATE answer", Status: state.TurnCompleted},
	} {
		tu.Started = showT0.Add(time.Duration(60+i) * time.Minute)
		tu.Ended = tu.Started.Add(time.Second)
		must(s.PutTurn(ctx, "s-news", &tu))
	}
	must(s.Close())
	return dir
}

func TestSessionsShowTitles(t *testing.T) {
	dir := newsDir(t)
	out, errOut, code := runShowCLI(t, "sessions", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[0]); f[len(f)-1] != "TITLE" || !strings.HasSuffix(lines[1], "Fix the  [31mrelay [0m") || !strings.HasPrefix(lines[1], "s-news") {
		t.Errorf("listing:\n%s", out)
	}
	if !strings.HasSuffix(strings.TrimSpace(lines[2]), "-") {
		t.Errorf("a session without a title: %q, want - in TITLE", lines[2])
	}
	rows := runShowJSONList(t, "sessions", "--json", "--state-dir", dir)
	if rows[0]["title"] != "Fix the \x1b[31mrelay\x1b[0m" {
		t.Errorf("sessions --json title = %v", rows[0]["title"])
	}
	if _, ok := rows[1]["title"]; ok {
		t.Errorf("a session without a title has one in --json: %v", rows[1])
	}
}

func TestShowTitleCompactionNotices(t *testing.T) {
	dir := newsDir(t)
	m := runShowJSON(t, "show", "s-news", "--json", "--state-dir", dir)
	checkJSON(t, m, "title", `"Fix the \u001b[31mrelay\u001b[0m"`)
	checkJSON(t, m, "compaction", `{"compactionId":"cmp_1","turn":2,"summary":"SUMMARY line one\nline two","at":"2025-03-01T13:30:00Z"}`)
	turns := m["turns"].([]any)
	checkJSON(t, turns[0].(map[string]any), "notices", `["**Warning:** NOTICE hook blocked"]`)
	checkJSON(t, turns[0].(map[string]any), "answer", `"EARLY answer"`)
	checkJSON(t, turns[1].(map[string]any), "notices", `[]`)
	if old := runShowJSON(t, "show", "s-orig", "--json", "--state-dir", dir); old["compaction"] != nil {
		t.Errorf("a session never compacted: compaction %v, want null", old["compaction"])
	}

	out, _, code := runShowCLI(t, "show", "s-news", "--state-dir", dir)
	for _, want := range []string{"title      Fix the  [31mrelay [0m", "compacted  at turn 2", "SUMMARY line one …", "\nnotices\n  1  **Warning:** NOTICE hook blocked"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show lacks %q (exit %d):\n%s", want, code, out)
		}
	}

	// The handoff is the summary, then the turns from the compaction's on;
	// no notice is in it.
	out, errOut, code := runShowCLI(t, "handoff", "s-news", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("handoff: exit %d, %s", code, errOut)
	}
	if i, j := strings.Index(out, "SUMMARY line one"), strings.Index(out, "/compact"); i < 0 || j < i || !strings.Contains(out, "LATE answer") {
		t.Errorf("handoff does not lead with the summary:\n%s", out)
	}
	for _, not := range []string{"EARLY", "NOTICE"} {
		if strings.Contains(out, not) {
			t.Errorf("handoff has %q:\n%s", not, out)
		}
	}
}

// runShowJSONList runs a command whose --json output is an array of objects.
func runShowJSONList(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, errOut, code := runShowCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: stdout is not a JSON array: %v\n%s", args, err, out)
	}
	return rows
}

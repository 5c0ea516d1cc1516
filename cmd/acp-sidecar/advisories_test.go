//go:build linux

package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
)

// TestAdvisoriesThroughTheCLI: the built sidecar in front of the fake agent
// records a turn's notice and claude's informational chunk as notices and
// not as its answer, the agent's title, and its compaction; `sessions` and
// `show` print them; and the handoff a rewind arms starts with the
// compaction's summary and holds no notice and no turn from before it.
func TestAdvisoriesThroughTheCLI(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	lp := startLadderWith(t, []string{"--state-dir", store}, func(agent []string) []string { return agent },
		"-notices", "-compaction", "-info-updates")
	resp, seen, _ := lp.prompt("charlie " + fakeagent.NoticeTrigger + " " + fakeagent.CompactTrigger)
	mustSucceed(t, "the noticed prompt", resp)
	if !strings.Contains(seen, fakeagent.NoticeMark) {
		t.Errorf("the client saw %q, want the informational chunk passed on", seen)
	}
	resp, _, _ = lp.prompt("delta taken back")
	mustSucceed(t, "the fourth prompt", resp)
	lp.barrier()

	cli := func(args ...string) []byte {
		t.Helper()
		out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", append(args, "--state-dir", store)...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	var list []struct {
		SessionID string `json:"sessionId"`
		Title     string `json:"title"`
	}
	if err := json.Unmarshal(cli("sessions", "--json"), &list); err != nil || len(list) != 1 || list[0].Title != "alpha kept turn" {
		t.Errorf("sessions --json = %+v (%v), want the session titled %q", list, err, "alpha kept turn")
	}
	if out := string(cli("sessions")); !strings.Contains(out, "TITLE") || !strings.Contains(out, "alpha kept turn") {
		t.Errorf("sessions:\n%s", out)
	}
	var rec struct {
		Title      string `json:"title"`
		Compaction *struct {
			ID   string `json:"compactionId"`
			Turn int    `json:"turn"`
		} `json:"compaction"`
		Turns []struct {
			Answer  string   `json:"answer"`
			Notices []string `json:"notices"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(cli("show", lp.sid, "--json"), &rec); err != nil || len(rec.Turns) != 4 {
		t.Fatalf("show --json: %v, %+v", err, rec)
	}
	if rec.Title != "alpha kept turn" || rec.Compaction == nil || rec.Compaction.ID != fakeagent.CompactionID(3) || rec.Compaction.Turn != 3 {
		t.Errorf("show --json: title %q, compaction %+v; want the agent's title and compaction at turn 3", rec.Title, rec.Compaction)
	}
	if n := rec.Turns[2].Notices; len(n) != 2 || !strings.Contains(n[0], fakeagent.NoticeTitle) || !strings.Contains(n[1], "NOTICE-CHUNK") {
		t.Errorf("turn 3 notices %q, want the notice and the informational chunk", n)
	}
	for i, tu := range rec.Turns {
		if strings.Contains(tu.Answer, fakeagent.NoticeMark) {
			t.Errorf("turn %d's answer holds a notice: %q", i+1, tu.Answer)
		}
	}
	if out := string(cli("show", lp.sid)); !strings.Contains(out, "title      alpha kept turn") || !strings.Contains(out, "compacted  at turn 3") || !strings.Contains(out, "\nnotices\n") {
		t.Errorf("show:\n%s", out)
	}

	// The rewind takes turn 4 back and arms the handoff: the summary,
	// then turn 3.
	resp, _, _ = lp.prompt("/rewind")
	mustSucceed(t, "/rewind", resp)
	from := len(readCalls(t, lp.calls))
	resp, _, _ = lp.prompt("echo: what now")
	mustSucceed(t, "the prompt after the rewind", resp)
	var handoff string
	for _, c := range readCalls(t, lp.calls)[from:] {
		if c.Method == "session/prompt" {
			handoff = string(c.Params)
		}
	}
	third, ok := fakeagent.ParseReply(rec.Turns[2].Answer)
	if !ok {
		t.Fatalf("turn 3's answer %q is no reply line", rec.Turns[2].Answer)
	}
	summary := fakeagent.CompactionSummary(third.Session, 3)
	if i, j := strings.Index(handoff, summary), strings.Index(handoff, "charlie"); i < 0 || j < i {
		t.Errorf("the handoff does not lead with the summary %q:\n%s", summary, handoff)
	}
	for _, not := range []string{fakeagent.NoticeMark, "alpha", "bravo", "delta"} {
		if strings.Contains(handoff, not) {
			t.Errorf("the handoff has %q:\n%s", not, handoff)
		}
	}
}

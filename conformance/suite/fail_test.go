//go:build linux

package suite

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
)

// A check that cannot fail is worthless (issue 16). TestChecksFail runs
// each check against a target that breaks exactly the promise it checks,
// and wants it to fail (warn, for an advisory check) with the detail that
// names the break. The targets are the fake agent with a quirk, a sidecar
// started with a flag that gives the promise up, or a double (double_test.go)
// in front of the sidecar or of the agent.
func TestChecksFail(t *testing.T) {
	bin := sidecarBinary(t)
	fake := func(args ...string) []string { return append([]string{bin, "fakeagent"}, args...) }
	cases := []struct {
		check        string
		agent        []string // the fake agent's flags (default: the default profile)
		sidecarRule  string   // a double in front of the sidecar
		agentRule    string   // a double in front of the agent; PATH in it becomes a file in the test's dir
		sidecarFlags []string
		verdict      string // default Fail
		detail       string
		// also are checks run before check, whose frames it judges
		// (schema); schema validates them against the SDK's schema.
		also   []string
		schema bool
	}{
		{check: "initialize", sidecarRule: "init-version", detail: "through the sidecar it is fail: the initialize result's protocolVersion is \"1\""},
		{check: "session-new", sidecarRule: "new-no-id", detail: "through the sidecar it is fail"},
		{check: "session-load", sidecarRule: "refuse:session/load", detail: "refused by the suite's double"},
		{check: "load-replay", sidecarRule: "drop-replay", verdict: Warn, detail: "through the sidecar it is fail: session/load replayed no agent message"},
		{check: "session-resume", agent: fake("--profile", "model-dependent"), sidecarRule: "refuse:session/resume", detail: "refused by the suite's double"},
		{check: "session-list", agent: fake("--profile", "model-dependent"), sidecarRule: "list-empty", detail: "does not list the session"},
		{check: "session-close", agent: fake("--profile", "model-dependent"), sidecarRule: "refuse:session/close", detail: "refused by the suite's double"},
		{check: "session-fork", agent: fake("--profile", "model-dependent"), sidecarRule: "fork-parent-id", detail: "answered the parent's own id"},
		{check: "cancel", sidecarRule: "cancel-refusal", detail: `stopReason "refusal", want cancelled`},
		{check: "set-config-option", sidecarRule: "set-partial", detail: "not the complete list"},
		{check: "jsonrpc", sidecarRule: "id-unquote", detail: `with id "42" was answered with id 42`},
		{check: "eof", agent: fake("--profile", "ignores-eof"), verdict: Warn, detail: "kept running"},
		{check: "transparency", sidecarRule: "alter-text", detail: "(altered)"},
		{check: "record", sidecarRule: "show-live", detail: "live differs from what the agent reported"},
		{check: "reset", sidecarRule: "answer:/reset", detail: "no fresh native session"},
		{check: "restore-order", sidecarRule: "trace-swap", detail: "the order must be model, then mode"},
		{check: "fail-closed", sidecarRule: "send-unoffered", detail: "reached the agent"},
		{check: "rollback", sidecarRule: "handoff-again", detail: "carried the handoff again"},
		// An agent the table names that ignores the fork point forks
		// the whole conversation, the rewound turn included.
		{check: "rewind-native", agent: fake("--profile", "forks-at-message", "-fork-at-message=false"), detail: "the fake agent's fork holds 3 turns"},
		{check: "crash", sidecarFlags: []string{"--restart=false"}, detail: "the first prompt after the agent was killed"},
		// The probe is the agent's first life and the check's sidecar
		// starts the second; the third, after the kill, lies.
		{check: "reset-kill", agentRule: "lie-from-life:3:PATH", detail: "ran the prompt on a different config"},
		{check: "load", sidecarFlags: []string{"--store", "memory"}, detail: "session/load of"},
		// legacy-only: the one reopen the sidecar gets right today (see
		// knownGaps); the double breaks what it does.
		{check: "reopen-config", agent: fake("--profile", "legacy-only"), agentRule: "lie-after-reopen", detail: "ran the prompt on a different config"},
		{check: "close", sidecarRule: "answer:session/close", detail: "a prompt on the closed session ran"},
		{check: "delete", sidecarRule: "answer:session/delete", detail: "still finds the deleted session"},
		{check: "commands", sidecarRule: "drop-commands-after:session/resume", detail: "after session/resume no available_commands_update"},
		{check: "hostile", sidecarRule: "hostile-id", detail: `invalid UTF-8 with a readable id was answered error -32700 with id null, want id "hostile-2"`},
		// A protocolVersion "1" is no ACP v1 InitializeResponse, and no
		// frame the agent wrote.
		{check: "schema", also: []string{"initialize"}, schema: true, sidecarRule: "init-version", detail: "the sidecar's: frames the sidecar wrote or changed are not valid ACP v1 (v1/schema.unstable.json) (1 frame, one fault): InitializeResponse (initialize, sidecar-1)"},
	}
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.check)
		t.Run(tc.check, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			agent := tc.agent
			if agent == nil {
				agent = fake()
			}
			if tc.agentRule != "" {
				var err error
				if agent, err = doubleAgent(strings.ReplaceAll(tc.agentRule, "PATH", filepath.Join(dir, "life")), agent...); err != nil {
					t.Fatal(err)
				}
			}
			exe := bin
			if tc.sidecarRule != "" {
				var err error
				if exe, err = doubleSidecar(dir, bin, tc.sidecarRule); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &config{exe: exe, agent: agent, env: baseEnv(os.Environ(), nil), only: append(slices.Clone(tc.also), tc.check),
				timeout: failCheckTimeout, transcripts: filepath.Join(dir, "transcripts"), sidecarArgs: tc.sidecarFlags, warm: true}
			if tc.schema {
				sc, err := acpschema.Load(sdkSchema(t), protoV1)
				if err != nil {
					t.Fatal(err)
				}
				cfg.schema = newSchemaLog(sc)
			}
			rep, err := runSuite(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			printTable(&table, rep)
			want := tc.verdict
			if want == "" {
				want = Fail
			}
			if len(rep.Checks) != 1+len(tc.also) {
				t.Fatalf("ran %d checks, want %s alone (after %q):\n%s", len(rep.Checks), tc.check, tc.also, table.String())
			}
			t.Logf("%s", table.String())
			if c := rep.Checks[len(tc.also)]; c.ID != tc.check || c.Verdict != want || !strings.Contains(c.Detail, tc.detail) {
				t.Errorf("%s against its breaking target: %s, want %s with %q\n%s", tc.check, c.Verdict, want, tc.detail, table.String())
			}
		})
	}
	for _, c := range checks() {
		if !slices.Contains(covered, c.id) {
			t.Errorf("check %s has no breaking target here", c.id)
		}
	}
}

// failCheckTimeout bounds each check against its breaking target, to stop
// a hung one. The tests wait for no time of their own: each check fails on
// an event, but for record (its 5s bound on the store catching up),
// session-list (listCatchUp, 10s, on a listing that never shows the
// session) and eof (the 2s an agent gets to exit).
const failCheckTimeout = 60 * time.Second

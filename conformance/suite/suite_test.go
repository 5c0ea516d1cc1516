//go:build linux

package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
	"github.com/acp-sidecar/acp-sidecar/conformance/testbin"
)

// expect is a check's expected verdict and, for fail or skip, a piece of
// its detail.
type expect struct {
	verdict string
	detail  string
}

// knownGaps are failures of the sidecar on this checkout that other work is
// fixing: a check named here may pass, or fail with this detail, and fails
// the test with any other. Take a row out once its fix lands.
var knownGaps = map[string]string{}

// sessionCapsSkip are the verdicts of the checks that need the session
// capabilities most fake-agent profiles do not advertise.
var sessionCapsSkip = map[string]expect{
	"session-resume": {Skip, "does not advertise sessionCapabilities.resume"},
	"session-list":   {Skip, "does not advertise sessionCapabilities.list"},
	"session-close":  {Skip, "does not advertise sessionCapabilities.close"},
	"session-fork":   {Skip, "does not advertise sessionCapabilities.fork"},
}

func with(base map[string]expect, more map[string]expect) map[string]expect {
	out := map[string]expect{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// TestFakeAgentProfiles runs `conformance -- acp-sidecar fakeagent
// --profile P` for every profile, in process (so the suite itself runs
// under -race), and checks each verdict and the JSON report.
func TestFakeAgentProfiles(t *testing.T) {
	bin := sidecarBinary(t)
	const brokenSet = "accepted a change it did not make"
	noConfig := expect{Skip, "no config options"}
	cases := []struct {
		name string
		args []string
		want map[string]expect // checks not named must pass
		// agent is the agentInfo name the profile gives ("": fake-agent).
		agent string
		// proto is the --protocol to run with (0: the default, 1); schema
		// adds --schema with the SDK's schema dir (sdkSchema).
		proto  int
		schema bool
	}{
		{name: "default", args: []string{"--profile", "default"}, want: sessionCapsSkip},
		{name: "legacy-only", args: []string{"--profile", "legacy-only"},
			want: with(sessionCapsSkip, map[string]expect{"set-config-option": {Skip, "no configOptions"}})},
		{name: "config-options-only", args: []string{"--profile", "config-options-only"}, want: sessionCapsSkip},
		{name: "model-dependent", args: []string{"--profile", "model-dependent"}},
		{name: "no-load", args: []string{"--profile", "no-load"}, want: with(sessionCapsSkip, map[string]expect{
			"session-load": {Skip, "does not advertise loadSession"}, "load-replay": {Skip, "does not advertise loadSession"},
			"reopen-config": {Skip, "neither loadSession nor sessionCapabilities.resume"},
		})},
		{name: "ignores-eof", args: []string{"--profile", "ignores-eof"},
			want: with(sessionCapsSkip, map[string]expect{"eof": {Warn, "kept running"}})},
		// The agent's command list comes before the session/new response;
		// the sidecar's own list must not follow and replace it.
		{name: "early-updates", args: []string{"--profile", "early-updates"}, want: sessionCapsSkip},
		// The table's claude-agent-acp 0.101.0 as far as a rewind goes:
		// the rewind is the agent's own fork at a message.
		{name: "forks-at-message", args: []string{"--profile", "forks-at-message"}, want: with(sessionCapsSkip, map[string]expect{
			"session-fork": {verdict: Pass}, "rewind-native": {verdict: Pass},
		}), agent: "@agentclientprotocol/claude-agent-acp"},
		{name: "broken-set-config", args: []string{"--profile", "broken-set-config"}, want: with(sessionCapsSkip, map[string]expect{
			"record": {Fail, brokenSet}, "reset": {Fail, brokenSet}, "restore-order": {Fail, brokenSet},
			"reset-kill": {Fail, brokenSet}, "reopen-config": {Fail, brokenSet},
			"set-config-option": {Fail, "the agent fails it directly and through the sidecar"},
		})},
		// The habits of today's packages (agents.md): message ids, info
		// updates, the auth notice; every session capability on claude's,
		// resume without load and reopens without the legacy pickers on
		// codex's.
		{name: "claude-current", args: []string{"--profile", "claude-current"}},
		{name: "codex-current", args: []string{"--profile", "codex-current"}, want: map[string]expect{
			"session-load": {Skip, "does not advertise loadSession"}, "load-replay": {Skip, "does not advertise loadSession"},
		}},
		// claude-agent-acp 0.23.1 lists a session once the claude CLI's
		// transcript write lands, which may be after the turn's response:
		// session-list must wait for it (listCatchUp), the same way
		// directly and through the sidecar. A load before it lands
		// replays nothing: session-load loads once the session is listed,
		// and load-replay, which loads at once, warns as on 0.23.1.
		{name: "list-lag", args: []string{"--profile", "model-dependent", "-list-lag", "3", "-load-lag"}, want: map[string]expect{
			"session-list": {Pass, "by the 4th session/list after the turn"},
			"load-replay":  claudeExpect["load-replay"],
		}},
		// gemini-cli 0.61.0 refuses a load in a session's first minute;
		// the sidecar answers it from its record: the agent fails
		// session-load alone and passes it through the sidecar, which is
		// the sidecar absorbing the failure, not failing the check.
		{name: "gemini-like", args: []string{"--profile", "gemini-like"}, want: with(sessionCapsSkip, map[string]expect{
			"session-load":      {Absorbed, "the agent fails it directly (direct: session/load: JSON-RPC error -32603"},
			"load-replay":       {Absorbed, "the agent fails it directly"},
			"set-config-option": {Skip, "no configOptions"},
		}), agent: "gemini-cli"},
		{name: "no-config", args: []string{"-config-options=false", "-modes=false", "-models=false"}, want: with(sessionCapsSkip, map[string]expect{
			"record": noConfig, "reset": noConfig, "restore-order": noConfig, "fail-closed": noConfig,
			"reset-kill": noConfig, "reopen-config": noConfig, "set-config-option": {Skip, "no configOptions"},
		})},
		// The default profile again, every frame a client gets validated
		// against the SDK's v1 schema.
		{name: "default-schema", args: []string{"--profile", "default"}, schema: true, want: with(sessionCapsSkip, map[string]expect{
			"schema": {Pass, "are valid ACP v1 (v1/schema.unstable.json)"},
		})},
		// claude-current in ACP v2, every client speaking v2 and every
		// frame it gets validated against the SDK's v2 schema: every check
		// passes, the reopens with history by session/resume with
		// replayFrom; rewind-native skips as on claude-current. The
		// commands come in session results only, as codex-acp 2.6.0 gives
		// them in v2, so the sidecar's own lists must carry them.
		{name: "v2-current", args: []string{"--profile", "v2-current", "-commands-in-result"}, proto: 2, schema: true, want: map[string]expect{
			"session-load": {Pass, "by session/resume with replayFrom"},
			"load-replay":  {Pass, "by session/resume with replayFrom"},
			"initialize":   {Pass, "protocol version 2"},
			"schema":       {Pass, "are valid ACP v2 (v2/schema.unstable.json)"},
		}},
	}
	for _, tc := range cases {
		if _, named := tc.want["rewind-native"]; !named {
			// Only an agent the sidecar's table names forks at a message.
			tc.want = with(tc.want, map[string]expect{"rewind-native": {Skip, "fork"}})
		}
		if !tc.schema {
			tc.want = with(tc.want, map[string]expect{"schema": {Skip, "no --schema"}})
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			jsonPath := filepath.Join(dir, "report.json")
			args := []string{"--json", jsonPath, "--timeout", "60s"}
			if tc.proto != 0 {
				args = append(args, "--protocol", strconv.Itoa(tc.proto))
			}
			if tc.schema {
				args = append(args, "--schema", sdkSchema(t))
			}
			args = append(append(args, "--", bin, "fakeagent"), tc.args...)
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), bin, args, &stdout, &stderr)
			t.Logf("conformance %s:\n%s%s", strings.Join(tc.args, " "), stdout.String(), stderr.String())
			rep := readReport(t, jsonPath)
			if want := min(rep.Summary.Fail, 1); code != want {
				t.Errorf("exit status %d with %d failed, want %d", code, rep.Summary.Fail, want)
			}
			judge(t, rep, tc.want)
			var ids []string
			for _, c := range rep.Checks {
				ids = append(ids, c.ID)
				if c.Transcript == "" {
					if c.Verdict != Skip {
						t.Errorf("%s: no transcript", c.ID)
					}
				} else if fi, err := os.Stat(filepath.Join(rep.Transcripts, c.Transcript)); err != nil || fi.Size() == 0 {
					t.Errorf("%s: transcript %s: %v", c.ID, c.Transcript, err)
				}
				if !strings.Contains(stdout.String(), c.ID) {
					t.Errorf("the table lacks %s", c.ID)
				}
			}
			var all []string
			for _, c := range checks() {
				all = append(all, c.id)
			}
			if !slices.Equal(ids, all) {
				t.Errorf("checks %q, want %q", ids, all)
			}
			want := tc.agent
			if want == "" {
				want = "fake-agent"
			}
			proto := max(tc.proto, 1)
			if rep.Agent.Name != want || rep.Agent.ProtocolVersion != proto || rep.Protocol != proto {
				t.Errorf("agent %+v on protocol %d, want %s on protocol %d", rep.Agent, rep.Protocol, want, proto)
			}
			var table bytes.Buffer
			printTable(&table, rep)
			if table.String() != stdout.String() {
				t.Errorf("the rows printed as the checks ended differ from the report's table:\n%s\nwant:\n%s", stdout.String(), table.String())
			}
		})
	}
}

// judge checks each verdict of rep against want (checks not named must
// pass), allowing knownGaps; it logs the gaps still open.
func judge(t *testing.T, rep *Report, want map[string]expect) {
	t.Helper()
	for _, c := range rep.Checks {
		w, ok := want[c.ID]
		if !ok {
			w = expect{verdict: Pass}
		}
		for _, alt := range agentTimed[rep.Agent.Name+" "+rep.Agent.Version][c.ID] {
			if c.Verdict == alt.verdict && strings.Contains(c.Detail, alt.detail) {
				w = alt
			}
		}
		if gap, ok := knownGaps[c.ID]; ok && w.verdict == Pass && c.Verdict == Fail && strings.Contains(c.Detail, gap) {
			t.Logf("%s: known gap, still open: %s", c.ID, c.Detail)
			continue
		}
		if c.Verdict != w.verdict || !strings.Contains(c.Detail, w.detail) {
			t.Errorf("%s: %s (%s), want %s with %q", c.ID, c.Verdict, c.Detail, w.verdict, w.detail)
		}
		if c.Tier == "" {
			t.Errorf("%s: no tier", c.ID)
		}
		if c.Sides != nil && c.Verdict == Pass && (c.Sides.Direct.Verdict != Pass || c.Sides.Sidecar.Verdict != Pass) {
			t.Errorf("%s: passes with sides %+v", c.ID, *c.Sides)
		}
		if c.Verdict == Absorbed && (c.Sides == nil || c.Sides.Direct.Verdict == Pass || c.Sides.Sidecar.Verdict != Pass) {
			t.Errorf("%s: absorbed with sides %+v, want the sidecar's pass and the direct run's fail or skip", c.ID, c.Sides)
		}
	}
	var sum Summary
	for _, c := range rep.Checks {
		sum.count(c.Verdict)
	}
	if sum != rep.Summary || sum.Pass+sum.Fail+sum.Skip+sum.Warn != len(rep.Checks) {
		t.Errorf("summary %+v, want %+v, adding up to the %d checks", rep.Summary, sum, len(rep.Checks))
	}
}

// readReport validates the report against report.schema.json and decodes
// it strictly.
func readReport(t *testing.T, path string) *Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read report: %v", err)
	}
	schemaData, err := os.ReadFile("report.schema.json")
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	var schema, doc any
	if err := json.Unmarshal(schemaData, &schema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	if errs := validate(schema.(map[string]any), schema, doc, "$"); len(errs) > 0 {
		t.Fatalf("report does not match report.schema.json:\n%s\nreport:\n%s", strings.Join(errs, "\n"), data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode report strictly: %v", err)
	}
	return &rep
}

// validate checks doc against a JSON Schema subset: $ref (to #/$defs/…),
// type, enum, minimum, required, properties, additionalProperties: false,
// items. It is enough for report.schema.json, which uses nothing else.
func validate(root map[string]any, s any, doc any, at string) []string {
	sch, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	if ref, ok := sch["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := root["$defs"].(map[string]any)
		if !found || defs[name] == nil {
			return []string{at + ": unsupported $ref " + ref}
		}
		return validate(root, defs[name], doc, at)
	}
	var errs []string
	if ty, ok := sch["type"].(string); ok && !hasType(doc, ty) {
		return []string{fmt.Sprintf("%s: want %s, got %T", at, ty, doc)}
	}
	if enum, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(enum, func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(doc) }) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", at, doc, enum))
	}
	if m, ok := sch["minimum"].(float64); ok {
		if n, ok := doc.(float64); ok && n < m {
			errs = append(errs, fmt.Sprintf("%s: %v < minimum %v", at, n, m))
		}
	}
	if obj, ok := doc.(map[string]any); ok {
		props, _ := sch["properties"].(map[string]any)
		for _, r := range asSlice(sch["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: missing required %q", at, r))
			}
		}
		for k, v := range obj {
			if p, ok := props[k]; ok {
				errs = append(errs, validate(root, p, v, at+"."+k)...)
			} else if sch["additionalProperties"] == false {
				errs = append(errs, fmt.Sprintf("%s: unexpected property %q", at, k))
			}
		}
	}
	if arr, ok := doc.([]any); ok {
		for i, v := range arr {
			errs = append(errs, validate(root, sch["items"], v, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return errs
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func hasType(v any, ty string) bool {
	switch ty {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	}
	return false
}

// TestSchemaValidatorRejects keeps the validator honest: a report with a
// missing field, an unknown field or a bad verdict must not validate.
func TestSchemaValidatorRejects(t *testing.T) {
	var schema any
	data, err := os.ReadFile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	good := Report{SchemaVersion: SchemaVersion, Protocol: 1, Capabilities: json.RawMessage(`{}`), Config: describeConfig(nil), Agent: AgentInfo{Command: []string{"x"}},
		Checks: []CheckResult{{ID: "load", Tier: "mandatory", Verdict: Pass}, {ID: "cancel", Tier: "mandatory", Verdict: Absorbed, Sides: &Sides{Direct: Side{Fail, ""}, Sidecar: Side{Pass, ""}}}}}
	for name, mutate := range map[string]func(m map[string]any){
		"valid":          func(map[string]any) {},
		"missing field":  func(m map[string]any) { delete(m, "summary") },
		"unknown field":  func(m map[string]any) { m["extra"] = 1 },
		"bad verdict":    func(m map[string]any) { m["checks"].([]any)[0].(map[string]any)["verdict"] = "maybe" },
		"wrong type":     func(m map[string]any) { m["durationMs"] = "1s" },
		"negative count": func(m map[string]any) { m["summary"].(map[string]any)["fail"] = -1.0 },
		"old version":    func(m map[string]any) { m["schemaVersion"] = 1.0 },
		"no tier":        func(m map[string]any) { delete(m["checks"].([]any)[0].(map[string]any), "tier") },
		"bad tier":       func(m map[string]any) { m["checks"].([]any)[0].(map[string]any)["tier"] = "optional" },
		"unknown check":  func(m map[string]any) { m["checks"].([]any)[0].(map[string]any)["id"] = "nope" },
		"bad side": func(m map[string]any) {
			m["checks"].([]any)[1].(map[string]any)["sides"].(map[string]any)["direct"] = map[string]any{"verdict": "warn", "detail": ""}
		},
		"half sides": func(m map[string]any) {
			delete(m["checks"].([]any)[1].(map[string]any)["sides"].(map[string]any), "sidecar")
		},
		"version 2":   func(m map[string]any) { m["schemaVersion"] = 2.0 },
		"version 3":   func(m map[string]any) { m["schemaVersion"] = 3.0 },
		"no protocol": func(m map[string]any) { delete(m, "protocol") },
		"protocol 3":  func(m map[string]any) { m["protocol"] = 3.0 },
		"no absorbed": func(m map[string]any) { delete(m["summary"].(map[string]any), "absorbed") },
		"absorbed side": func(m map[string]any) {
			m["checks"].([]any)[1].(map[string]any)["sides"].(map[string]any)["sidecar"] = map[string]any{"verdict": "absorbed", "detail": ""}
		},
	} {
		b, _ := json.Marshal(good)
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		mutate(doc)
		errs := validate(schema.(map[string]any), schema, any(doc), "$")
		if (name == "valid") != (len(errs) == 0) {
			t.Errorf("%s: errors %q", name, errs)
		}
	}
}

// TestSchemaChecks: the schema's check ids are the suite's, in order, so a
// new check cannot go out without its schema entry.
func TestSchemaChecks(t *testing.T) {
	data, err := os.ReadFile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Checks struct {
				Items struct {
					Properties struct {
						ID struct {
							Enum []string `json:"enum"`
						} `json:"id"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"checks"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range checks() {
		ids = append(ids, c.id)
	}
	if got := schema.Properties.Checks.Items.Properties.ID.Enum; !slices.Equal(got, ids) {
		t.Errorf("report.schema.json check ids %q, want %q", got, ids)
	}
}

// TestUsage: no agent, an unknown check, a bad timeout, no --parallel
// worker, a --keep-env that keeps nothing, a --home-template that is no
// directory, a --protocol the suite does not speak and a --schema with no
// schema are usage errors.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--only", "nope", "--", "x"}, {"--only", "^load$", "--", "x"}, {"--timeout", "0s", "--", "x"}, {"--nope"}, {"--parallel", "0", "--", "x"},
		{"--keep-env", "PATH", "--", "x"}, {"--home-template", "/nonexistent/acp-conformance", "--", "x"},
		{"--protocol", "3", "--", "x"}, {"--protocol", "0", "--", "x"}, {"--schema", "/nonexistent/acp-conformance", "--", "x"}} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), "acp-sidecar", args, &out, &errb); code != 2 || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, want 2 and nothing", args, code, out.String())
		}
	}
}

// TestCLI runs the real binary's `conformance` command on one check, so the
// command entry in cmd/acp-sidecar is covered too.
func TestCLI(t *testing.T) {
	bin := sidecarBinary(t)
	cmd := exec.CommandContext(t.Context(), bin, "conformance", "--only", "fail-closed,initialize", "--", bin, "fakeagent")
	// Without --transcripts the command keeps them in a new temporary
	// dir for the user to read; here that dir goes with the test's.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acp-sidecar conformance: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fail-closed") || !strings.Contains(string(out), "2 passed, 0 failed") || !strings.Contains(string(out), "TIER") {
		t.Errorf("output:\n%s", out)
	}
}

// claudeAgentEntry is where scripts/e2e-setup.sh installs claude-agent-acp.
const claudeAgentEntry = ".cache/e2e/claude-agent-acp/node_modules/@zed-industries/claude-agent-acp/dist/index.js"

// TestClaudeAgent runs every check against the real claude-agent-acp,
// offline against conformance/mockllm, as conformance/e2e runs it. It skips
// when the agent is not installed, and fails instead when CI=true.
func TestClaudeAgent(t *testing.T) {
	runRealAgent(t, "claude-agent-acp 0.23.1", claudeAgentEntry, "", func(url, _ string) []string { return claudeEnv(os.Environ(), url) }, claudeExpect)
}

// TestClaudeCurrentAgent and TestCodexAgent run the suite on the packages
// editors install today (agents.md). Issue 16 asks for no failed check on
// either; codex keeps running after stdin EOF, which is advisory.
func TestClaudeCurrentAgent(t *testing.T) {
	runRealAgent(t, "@agentclientprotocol/claude-agent-acp 0.101.0", claudeCurrentEntry, "claude", func(url, _ string) []string { return claudeEnv(os.Environ(), url) }, nil)
}

func TestCodexAgent(t *testing.T) {
	runRealAgent(t, "@agentclientprotocol/codex-acp 2.6.0", codexEntry, "codex", codexSetup, map[string]expect{
		"eof": {Warn, "kept running"},
	})
}

// runRealAgent runs the whole suite through the built binary on an
// installed agent package (scripts/e2e-setup.sh [which]) against a mock
// LLM, and judges it: checks not in want must pass. env gives the agent's
// environment for the mock at url; template is a home template dir env
// may fill (codex's provider config). opts change the run's config
// (--protocol, --schema); without a schema the schema check must skip.
func runRealAgent(t *testing.T, name, entryPath, which string, env func(url, template string) []string, want map[string]expect, opts ...func(*config)) {
	bin := sidecarBinary(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, filepath.FromSlash(entryPath))
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		testbin.Missing(t, fmt.Sprintf("%s is not installed (%v); run: %s %s", name, errors.Join(err, nodeErr), filepath.Join(root, "scripts", "e2e-setup.sh"), which))
	}
	t.Parallel()
	dir := t.TempDir()
	// rewind-native reads what the agent's LLM was sent from the mock's
	// log, as a user gives it with --llm-log.
	llmLog := filepath.Join(dir, "llm.jsonl")
	logFile, err := os.Create(llmLog)
	if err != nil {
		t.Fatal(err)
	}
	mock, url, err := mockllm.Start(t.Context(), mockllm.Options{Log: logFile})
	if err != nil {
		t.Fatalf("start mock LLM: %v", err)
	}
	t.Cleanup(func() { mock.Close(); logFile.Close() })
	template := filepath.Join(dir, "home-template")
	// One check at a time: the real-agent tests already run side by side
	// (t.Parallel) on a 2-core runner, and each agent takes a core while
	// it starts. The CLI's --parallel is covered by TestFakeAgentProfiles.
	cfg := &config{exe: bin, agent: []string{node, entry}, env: env(url, template), timeout: claudeCheckTimeout,
		jsonPath: filepath.Join(dir, "report.json"), transcripts: filepath.Join(dir, "transcripts"), parallel: 1, warm: true, llmLog: llmLog}
	if _, err := os.Stat(template); err == nil {
		cfg.homeTemplate = template
	}
	for _, o := range opts {
		o(cfg)
	}
	if _, named := want["schema"]; !named && cfg.schema == nil {
		want = with(want, map[string]expect{"schema": {Skip, "no --schema"}})
	}
	rep, err := runSuite(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	printTable(&table, rep)
	t.Logf("conformance -- %s:\n%s", name, table.String())
	if err := writeJSON(cfg.jsonPath, rep); err != nil {
		t.Fatal(err)
	}
	readReport(t, cfg.jsonPath)
	judge(t, rep, want)
	if t.Failed() {
		logTranscripts(t, rep, cfg.transcripts)
	}
	t.Logf("a full run on %s %s took %.1fs", rep.Agent.Name, rep.Agent.Version, float64(rep.DurationMs)/1000)
}

// logTranscripts puts the transcript of each failed check into the test's
// log (failedTranscripts). The run's files are in a t.TempDir, gone once
// the test ends, and a failure on a real agent that does not come back on
// a rerun must be readable from the CI log it left.
func logTranscripts(t *testing.T, rep *Report, dir string) {
	t.Helper()
	if s := failedTranscripts(rep, dir); s != "" {
		t.Log(s)
	}
}

// failedTranscripts is the transcript of each failed check in dir, every
// frame cut to 600 bytes.
func failedTranscripts(rep *Report, dir string) string {
	var out strings.Builder
	for _, c := range rep.Checks {
		if c.Verdict != Fail || c.Transcript == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, c.Transcript))
		if err != nil {
			fmt.Fprintf(&out, "%s: no transcript: %v\n", c.ID, err)
			continue
		}
		fmt.Fprintf(&out, "%s: transcript:\n", c.ID)
		for line := range strings.Lines(string(b)) {
			if len(line) > 600 {
				line = line[:600] + " ...\n"
			}
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestFailedTranscriptsAreCut: only failed checks' transcripts are shown,
// and a long frame is cut.
func TestFailedTranscriptsAreCut(t *testing.T) {
	dir := t.TempDir()
	long := `{"frame":"` + strings.Repeat("x", 2000) + `"}`
	if err := os.WriteFile(filepath.Join(dir, "crash.jsonl"), []byte("{\"short\":1}\n"+long+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "load.jsonl"), []byte("{\"passed\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Checks: []CheckResult{
		{ID: "crash", Verdict: Fail, Transcript: "crash.jsonl"},
		{ID: "load", Verdict: Pass, Transcript: "load.jsonl"},
		{ID: "gone", Verdict: Fail, Transcript: "gone.jsonl"},
	}}
	got := failedTranscripts(rep, dir)
	for _, want := range []string{"crash: transcript:\n{\"short\":1}\n", long[:600] + " ...\n", "gone: no transcript"} {
		if !strings.Contains(got, want) {
			t.Errorf("the failed transcripts lack %.80q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "passed") || strings.Contains(got, long[:601]) {
		t.Errorf("the failed transcripts hold a passed check's or an uncut frame:\n%.300s", got)
	}
}

// The installed entry points of today's packages (scripts/e2e-setup.sh).
const (
	claudeCurrentEntry = ".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"
	codexEntry         = ".cache/e2e/agentclientprotocol-codex-acp/node_modules/@agentclientprotocol/codex-acp/dist/index.js"
)

// codexSetup writes the home template that points codex at the mock's
// OpenAI Responses API (docs/conformance.md), and returns the environment
// without a CODEX_HOME of the user's: codex keeps its sessions and last
// mode there, which must not carry from run to run.
func codexSetup(url, template string) []string {
	toml := "model_provider = \"mockllm\"\n[model_providers.mockllm]\nname = \"mockllm\"\nbase_url = \"" + url + "/v1\"\nenv_key = \"MOCKLLM_API_KEY\"\nwire_api = \"responses\"\n"
	if err := os.MkdirAll(filepath.Join(template, ".codex"), 0o700); err == nil {
		_ = os.WriteFile(filepath.Join(template, ".codex", "config.toml"), []byte(toml), 0o600) // a failed write shows as codex failing to start
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if u := strings.ToUpper(k); u == "CODEX_HOME" || strings.HasPrefix(u, "OPENAI_") || u == "HTTP_PROXY" || u == "HTTPS_PROXY" || u == "ALL_PROXY" || u == "NO_PROXY" {
			continue
		}
		env = append(env, kv)
	}
	env = baseEnv(env, nil)
	return append(env, "MOCKLLM_API_KEY=test", "NO_PROXY=127.0.0.1,localhost")
}

// claudeExpect are claude-agent-acp 0.23.1's verdicts that are not pass.
var claudeExpect = map[string]expect{
	// It replays only the user's side when the load follows the turn at
	// once, both ways: reported, never failing (see agentTimed).
	"load-replay": {Warn, "the agent fails it directly and through the sidecar"},
	// It does not fork at a message (the sidecar's table starts at 0.101.0).
	"rewind-native": {Skip, "fork"},
}

// agentTimed are the other verdicts a real agent gets where what it does
// depends on its own timing, by its name and version. claude-agent-acp
// 0.23.1 replays its reply on a load only once the claude CLI's timer has
// written the transcript: a load at once found it, on a slow run, through
// the sidecar (absorbed), both ways (pass), and on a run loaded by other
// work directly and not through the sidecar. That last one is accepted
// only where the sidecar's trace shows the agent itself sent no reply: a
// sidecar that dropped it fails.
var agentTimed = map[string]map[string][]expect{
	"@zed-industries/claude-agent-acp 0.23.1": {
		"load-replay": {
			{Absorbed, "the agent fails it directly (session/load replayed no agent message"},
			{Pass, "replayed the agent's reply too"},
			{Warn, "passes directly, but through the sidecar it is fail: session/load replayed no agent message: the agent's side of the conversation is missing, and the agent sent none (its own frames in the sidecar's trace)"},
		},
	},
}

// claudeCheckTimeout bounds each check against claude-agent-acp, whose
// session/new starts a CLI process and takes seconds.
const claudeCheckTimeout = 2 * time.Minute

// claudeEnv is environ minus whatever could point claude-agent-acp at a
// real API, account or proxy, plus what runs it offline against a mock
// LLM at url (conformance/mockllm): the environment conformance/e2e uses.
// Each run gets a fresh HOME of its own from the suite (isolate.go).
func claudeEnv(environ []string, url string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "ANTHROPIC_"), strings.HasPrefix(u, "CLAUDE_"),
			u == "HTTP_PROXY", u == "HTTPS_PROXY", u == "ALL_PROXY", u == "NO_PROXY",
			u == "IS_SANDBOX":
			continue
		}
		env = append(env, kv)
	}
	env = baseEnv(env, nil)
	env = append(env, "ANTHROPIC_BASE_URL="+url, "ANTHROPIC_API_KEY=test",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "NO_PROXY=127.0.0.1,localhost")
	if os.Geteuid() == 0 {
		env = append(env, "IS_SANDBOX=1") // claude as root exits during session/new without it
	}
	return env
}

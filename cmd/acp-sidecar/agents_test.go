package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

// parseRelay runs the real app with its relay action swapped for one that
// only reads the options, so flags and env vars are parsed exactly as in
// production and nothing is started. err is the flag parser's error or
// relayOptions'.
func parseRelay(t *testing.T, args ...string) (opts runOptions, err error) {
	t.Helper()
	devnull, oerr := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if oerr != nil {
		t.Fatal(oerr)
	}
	t.Cleanup(func() { devnull.Close() })
	app := newApp(stdio{in: devnull, out: devnull, err: devnull})
	app.Action = func(c *cli.Context) error {
		opts, err = relayOptions(c)
		return nil
	}
	if rerr := app.RunContext(t.Context(), append([]string{"acp-sidecar"}, args...)); rerr != nil {
		return runOptions{}, rerr
	}
	return opts, err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var cmpAgents = cmp.AllowUnexported(agentOptions{})

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: []string{}},
		{in: "  \t ", want: []string{}},
		{in: "codex-acp", want: []string{"codex-acp"}},
		{in: "  npx  -y\t@zed-industries/claude-code-acp \n", want: []string{"npx", "-y", "@zed-industries/claude-code-acp"}},
		{in: `agent --prompt 'a b  c'`, want: []string{"agent", "--prompt", "a b  c"}},
		{in: `'it''s'`, want: []string{"its"}},
		{in: `'a "b" \c'`, want: []string{`a "b" \c`}},
		{in: `"a 'b' \"c\" \\ \$HOME \x"`, want: []string{`a 'b' "c" \ $HOME \x`}},
		{in: `/opt/My\ Agent/bin --x\"y`, want: []string{"/opt/My Agent/bin", `--x"y`}},
		{in: `a"b c"'d e'f`, want: []string{"ab cd ef"}},
		{in: `x '' ""`, want: []string{"x", "", ""}},
		{in: "a\\\nb c", want: []string{"ab", "c"}},
		{in: "\"a\\\nb\"", want: []string{"ab"}},
		{in: `run $HOME ~ *.go ; echo`, want: []string{"run", "$HOME", "~", "*.go", ";", "echo"}},
		{in: `--tools Read,Edit`, want: []string{"--tools", "Read,Edit"}},
		{in: `ä 'ö ü'`, want: []string{"ä", "ö ü"}},
		{in: `agent 'open`, wantErr: "unterminated single quote"},
		{in: `agent "open \"`, wantErr: "unterminated double quote"},
		{in: `agent x\`, wantErr: "trailing backslash"},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("splitCommand(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("splitCommand(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitCommand(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

const agentsJSON = `{
  "default": "codex",
  "agents": [
    {"name": "claude", "command": "claude-agent-acp", "set": ["model=opus"]},
    {"name": "codex", "command": "codex-acp", "args": ["-c", "x=1"],
     "env": {"OPENAI_BASE_URL": "http://localhost:1", "A": "b=c"}, "set": ["mode=auto", "effort=high"]}
  ]
}`

const agentsTOML = `default = "codex"

[[agents]]
name = "claude"
command = "claude-agent-acp"
set = ["model=opus"]

[[agents]]
name = "codex"
command = "codex-acp"
args = ["-c", "x=1"]
env = { OPENAI_BASE_URL = "http://localhost:1", A = "b=c" }
set = ["mode=auto", "effort=high"]
`

// wantFileAgents is what both agentsJSON and agentsTOML say.
var wantFileAgents = agentOptions{
	defs: []agentDef{
		{Name: "claude", Argv: []string{"claude-agent-acp"}, Sets: []string{"model=opus"}},
		{
			Name: "codex", Argv: []string{"codex-acp", "-c", "x=1"},
			Env:  []string{"A=b=c", "OPENAI_BASE_URL=http://localhost:1"}, // sorted by name
			Sets: []string{"mode=auto", "effort=high"},
		},
	},
	defaultName: "codex",
	idle:        defaultAgentIdle,
}

func TestAgentsFile(t *testing.T) {
	for _, tt := range []struct{ name, content string }{
		{"agents.json", agentsJSON},
		{"agents.toml", agentsTOML},
		{"agents.JSON", agentsJSON},
		{"agents.conf", agentsJSON}, // no known extension: JSON first
		{"agents", agentsTOML},      // then TOML
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := parseRelay(t, "--agents", writeFile(t, tt.name, tt.content), "--set", "model=sonnet")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantFileAgents, opts.agents, cmpAgents); diff != "" {
				t.Errorf("agents mismatch (-want +got):\n%s", diff)
			}
			// Several agents: argv is the default's, and --set stays global;
			// per-agent settings stay with their agent.
			if diff := cmp.Diff([]string{"codex-acp", "-c", "x=1"}, opts.argv); diff != "" {
				t.Errorf("argv mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"model=sonnet"}, opts.sets); diff != "" {
				t.Errorf("sets mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentsFileSingle: one agent from a file runs as the `-- AGENT` form
// does, with its own settings after --set.
func TestAgentsFileSingle(t *testing.T) {
	path := writeFile(t, "a.toml", "[[agents]]\nname = \"c\"\ncommand = \"claude-agent-acp\"\nargs = [\"--v\"]\nset = [\"model=opus\"]\n")
	opts, err := parseRelay(t, "--agents", path, "--set", "mode=plan")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"claude-agent-acp", "--v"}, opts.argv); diff != "" {
		t.Errorf("argv mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mode=plan", "model=opus"}, opts.sets); diff != "" {
		t.Errorf("sets mismatch (-want +got):\n%s", diff)
	}
}

func TestAgentsFileErrors(t *testing.T) {
	tests := []struct {
		file, content string
		want          []string // each must be in the error
	}{
		{"a.json", `{"agents": [{"name": "x", "comand": "y"}]}`, []string{"a.json", `unknown field "comand"`}},
		{"a.json", `{"agent": []}`, []string{`unknown field "agent"`}},
		{"a.toml", "[[agents]]\nname = \"x\"\ncomand = \"y\"\n", []string{"a.toml", `unknown key "agents.comand"`}},
		{"a.toml", "defualt = \"x\"\n", []string{`unknown key "defualt"`}},
		{"a.toml", "[[agents]]\nname = \"x\"\ncommand = \"y\"\n[agents.env]\nA = 1\n", []string{"a.toml", "env"}},
		{"a.json", `{"agents": []} {}`, []string{"data after"}},
		{"a.json", `{"agents": [{"command": "y"}]}`, []string{"agents[0]: missing name"}},
		{"a.json", `{"agents": [{"name": "-x", "command": "y"}]}`, []string{`agent name "-x"`}},
		{"a.json", `{"agents": [{"name": "x", "command": " "}]}`, []string{"agent x: empty command"}},
		{"a.json", `{"agents": [{"name": "x"}]}`, []string{"agent x: empty command"}},
		{"a.json", `{"agents": [{"name": "x", "command": "y", "set": ["model"]}]}`, []string{"agent x: set", `"model"`, "ID=VALUE"}},
		{"a.json", `{"agents": [{"name": "x", "command": "y", "env": {"A=B": "c"}}]}`, []string{`env "A=B"`}},
		{"a.json", `{"default": "z", "agents": [{"name": "x", "command": "y"}]}`, []string{`default "z": no such agent (have x)`}},
		{"a.json", `{"agents": [{"name": "x", "command": "y"}, {"name": "x", "command": "z"}]}`, []string{`agent "x" is defined twice`}},
		{"a.conf", "agents = [", []string{"a.conf", "neither JSON", "nor TOML"}},
		{"a.json", "", []string{"a.json", "EOF"}},
	}
	for _, tt := range tests {
		_, err := parseRelay(t, "--agents", writeFile(t, tt.file, tt.content))
		if err == nil {
			t.Errorf("%s %q: no error", tt.file, tt.content)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: error %q does not contain %q", tt.file, tt.content, err, w)
			}
		}
	}
	if _, err := parseRelay(t, "--agents", filepath.Join(t.TempDir(), "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("missing file: error %v, want one naming the file", err)
	}
}

func TestAgentsFlag(t *testing.T) {
	opts, err := parseRelay(t,
		"--agent", "claude=npx -y '@zed-industries/claude-code-acp'",
		"--agent", "codex=codex-acp --tools Read,Edit -c 'a=b, c'",
	)
	if err != nil {
		t.Fatal(err)
	}
	want := agentOptions{
		defs: []agentDef{
			{Name: "claude", Argv: []string{"npx", "-y", "@zed-industries/claude-code-acp"}},
			{Name: "codex", Argv: []string{"codex-acp", "--tools", "Read,Edit", "-c", "a=b, c"}},
		},
		defaultName: "claude",
		idle:        defaultAgentIdle,
	}
	if diff := cmp.Diff(want, opts.agents, cmpAgents); diff != "" {
		t.Errorf("agents mismatch (-want +got):\n%s", diff)
	}
}

// TestFlagSetCommas: --agent keeps commas, and --set splits on them as it
// always has (so `--set a=b,c` still yields "a=b" and "c").
func TestFlagSetCommas(t *testing.T) {
	opts, err := parseRelay(t, "--set", "model=x,mode=y", "--set", "a=b,c", "--agent", "a=x --y 1,2", "--", "agent")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"model=x", "mode=y", "a=b", "c"}, opts.sets); diff != "" {
		t.Errorf("sets mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x", "--y", "1,2"}, opts.agents.defs[0].Argv); diff != "" {
		t.Errorf("--agent argv mismatch (-want +got):\n%s", diff)
	}
	t.Setenv("ACP_SIDECAR_SET", "model=x,mode=y")
	opts, err = parseRelay(t, "--", "agent")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"model=x", "mode=y"}, opts.sets); diff != "" {
		t.Errorf("ACP_SIDECAR_SET mismatch (-want +got):\n%s", diff)
	}
}

func TestAgentsFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "claude"}, `--agent "claude": want NAME=COMMAND`},
		{[]string{"--agent", "=x"}, "empty agent name"},
		{[]string{"--agent", "my agent=x"}, `agent name "my agent"`},
		{[]string{"--agent", ".x=x"}, `agent name ".x"`},
		{[]string{"--agent", "a=  "}, "--agent a: empty command"},
		{[]string{"--agent", "a=''"}, "--agent a: empty command"},
		{[]string{"--agent", "a=x 'y"}, "--agent a: command: unterminated single quote"},
		{[]string{"--agent", "a=x", "--agent", "a=y"}, `agent "a" is defined twice (--agent, --agent)`},
		{[]string{"--agent", "b=x", "--default-agent", "c", "--", "b"}, `--default-agent "c": no such agent (have b, b-2)`},
		{[]string{"--agent", "a=x", "--agent-idle", "-1s"}, "--agent-idle -1s"},
		{[]string{"--", ""}, "-- AGENT: empty command"},
	}
	for _, tt := range tests {
		_, err := parseRelay(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}

// TestAgentsDefault checks the order: --default-agent, else the file's
// default, else the first agent, where file agents come before --agent
// flags and those before `-- AGENT`.
func TestAgentsDefault(t *testing.T) {
	withDefault := writeFile(t, "d.json", `{"default": "f2", "agents": [{"name": "f1", "command": "x"}, {"name": "f2", "command": "y"}]}`)
	noDefault := writeFile(t, "n.toml", "[[agents]]\nname = \"f1\"\ncommand = \"x\"\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--agents", withDefault, "--agent", "a=x", "--", "b"}, "f2"},
		{[]string{"--agents", noDefault, "--agent", "a=x", "--", "b"}, "f1"},
		{[]string{"--agent", "a=x", "--agent", "c=x", "--", "b"}, "a"},
		{[]string{"--", "/usr/bin/b", "--flag"}, "b"},
		{[]string{"--agents", withDefault, "--default-agent", "f1"}, "f1"},
		{[]string{"--agents", withDefault, "--agent", "a=x", "--default-agent", "a"}, "a"},
		{[]string{"--agent", "a=x", "--default-agent", "b", "--", "b"}, "b"},
	}
	for _, tt := range tests {
		opts, err := parseRelay(t, tt.args...)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if opts.agents.defaultName != tt.want {
			t.Errorf("%q: default %q, want %q", tt.args, opts.agents.defaultName, tt.want)
		}
		def, _ := opts.agents.def(tt.want)
		if diff := cmp.Diff(def.Argv, opts.argv); diff != "" {
			t.Errorf("%q: argv is not the default agent's (-default +argv):\n%s", tt.args, diff)
		}
	}
}

// TestAgentsDashDash: `-- AGENT` is one more agent, named after its
// executable and made unique, and alone it behaves as it always has.
func TestAgentsDashDash(t *testing.T) {
	opts, err := parseRelay(t, "--set", "model=x", "--", "/opt/bin/claude-agent-acp", "--debug", "a,b")
	if err != nil {
		t.Fatal(err)
	}
	want := agentOptions{
		defs:        []agentDef{{Name: "claude-agent-acp", Argv: []string{"/opt/bin/claude-agent-acp", "--debug", "a,b"}}},
		defaultName: "claude-agent-acp",
		idle:        defaultAgentIdle,
	}
	if diff := cmp.Diff(want, opts.agents, cmpAgents); diff != "" {
		t.Errorf("agents mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.defs[0].Argv, opts.argv); diff != "" {
		t.Errorf("argv mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"model=x"}, opts.sets); diff != "" {
		t.Errorf("sets mismatch (-want +got):\n%s", diff)
	}

	file := writeFile(t, "a.json", `{"agents": [{"name": "codex", "command": "codex-acp"}]}`)
	opts, err = parseRelay(t, "--agents", file, "--agent", "codex-2=x", "--", "./codex", "-v")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range opts.agents.defs {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"codex", "codex-2", "codex-3"}, names); diff != "" {
		t.Errorf("names mismatch (-want +got):\n%s", diff)
	}

	for argv0, want := range map[string]string{
		"/x/my agent!": "my-agent-",
		".hidden":      "hidden",
		"/":            "agent",
		"ä":            "agent",
		"claude_v1.2":  "claude_v1.2",
	} {
		if got := derivedAgentName(argv0); got != want {
			t.Errorf("derivedAgentName(%q) = %q, want %q", argv0, got, want)
		}
		if err := checkAgentName(derivedAgentName(argv0)); err != nil {
			t.Errorf("derivedAgentName(%q): %v", argv0, err)
		}
	}
}

func TestAgentsEnvVars(t *testing.T) {
	file := writeFile(t, "a.toml", "default = \"f\"\n[[agents]]\nname = \"f\"\ncommand = \"x\"\n")
	t.Setenv("ACP_SIDECAR_AGENTS", file)
	t.Setenv("ACP_SIDECAR_AGENT", "a=x --tools Read,Edit\n\n  b=y 'z w'  \n")
	t.Setenv("ACP_SIDECAR_DEFAULT_AGENT", "b")
	t.Setenv("ACP_SIDECAR_AGENT_IDLE", "0")
	opts, err := parseRelay(t)
	if err != nil {
		t.Fatal(err)
	}
	want := agentOptions{
		defs: []agentDef{
			{Name: "f", Argv: []string{"x"}},
			{Name: "a", Argv: []string{"x", "--tools", "Read,Edit"}},
			{Name: "b", Argv: []string{"y", "z w"}},
		},
		defaultName: "b",
		idle:        0,
	}
	if diff := cmp.Diff(want, opts.agents, cmpAgents); diff != "" {
		t.Errorf("agents mismatch (-want +got):\n%s", diff)
	}

	// Flags beat the environment: --agent replaces ACP_SIDECAR_AGENT's
	// agents rather than adding to them.
	opts, err = parseRelay(t, "--agent", "c=z", "--agent", "d=w", "--default-agent", "d", "--agent-idle", "90s")
	if err != nil {
		t.Fatal(err)
	}
	want = agentOptions{
		defs:        []agentDef{{Name: "f", Argv: []string{"x"}}, {Name: "c", Argv: []string{"z"}}, {Name: "d", Argv: []string{"w"}}},
		defaultName: "d",
		idle:        90 * time.Second,
	}
	if diff := cmp.Diff(want, opts.agents, cmpAgents); diff != "" {
		t.Errorf("agents with flags mismatch (-want +got):\n%s", diff)
	}
}

// TestAgentsCLIErrors runs the whole CLI: a bad agent setup is status 2 with
// the reason on stderr and nothing on stdout, and no agent at all still
// prints help and the message it always has.
func TestAgentsCLIErrors(t *testing.T) {
	state := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "a=x", "--agent", "a=y"}, `acp-sidecar: agent "a" is defined twice`},
		{[]string{"--agents", writeFile(t, "a.toml", "[[agents]]\nname = \"x\"\ncommnd = \"y\"\n")}, `unknown key "agents.comm`},
		{[]string{"--default-agent", "nope", "--", "agent"}, `--default-agent "nope": no such agent (have agent)`},
		{nil, "missing agent command"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runShowCLI(t, append([]string{"--state-dir", state}, tt.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want 2, nothing, %q", tt.args, code, stdout, stderr, tt.want)
		}
		if help := strings.Contains(stderr, "USAGE:"); help != (tt.args == nil) {
			t.Errorf("%q: help printed: %v, want %v", tt.args, help, tt.args == nil)
		}
	}
}

func TestAgentsIdleDefault(t *testing.T) {
	opts, err := parseRelay(t, "--", "agent")
	if err != nil {
		t.Fatal(err)
	}
	if opts.agents.idle != 5*time.Minute {
		t.Errorf("idle = %v, want 5m", opts.agents.idle)
	}
}

// TestMaxProtocol: --max-protocol takes the versions the sidecar speaks,
// and v2 only with one agent: the agent selector speaks v1's words. By
// default it is 2 with one agent, 1 with several.
func TestMaxProtocol(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--max-protocol", "2", "--", "agent"}, 2},
		{[]string{"--max-protocol", "1", "--", "agent"}, 1},
		{[]string{"--", "agent"}, 2},
		{[]string{"--agent", "a=x", "--agent", "b=y"}, 1},
		{[]string{"--max-protocol", "1", "--agent", "a=x", "--agent", "b=y"}, 1},
	} {
		if opts, err := parseRelay(t, tt.args...); err != nil || opts.maxProtocol != tt.want {
			t.Errorf("%q: max protocol %d (%v), want %d", tt.args, opts.maxProtocol, err, tt.want)
		}
	}
	for _, args := range [][]string{
		{"--max-protocol", "3", "--", "agent"},
		{"--max-protocol", "0", "--", "agent"},
		{"--max-protocol", "2", "--agent", "a=x", "--agent", "b=y"},
	} {
		if _, err := parseRelay(t, args...); err == nil || !strings.Contains(err.Error(), "--max-protocol") {
			t.Errorf("%q: error %v, want one naming --max-protocol", args, err)
		}
	}
}

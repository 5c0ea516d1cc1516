package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/intercept/record"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
)

// agentDef is one agent the sidecar may run.
type agentDef struct {
	Name string
	Argv []string
	Env  []string // KEY=VALUE added to the sidecar's environment; nil: none
	Sets []string // per-agent --set values, ID=VALUE
}

// agentOptions are the agents a relay may run and switch sessions between.
// With one agent the relay runs it as it always has; with two or more a
// session starts on defaultName and may be moved to another.
type agentOptions struct {
	defs        []agentDef
	defaultName string
	// idle is how long an agent no session uses keeps running before it is
	// stopped, so that switching back is quick but unused agents do not
	// hold memory for days; 0 keeps every agent until the sidecar exits.
	idle time.Duration
}

// def returns the agent called name.
func (o agentOptions) def(name string) (agentDef, bool) {
	for _, d := range o.defs {
		if d.Name == name {
			return d, true
		}
	}
	return agentDef{}, false
}

// defaultAgentIdle is --agent-idle's default: long enough to switch away and
// back without a cold start, short enough that a forgotten agent goes away.
const defaultAgentIdle = 5 * time.Minute

// errNoAgent is the error when no agent is given in any form. Its text is the
// one the sidecar has always printed (cli_errors.txtar checks it).
var errNoAgent = errors.New("missing agent command: acp-sidecar [flags] -- AGENT [ARGS...]")

// agentNameRE is what an agent name may look like: names are typed into
// switch commands and show up in logs, so no spaces and no quoting.
var agentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// agentOptionsFrom reads the agent flags of the relay action.
func agentOptionsFrom(c *cli.Context) (agentOptions, error) {
	defs, def, err := resolveAgents(c)
	if err != nil {
		return agentOptions{}, err
	}
	idle := c.Duration("agent-idle")
	if idle < 0 {
		return agentOptions{}, fmt.Errorf("--agent-idle %s: want 0 (never) or more", idle)
	}
	return agentOptions{defs: defs, defaultName: def, idle: idle}, nil
}

// resolveAgents gathers the agents from --agents FILE, the --agent flags and
// the `-- AGENT [ARGS...]` form, in that order, and picks the one new
// sessions start on: --default-agent, else the file's default, else the first
// agent. It returns errNoAgent when there is none.
func resolveAgents(c *cli.Context) (defs []agentDef, defaultName string, err error) {
	type sourced struct {
		def  agentDef
		from string // where it was defined, for the duplicate error
	}
	var all []sourced
	var fileDefault string
	if path := c.String("agents"); path != "" {
		file, err := loadAgentsFile(path)
		if err != nil {
			return nil, "", err
		}
		for _, d := range file.defs {
			all = append(all, sourced{d, "agents file " + path})
		}
		fileDefault = file.defaultName
	}
	if l, ok := c.Generic("agent").(*rawList); ok {
		for _, spec := range l.vals {
			d, err := parseAgentFlag(spec)
			if err != nil {
				return nil, "", err
			}
			all = append(all, sourced{d, "--agent"})
		}
	}
	seen := make(map[string]string)
	for _, s := range all {
		if prev, dup := seen[s.def.Name]; dup {
			return nil, "", fmt.Errorf("agent %q is defined twice (%s, %s)", s.def.Name, prev, s.from)
		}
		seen[s.def.Name] = s.from
	}
	if argv := c.Args().Slice(); len(argv) > 0 {
		if strings.TrimSpace(argv[0]) == "" {
			return nil, "", errors.New("-- AGENT: empty command")
		}
		// Named after the executable, made unique: the user never chose
		// this name, so a clash with a named agent is not an error.
		base := derivedAgentName(argv[0])
		name := base
		for n := 2; seen[name] != ""; n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		seen[name] = "-- AGENT"
		all = append(all, sourced{agentDef{Name: name, Argv: slices.Clone(argv)}, "-- AGENT"})
	}
	if len(all) == 0 {
		return nil, "", errNoAgent
	}
	for _, s := range all {
		defs = append(defs, s.def)
	}
	names := func() string {
		var ns []string
		for _, d := range defs {
			ns = append(ns, d.Name)
		}
		return strings.Join(ns, ", ")
	}
	// The file's default is checked even when --default-agent overrides
	// it, so that a typo in the file surfaces the first time, not the day
	// the flag is dropped.
	if fileDefault != "" && seen[fileDefault] == "" {
		return nil, "", fmt.Errorf("agents file %s: default %q: no such agent (have %s)", c.String("agents"), fileDefault, names())
	}
	defaultName = defs[0].Name
	if fileDefault != "" {
		defaultName = fileDefault
	}
	if flagDefault := c.String("default-agent"); flagDefault != "" {
		if seen[flagDefault] == "" {
			return nil, "", fmt.Errorf("--default-agent %q: no such agent (have %s)", flagDefault, names())
		}
		defaultName = flagDefault
	}
	return defs, defaultName, nil
}

// parseAgentFlag reads one --agent NAME=COMMAND.
func parseAgentFlag(spec string) (agentDef, error) {
	name, command, ok := strings.Cut(spec, "=")
	if !ok {
		return agentDef{}, fmt.Errorf("--agent %q: want NAME=COMMAND", spec)
	}
	if err := checkAgentName(name); err != nil {
		return agentDef{}, fmt.Errorf("--agent %q: %w", spec, err)
	}
	argv, err := splitCommand(command)
	if err != nil {
		return agentDef{}, fmt.Errorf("--agent %s: command: %w", name, err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return agentDef{}, fmt.Errorf("--agent %s: empty command", name)
	}
	return agentDef{Name: name, Argv: argv}, nil
}

func checkAgentName(name string) error {
	if name == "" {
		return errors.New("empty agent name")
	}
	if !agentNameRE.MatchString(name) {
		return fmt.Errorf("agent name %q: want letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// derivedAgentName names the `-- AGENT` form's agent after its executable,
// with anything a name may not hold replaced by '-'.
func derivedAgentName(argv0 string) string {
	base := []byte(filepath.Base(argv0))
	for i, b := range base {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			base[i] = '-'
		}
	}
	name := strings.TrimLeft(string(base), "._-")
	if name == "" {
		return "agent"
	}
	return name
}

// splitCommand splits --agent's COMMAND into argv as a POSIX shell splits
// words, but expands nothing ($, ~, globs and ; are plain characters): an
// editor's config holds the command as one string, and a path with spaces or
// an argument such as --prompt 'a b' must survive it. Single quotes keep
// everything up to the next single quote; double quotes keep everything but
// \" \\ \$ \` (the backslash is dropped) and \newline (dropped whole); outside
// quotes a backslash keeps the next character. An unterminated quote or a
// trailing backslash is an error rather than a guess.
func splitCommand(s string) ([]string, error) {
	argv := []string{}
	var word strings.Builder
	inWord := false // a word has started, even if it is still empty ('')
	// Bytes are enough: every special character is ASCII, and no byte of a
	// multi-byte UTF-8 sequence is.
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				argv = append(argv, word.String())
				word.Reset()
				inWord = false
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote at byte %d of %q", i, s)
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					switch s[j+1] {
					case '"', '\\', '$', '`':
						j++
					case '\n':
						j++
						continue
					}
				}
				word.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated double quote at byte %d of %q", i, s)
			}
			i = j
			inWord = true
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("trailing backslash in %q", s)
			}
			i++
			if s[i] == '\n' {
				continue // a line continuation, as in sh
			}
			word.WriteByte(s[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		argv = append(argv, word.String())
	}
	return argv, nil
}

// agentsFile is the --agents file. Its fields are the documented schema
// (docs/agents.md, "The agents file"); a key outside it is an error, so a typo such as
// "comand" is reported instead of silently dropping the agent's command.
type agentsFile struct {
	Default string       `json:"default" toml:"default"`
	Agents  []agentEntry `json:"agents" toml:"agents"`
}

type agentEntry struct {
	Name    string            `json:"name" toml:"name"`
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	Set     []string          `json:"set" toml:"set"`
}

// loadedAgents is an --agents file, checked.
type loadedAgents struct {
	defs        []agentDef
	defaultName string
}

// loadAgentsFile reads and checks an --agents file. The extension picks the
// format; any other extension is tried as JSON, then as TOML.
func loadAgentsFile(path string) (loadedAgents, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return loadedAgents{}, fmt.Errorf("agents file: %w", err)
	}
	var f agentsFile
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		f, err = decodeAgentsJSON(data)
	case ".toml":
		f, err = decodeAgentsTOML(data)
	default:
		var jerr, terr error
		if f, jerr = decodeAgentsJSON(data); jerr != nil {
			if f, terr = decodeAgentsTOML(data); terr != nil {
				err = fmt.Errorf("neither JSON (%v) nor TOML (%v)", jerr, terr)
			}
		}
	}
	if err != nil {
		return loadedAgents{}, fmt.Errorf("agents file %s: %w", path, err)
	}
	out, err := f.check()
	if err != nil {
		return loadedAgents{}, fmt.Errorf("agents file %s: %w", path, err)
	}
	return out, nil
}

func decodeAgentsJSON(data []byte) (agentsFile, error) {
	var f agentsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // its error names the key: json: unknown field "comand"
	if err := dec.Decode(&f); err != nil {
		return agentsFile{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return agentsFile{}, errors.New("data after the top-level object")
	}
	return f, nil
}

func decodeAgentsTOML(data []byte) (agentsFile, error) {
	var f agentsFile
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&f)
	if err != nil {
		return agentsFile{}, err
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		keys := make([]string, len(extra))
		for i, k := range extra {
			keys[i] = strconv.Quote(k.String())
		}
		return agentsFile{}, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	return f, nil
}

// check turns the file's entries into agents. Names are checked here;
// uniqueness across the file and the flags is resolveAgents' job.
func (f agentsFile) check() (loadedAgents, error) {
	var out loadedAgents
	for i, e := range f.Agents {
		if e.Name == "" {
			return loadedAgents{}, fmt.Errorf("agents[%d]: missing name", i)
		}
		if err := checkAgentName(e.Name); err != nil {
			return loadedAgents{}, fmt.Errorf("agents[%d]: %w", i, err)
		}
		if strings.TrimSpace(e.Command) == "" {
			return loadedAgents{}, fmt.Errorf("agent %s: empty command", e.Name)
		}
		d := agentDef{Name: e.Name, Argv: append([]string{e.Command}, e.Args...)}
		// Sorted, so the agent's environment does not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			v := e.Env[k]
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return loadedAgents{}, fmt.Errorf("agent %s: env %q: want a name without '=' and values without NUL", e.Name, k)
			}
			d.Env = append(d.Env, k+"="+v)
		}
		for _, s := range e.Set {
			if _, err := record.ParseSetting(s); err != nil {
				return loadedAgents{}, fmt.Errorf("agent %s: set: %w", e.Name, err)
			}
			d.Sets = append(d.Sets, s)
		}
		out.defs = append(out.defs, d)
	}
	if f.Default != "" {
		if err := checkAgentName(f.Default); err != nil {
			return loadedAgents{}, fmt.Errorf("default: %w", err)
		}
	}
	out.defaultName = f.Default
	return out, nil
}

// rawList is a repeatable flag's values, each kept whole. urfave/cli's
// StringSliceFlag splits every value on commas, and an agent's command line
// may hold commas (--allowed-tools Read,Edit). The app-wide switch that stops
// the splitting would also change --set, whose comma form
// (--set model=x,mode=y, and ACP_SIDECAR_SET=model=x,mode=y) users rely on.
type rawList struct {
	vals    []string
	fromEnv bool // vals came from the env var; the first flag replaces them
}

func (l *rawList) Set(v string) error {
	if l.fromEnv {
		// Flags beat the environment, as they do for every other flag.
		l.vals, l.fromEnv = nil, false
	}
	l.vals = append(l.vals, v)
	return nil
}

// String is what help shows as the default: there is none.
func (l *rawList) String() string { return "" }

// rawListFlag is a repeatable flag of whole values. Its env var holds one
// value per line, since any other separator could be part of a value.
type rawListFlag struct {
	*cli.GenericFlag
}

func newRawListFlag(name, env, usage string) *rawListFlag {
	return &rawListFlag{&cli.GenericFlag{Name: name, EnvVars: envs(env), Value: &rawList{}, Usage: usage}}
}

func (f *rawListFlag) Apply(set *flag.FlagSet) error {
	l := f.Value.(*rawList)
	l.vals, l.fromEnv = nil, false
	if err := f.GenericFlag.Apply(set); err != nil {
		return err
	}
	if len(l.vals) == 0 {
		return nil
	}
	// GenericFlag.Apply set the env var's value whole; split it by line.
	var vals []string
	for line := range strings.Lines(strings.Join(l.vals, "\n")) {
		if line = strings.TrimSpace(line); line != "" {
			vals = append(vals, line)
		}
	}
	l.vals, l.fromEnv = vals, true
	return nil
}

package acpschema

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A Schema is one ACP version's definitions, compiled. It does not change
// once loaded and is safe for concurrent use; what one connection has said
// is its Judge's.
type Schema struct {
	Version int
	File    string // the schema file the definitions come from, under the schema directory: v2/schema.unstable.json
	Path    string // File, absolute

	v    version
	defs map[string]*jsonschema.Schema
}

// An Option changes what Load compiles.
type Option func(*options)

type options struct {
	stable bool
}

// Stable judges by the version's stable schema, vN/schema.json. Without
// it a Schema judges by vN/schema.unstable.json, which has the drafts
// today's agents send as well (compaction and fork among them) and is what
// an editor's SDK validates with. A definition only the unstable schema
// has (in v2, session/fork's) still comes from that one. The fake agent's
// v2 tests judge by it, so that the fake agent speaks stable v2 wherever
// stable v2 has a word for what it says.
func Stable() Option { return func(o *options) { o.stable = true } }

// The compiler's names for the schema files: errors name definitions by
// them (Detail takes them out).
const (
	mainResource     = "acp.json"
	unstableResource = "acp.unstable.json" // with Stable, for what schema.json has not
)

// Load compiles the definitions of ACP version from dir, the schema
// directory of the @agentclientprotocol/sdk npm package.
func Load(dir string, version int, opts ...Option) (*Schema, error) {
	ver, ok := versions[version]
	if !ok {
		return nil, fmt.Errorf("no schema file known for ACP v%d", version)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	file := ver.dir + "/schema.unstable.json"
	if o.stable {
		file = ver.dir + "/schema.json"
	}
	path, err := filepath.Abs(filepath.Join(dir, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	doc, err := readSchema(path)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(mainResource, doc); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	unstablePath := ""
	if o.stable {
		unstablePath = filepath.Join(filepath.Dir(path), "schema.unstable.json")
		udoc, err := readSchema(unstablePath)
		if err != nil {
			return nil, err
		}
		if err := c.AddResource(unstableResource, udoc); err != nil {
			return nil, fmt.Errorf("load %s: %w", unstablePath, err)
		}
	}
	s := &Schema{Version: version, File: file, Path: path, v: ver, defs: map[string]*jsonschema.Schema{}}
	for _, d := range ver.defNames() {
		if s.defs[d] != nil {
			continue
		}
		res, from := mainResource, path
		if o.stable && !hasDef(doc, d) {
			res, from = unstableResource, unstablePath
		}
		if s.defs[d], err = c.Compile(res + "#/$defs/" + d); err != nil {
			return nil, fmt.Errorf("compile %s of %s: %w", d, from, err)
		}
	}
	return s, nil
}

// readSchema reads the schema file at path.
func readSchema(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (DIR is the schema directory of @agentclientprotocol/sdk, which holds v1/ and v2/)", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return doc, nil
}

// hasDef reports whether the schema document doc defines name.
func hasDef(doc any, name string) bool {
	root, _ := doc.(map[string]any)
	defs, _ := root["$defs"].(map[string]any)
	_, ok := defs[name]
	return ok
}

// cacheDirs are where scripts/e2e-setup.sh installs the SDK's schema
// directory, under the repository's root: with claude-agent-acp and with
// codex-acp, which bring the same SDK (2.4.0).
var cacheDirs = [...]string{
	".cache/e2e/agentclientprotocol-claude-agent-acp/node_modules/@agentclientprotocol/sdk/schema",
	".cache/e2e/agentclientprotocol-codex-acp/node_modules/@agentclientprotocol/sdk/schema",
}

// CacheDir is the SDK's schema directory in the repository whose root is
// root: the first place scripts/e2e-setup.sh installs it that has v1/ and
// v2/. When there is none the error wraps fs.ErrNotExist and says how to
// install it.
func CacheDir(root string) (string, error) {
	for _, d := range cacheDirs {
		dir := filepath.Join(root, filepath.FromSlash(d))
		if isDir(filepath.Join(dir, "v1")) && isDir(filepath.Join(dir, "v2")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no schema directory of @agentclientprotocol/sdk with v1/ and v2/ in any of %s under %s: %w; run scripts/e2e-setup.sh claude (or codex), which installs it with the agent",
		strings.Join(cacheDirs[:], ", "), root, fs.ErrNotExist)
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// loaded is what LoadCache compiled, by what it was asked.
var loaded struct {
	mu  sync.Mutex
	got map[cacheKey]cacheEntry
}

type cacheKey struct {
	root    string
	version int
	opts    options
}

type cacheEntry struct {
	s   *Schema
	err error
}

// LoadCache is Load from CacheDir(root), for tests. It compiles each
// version once per process (per root and options), as every test of a
// binary judges by the same files; a failure is kept too.
func LoadCache(root string, version int, opts ...Option) (*Schema, error) {
	key := cacheKey{root: root, version: version}
	for _, opt := range opts {
		opt(&key.opts)
	}
	loaded.mu.Lock()
	defer loaded.mu.Unlock()
	if e, ok := loaded.got[key]; ok {
		return e.s, e.err
	}
	dir, err := CacheDir(root)
	var s *Schema
	if err == nil {
		s, err = Load(dir, version, opts...)
	}
	if loaded.got == nil {
		loaded.got = map[cacheKey]cacheEntry{}
	}
	loaded.got[key] = cacheEntry{s, err}
	return s, err
}

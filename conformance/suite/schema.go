package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// With --schema DIR every frame a client receives, directly and through
// the sidecar, in every run of every check, is validated against the ACP
// schema of the version the run speaks (DIR/v1/schema.unstable.json or
// DIR/v2/schema.unstable.json, DIR being the schema directory of the
// @agentclientprotocol/sdk npm package), as an editor whose SDK validates
// what it receives (the TypeScript SDK's zod) reads it; conformance/e2e
// (schema_test.go) checks its own clients' frames the same way. A frame is
// judged by what it is: a response by the method of the request it
// answers, an error by Error, a request or notification of the agent's by
// its method; one the schema has no definition for (an extension's,
// `_sidecar/*`) is not judged. The schema check reports what was found,
// once every other check has ended.
//
// Whose a violation is: a frame of a direct run is the agent's. Through
// the sidecar, a frame the sidecar's trace shows the agent wrote as the
// client got it was passed on unchanged, and is the agent's too; any other
// (the sidecar wrote or rewrote it) is the sidecar's, unless the agent's
// own frames have the same fault, which a rewrite kept.

// acpVersion is one version's schema file and the definitions its frames
// are judged by: the result of each client method, and the params of each
// agent method a client gets.
type acpVersion struct {
	file                     string
	responseDefs, paramsDefs map[string]string
}

var acpVersions = map[int]acpVersion{
	protoV1: {file: "v1/schema.unstable.json",
		responseDefs: map[string]string{
			"initialize": "InitializeResponse", "authenticate": "AuthenticateResponse",
			"session/new": "NewSessionResponse", "session/load": "LoadSessionResponse",
			"session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
			"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
			"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
			"session/set_mode": "SetSessionModeResponse", "session/set_config_option": "SetSessionConfigOptionResponse",
		},
		paramsDefs: map[string]string{
			"session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest",
			"fs/read_text_file": "ReadTextFileRequest", "fs/write_text_file": "WriteTextFileRequest",
		}},
	// v2 has no session/load, set_mode, authenticate or client fs methods.
	protoV2: {file: "v2/schema.unstable.json",
		responseDefs: map[string]string{
			"initialize":  "InitializeResponse",
			"session/new": "NewSessionResponse", "session/resume": "ResumeSessionResponse", "session/fork": "ForkSessionResponse",
			"session/list": "ListSessionsResponse", "session/close": "CloseSessionResponse",
			"session/delete": "DeleteSessionResponse", "session/prompt": "PromptResponse",
			"session/set_config_option": "SetSessionConfigOptionResponse",
		},
		paramsDefs: map[string]string{
			"session/update": "UpdateSessionNotification", "session/request_permission": "RequestPermissionRequest",
		}},
}

// acpSchema is one version's definitions, compiled.
type acpSchema struct {
	acpVersion
	version int
	path    string // the schema file
	defs    map[string]*jsonschema.Schema
}

// loadSchema compiles the definitions of ACP version from dir.
func loadSchema(dir string, version int) (*acpSchema, error) {
	ver, ok := acpVersions[version]
	if !ok {
		return nil, fmt.Errorf("no schema file known for ACP v%d", version)
	}
	path, err := filepath.Abs(filepath.Join(dir, filepath.FromSlash(ver.file)))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (DIR is the schema directory of @agentclientprotocol/sdk, which holds v1/ and v2/)", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("acp.json", doc); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	s := &acpSchema{acpVersion: ver, version: version, path: path, defs: map[string]*jsonschema.Schema{}}
	names := []string{"Error"}
	for _, m := range []map[string]string{ver.responseDefs, ver.paramsDefs} {
		for _, d := range m {
			names = append(names, d)
		}
	}
	for _, d := range names {
		if s.defs[d], err = c.Compile("acp.json#/$defs/" + d); err != nil {
			return nil, fmt.Errorf("compile %s of %s: %w", d, path, err)
		}
	}
	return s, nil
}

// violation is one frame a client received that the schema does not
// allow.
type violation struct {
	check, run string // where it was received
	def        string // the definition it was judged by
	frame      []byte
	err        string // the validator's word, on one line
	sidecar    bool   // the sidecar wrote or changed it (else it is the agent's)
}

// fault is what makes violations the same fault: the definition and the
// validator's word, array indices left out (the same fault in the third
// command of one list and the fifth of another).
func (v violation) fault() string {
	return v.def + ": " + indexRE.ReplaceAllString(v.err, "/*")
}

var indexRE = regexp.MustCompile(`/\d+`)

// validate judges every frame received among events (one run's, in the
// order they crossed), by what the frame is (see above), and returns how
// many it judged and the ones that are not valid.
func (s *acpSchema) validate(events []event) (int, []violation) {
	asked := map[string]string{} // the client's request ids, by raw id: their method
	n := 0
	var out []violation
	for _, ev := range events {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(ev.Frame, &m) != nil {
			continue // not JSON: the hostile check's line, or the peer's garbage
		}
		if ev.Dir == "send" {
			if m.Method != "" && len(m.ID) > 0 {
				asked[string(bytes.TrimSpace(m.ID))] = m.Method
			}
			continue
		}
		var def string
		var part json.RawMessage
		switch {
		case m.Method != "":
			def, part = s.paramsDefs[m.Method], m.Params
		case m.Error != nil:
			def, part = "Error", m.Error
		case m.Result != nil:
			def, part = s.responseDefs[asked[string(bytes.TrimSpace(m.ID))]], m.Result
		}
		if def == "" {
			continue
		}
		n++
		if len(part) == 0 {
			part = json.RawMessage("null") // a request's params left out
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
		if err == nil {
			err = s.defs[def].Validate(inst)
		}
		if err != nil {
			out = append(out, violation{def: def, frame: ev.Frame, err: schemaWords(err)})
		}
	}
	return n, out
}

// schemaWords is the validator's error on one line, without the schema's
// own name for itself.
func schemaWords(err error) string {
	var ve *jsonschema.ValidationError
	s := err.Error()
	if errors.As(err, &ve) {
		if _, rest, ok := strings.Cut(s, "\n"); ok {
			s = rest
		}
	}
	return oneLine(strings.ReplaceAll(s, "acp.json#/$defs/", ""), 400)
}

// schemaLog collects, for the schema check, what every other check's runs
// received: how many frames were judged and which were not valid. take
// is called as each check's peers have ended, from the check's worker, so
// checks side by side share it.
type schemaLog struct {
	s *acpSchema

	mu             sync.Mutex
	direct, viaRun int // runs judged, directly and through the sidecar
	frames         int
	found          []violation
	runs           []schemaRun // for the schema check's transcript
}

// schemaRun is what one run's frames came to.
type schemaRun struct {
	Check      string `json:"check"`
	Run        string `json:"run"`
	Frames     int    `json:"frames"`
	Violations int    `json:"violations"`
}

func newSchemaLog(s *acpSchema) *schemaLog { return &schemaLog{s: s} }

// take judges the frames every run of r received. A nil log (no --schema)
// takes nothing.
func (l *schemaLog) take(r *checkRun) {
	if l == nil {
		return
	}
	for _, ru := range r.runs {
		n, vs := l.s.validate(ru.c.transcript())
		if ru.trace != "" && len(vs) > 0 {
			agents := agentFrames(ru.trace)
			for i := range vs {
				vs[i].sidecar = !agents[compactJSON(vs[i].frame)]
			}
		}
		for i := range vs {
			vs[i].check, vs[i].run = r.id, ru.name
		}
		l.mu.Lock()
		if ru.trace == "" {
			l.direct++
		} else {
			l.viaRun++
		}
		l.frames += n
		l.found = append(l.found, vs...)
		l.runs = append(l.runs, schemaRun{Check: r.id, Run: ru.name, Frames: n, Violations: len(vs)})
		l.mu.Unlock()
	}
}

// agentFrames are the frames the agent wrote to the sidecar, by the
// sidecar's trace at path, compacted; nil if the trace cannot be read,
// and then every violation through that sidecar is taken for the
// sidecar's, whose trace it is.
func agentFrames(path string) map[string]bool {
	entries, err := readTrace(path)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range entries {
		if e.Dir == "agent->client" && e.From == "peer" {
			out[compactJSON(e.Frame)] = true
		}
	}
	return out
}

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// checkSchema judges what every other check's client received (schemaLog):
// it fails on a frame the sidecar wrote or changed that the schema does not
// allow (the sidecar's failure), and on the agent's own (the agent's),
// saying whose each is.
func checkSchema(_ context.Context, r *checkRun, _ probeResult) error {
	l := r.cfg.schema
	if l == nil {
		return skipf("no --schema DIR given: the frames were not validated")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.transcript = "schema.jsonl"
	if err := l.writeTranscript(filepath.Join(r.cfg.transcripts, r.transcript)); err != nil {
		r.transcript = ""
	}
	var agent, sidecar []violation
	faults := map[string]bool{}
	for _, v := range l.found {
		if !v.sidecar {
			agent = append(agent, v)
			faults[v.fault()] = true
		}
	}
	for _, v := range l.found {
		if v.sidecar && !faults[v.fault()] {
			sidecar = append(sidecar, v)
		} else if v.sidecar {
			agent = append(agent, v) // the agent's fault, in a frame the sidecar rewrote
		}
	}
	what := fmt.Sprintf("ACP v%d (%s)", l.s.version, filepath.Base(filepath.Dir(l.s.path))+"/"+filepath.Base(l.s.path))
	switch {
	case len(sidecar) > 0:
		msg := fmt.Sprintf("the sidecar's: frames the sidecar wrote or changed are not valid %s (%s): %s", what, count(sidecar), describeViolations(sidecar))
		if len(agent) > 0 {
			msg += fmt.Sprintf("; and the agent's own (%s): %s", count(agent), describeViolations(agent))
		}
		return errors.New(msg)
	case len(agent) > 0:
		return fmt.Errorf("the agent's own: frames the agent sent (directly, or passed on unchanged by the sidecar) are not valid %s (%s): %s", what, count(agent), describeViolations(agent))
	}
	r.note("%d frames the client received in %d runs (%d directly, %d through the sidecar) are valid %s", l.frames, l.direct+l.viaRun, l.direct, l.viaRun, what)
	return nil
}

// count says how many frames vs are and how many faults they have.
func count(vs []violation) string {
	faults := map[string]bool{}
	for _, v := range vs {
		faults[v.fault()] = true
	}
	frames := fmt.Sprintf("%d frames", len(vs))
	if len(vs) == 1 {
		frames = "1 frame"
	}
	if len(faults) == 1 {
		return frames + ", one fault"
	}
	return fmt.Sprintf("%s, %d faults", frames, len(faults))
}

// describeViolations gives the first frame of each fault, three at most.
func describeViolations(vs []violation) string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.fault()] {
			continue
		}
		seen[v.fault()] = true
		if len(out) == 3 {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%s (%s, %s): %s in %s", v.def, v.check, v.run, v.err, oneLineStart(string(v.frame), 240)))
	}
	return strings.Join(out, "; ")
}

// oneLineStart is s on one line, cut to its first n bytes (oneLine keeps
// the end, which of a frame is its least telling part).
func oneLineStart(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// writeTranscript writes the schema check's transcript: one line per run
// judged ({check, run, frames, violations}), then one per violation
// ({check, run, def, error, whose, frame}). Under l.mu.
func (l *schemaLog) writeTranscript(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	runs := slices.Clone(l.runs)
	slices.SortStableFunc(runs, func(a, b schemaRun) int { return strings.Compare(a.Check, b.Check) })
	for _, ru := range runs {
		_ = enc.Encode(map[string]any{"src": "schema", "schema": l.s.path, "check": ru.Check, "run": ru.Run, "frames": ru.Frames, "violations": ru.Violations})
	}
	for _, v := range l.found {
		whose := "agent"
		if v.sidecar {
			whose = "sidecar"
		}
		rec := map[string]any{"src": "schema-violation", "check": v.check, "run": v.run, "def": v.def, "error": v.err, "whose": whose}
		if json.Valid(v.frame) {
			rec["frame"] = json.RawMessage(v.frame)
		} else {
			rec["malformed"] = string(v.frame)
		}
		_ = enc.Encode(rec)
	}
	return f.Close()
}

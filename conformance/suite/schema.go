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

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// With --schema DIR every frame a client receives, directly and through
// the sidecar, in every run of every check, is validated against the ACP
// schema of the version the run speaks (DIR/v1/schema.unstable.json or
// DIR/v2/schema.unstable.json, DIR being the schema directory of the
// @agentclientprotocol/sdk npm package), as an editor whose SDK validates
// what it receives reads it. conformance/acpschema judges the frames, as
// it does conformance/e2e's own clients' frames: a response by the method
// of the request it answers, an error by Error, a request or notification
// of the agent's by its method; one the schema has no definition for (an
// extension's, `_sidecar/*`) is not judged. The schema check reports what
// was found, once every other check has ended.
//
// Whose a violation is: a frame of a direct run is the agent's. Through
// the sidecar, a frame the sidecar's trace shows the agent wrote as the
// client got it was passed on unchanged, and is the agent's too; any other
// (the sidecar wrote or rewrote it) is the sidecar's, unless the agent's
// own frames have the same fault, which a rewrite kept.

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

// judgeRun judges every frame received among events (one run's, in the
// order they crossed) by what the frame is (acpschema.Judge), and returns
// how many it judged and the ones that are not valid.
func judgeRun(s *acpschema.Schema, events []event) (int, []violation) {
	j := &acpschema.Judge{Schema: s}
	n := 0
	var out []violation
	for _, ev := range events {
		from := proxy.AgentToClient
		if ev.Dir == "send" {
			from = proxy.ClientToAgent
		}
		// The client's own frames are fed for the requests their answers
		// are judged by, and not judged themselves.
		def, err := j.Frame(from, ev.Frame)
		if from == proxy.ClientToAgent || def == "" {
			continue
		}
		n++
		if err != nil {
			out = append(out, violation{def: def, frame: ev.Frame, err: oneLine(acpschema.Detail(err), 400)})
		}
	}
	return n, out
}

// schemaLog collects, for the schema check, what every other check's runs
// received: how many frames were judged and which were not valid. take
// is called as each check's peers have ended, from the check's worker, so
// checks side by side share it.
type schemaLog struct {
	s *acpschema.Schema

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

func newSchemaLog(s *acpschema.Schema) *schemaLog { return &schemaLog{s: s} }

// take judges the frames every run of r received. A nil log (no --schema)
// takes nothing.
func (l *schemaLog) take(r *checkRun) {
	if l == nil {
		return
	}
	for _, ru := range r.runs {
		n, vs := judgeRun(l.s, ru.c.transcript())
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
	what := fmt.Sprintf("ACP v%d (%s)", l.s.Version, l.s.File)
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
		_ = enc.Encode(map[string]any{"src": "schema", "schema": l.s.Path, "check": ru.Check, "run": ru.Run, "frames": ru.Frames, "violations": ru.Violations})
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

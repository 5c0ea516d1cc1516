package suite

import "encoding/json"

// SchemaVersion is the report's schemaVersion. 2 added each check's tier
// and sides, the warn verdict and summary.warn. 3 added the absorbed
// verdict and summary.absorbed: a spec-level check the agent fails
// directly but passes through the sidecar is no longer a fail. 4 added
// protocol, the ACP version the run's clients spoke (--protocol).
const SchemaVersion = 4

// Report is the --json report; report.schema.json describes it. Fields may
// be added; none is renamed or removed.
type Report struct {
	SchemaVersion int             `json:"schemaVersion"`
	Started       string          `json:"started"`
	DurationMs    int64           `json:"durationMs"`
	Sidecar       string          `json:"sidecar"`
	Protocol      int             `json:"protocol"` // the ACP version every client of the run spoke
	Agent         AgentInfo       `json:"agent"`
	Capabilities  json.RawMessage `json:"capabilities"`
	Config        ConfigSummary   `json:"config"`
	Transcripts   string          `json:"transcripts"`
	Summary       Summary         `json:"summary"`
	Checks        []CheckResult   `json:"checks"`
}

// AgentInfo is the agent command and what initialize said about it.
type AgentInfo struct {
	Command         []string `json:"command"`
	Name            string   `json:"name"`
	Title           string   `json:"title"`
	Version         string   `json:"version"`
	ProtocolVersion int      `json:"protocolVersion"`
}

// ConfigSummary is what a fresh session offers.
type ConfigSummary struct {
	Options []ConfigOption `json:"options"`
	Modes   []string       `json:"modes"`
	Models  []string       `json:"models"`
}

// ConfigOption is one configOptions entry of a fresh session.
type ConfigOption struct {
	ID       string   `json:"id"`
	Category string   `json:"category"`
	Current  string   `json:"current"`
	Values   []string `json:"values"`
}

// Summary counts the verdicts. Pass, Fail, Skip and Warn add up to the
// checks run; Absorbed is the part of Pass whose verdict is absorbed, so a
// reader that knows only pass and fail still counts an absorbed check as
// the pass it is.
type Summary struct {
	Pass     int `json:"pass"` // absorbed included
	Fail     int `json:"fail"`
	Skip     int `json:"skip"`
	Warn     int `json:"warn"`     // advisory checks that failed
	Absorbed int `json:"absorbed"` // spec-level checks the agent fails alone and passes through the sidecar
}

// count adds one check's verdict.
func (s *Summary) count(verdict string) {
	switch verdict {
	case Pass:
		s.Pass++
	case Absorbed:
		s.Pass++
		s.Absorbed++
	case Fail:
		s.Fail++
	case Skip:
		s.Skip++
	case Warn:
		s.Warn++
	}
}

// CheckResult is one check's outcome.
type CheckResult struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Tier       string `json:"tier"` // mandatory, capability or advisory
	Verdict    string `json:"verdict"`
	Detail     string `json:"detail"`
	DurationMs int64  `json:"durationMs"`
	Transcript string `json:"transcript"`
	Sides      *Sides `json:"sides,omitempty"` // the checks run directly and through the sidecar
}

// Sides are the verdicts of a spec-level check run directly and through
// the sidecar. The check passes when both pass, skips when both skip, is
// absorbed when the sidecar's passes and the direct one does not, and
// fails otherwise (warns, if advisory); bothWays has the whole table.
type Sides struct {
	Direct  Side `json:"direct"`
	Sidecar Side `json:"sidecar"`
}

// Side is one way's verdict (pass, fail or skip) and what was seen.
type Side struct {
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

func describeConfig(s *sessionConfig) ConfigSummary {
	out := ConfigSummary{Options: []ConfigOption{}, Modes: []string{}, Models: []string{}}
	if s == nil {
		return out
	}
	for _, o := range s.Options {
		vals := o.Values
		if vals == nil {
			vals = []string{}
		}
		out.Options = append(out.Options, ConfigOption{ID: o.ID, Category: o.Category, Current: unquote(o.Current), Values: vals})
	}
	if s.Modes != nil {
		out.Modes = append(out.Modes, s.Modes.Values...)
	}
	if s.Models != nil {
		out.Models = append(out.Models, s.Models.Values...)
	}
	return out
}

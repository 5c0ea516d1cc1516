package suite

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// option is one configOptions entry as the agent reported it.
type option struct {
	ID       string
	Name     string
	Category string
	Type     string
	Current  json.RawMessage
	Values   []string // offered values, groups flattened
}

// legacy is the legacy modes or models API's state.
type legacy struct {
	Current string
	Values  []string
}

// sessionConfig is a session's config as the agent last reported it:
// session results, set_* results (a success is an acceptance) and
// config_option_update / current_mode_update notifications.
type sessionConfig struct {
	Options []option
	Modes   *legacy
	Models  *legacy
}

func (s *sessionConfig) clone() *sessionConfig {
	if s == nil {
		return nil
	}
	out := &sessionConfig{Options: slices.Clone(s.Options)}
	if s.Modes != nil {
		m := *s.Modes
		out.Modes = &m
	}
	if s.Models != nil {
		m := *s.Models
		out.Models = &m
	}
	return out
}

// empty reports whether the agent exposes no config at all.
func (s *sessionConfig) empty() bool {
	return s == nil || (len(s.Options) == 0 && s.Modes == nil && s.Models == nil)
}

func (s *sessionConfig) byCategory(cat string) *option {
	if s == nil {
		return nil
	}
	for i := range s.Options {
		if s.Options[i].Category == cat {
			return &s.Options[i]
		}
	}
	return nil
}

func (s *sessionConfig) byID(id string) *option {
	if s == nil {
		return nil
	}
	for i := range s.Options {
		if s.Options[i].ID == id {
			return &s.Options[i]
		}
	}
	return nil
}

// view is the config as `_sidecar/status` shows live: each option's id and
// current value, then the legacy model and mode where no option of that
// category exists.
func (s *sessionConfig) view() map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for _, o := range s.Options {
		out[o.ID] = unquote(o.Current)
	}
	if s.Models != nil && s.byCategory("model") == nil {
		out["model"] = s.Models.Current
	}
	if s.Modes != nil && s.byCategory("mode") == nil {
		out["mode"] = s.Modes.Current
	}
	return out
}

// unquote turns a JSON string into its text; any other JSON stays as it is.
func unquote(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// formatView renders a view as "a=1 b=2", keys sorted.
func formatView(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, v[k])
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}

// diffView lists the keys where got differs from want.
func diffView(want, got map[string]string) []string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s: want %s, missing", k, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s: want %s, got %s", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected %s", k, g))
		}
	}
	sort.Strings(out)
	return out
}

// wireConfig is the config part of session results and updates.
type wireConfig struct {
	ConfigOptions json.RawMessage `json:"configOptions"`
	Modes         *struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	Models *struct {
		CurrentModelID  string `json:"currentModelId"`
		AvailableModels []struct {
			ModelID string `json:"modelId"`
		} `json:"availableModels"`
	} `json:"models"`
}

// wireOption is one configOptions entry, in either version: v1 names it
// by id, v2 by configId (checkOptions holds each version to its own).
type wireOption struct {
	ID           string          `json:"id"`
	ConfigID     string          `json:"configId"`
	Name         string          `json:"name"`
	Category     string          `json:"category"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      []struct {
		Value   *string `json:"value"`
		Options []struct {
			Value string `json:"value"`
		} `json:"options"`
	} `json:"options"`
}

func parseOptions(raw json.RawMessage) ([]option, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	var ws []wireOption
	if json.Unmarshal(raw, &ws) != nil {
		return nil, false
	}
	out := make([]option, 0, len(ws))
	for _, w := range ws {
		o := option{ID: cmp.Or(w.ID, w.ConfigID), Name: w.Name, Category: w.Category, Type: w.Type, Current: w.CurrentValue}
		for _, v := range w.Options {
			if v.Value != nil {
				o.Values = append(o.Values, *v.Value)
			}
			for _, g := range v.Options {
				o.Values = append(o.Values, g.Value)
			}
		}
		out = append(out, o)
	}
	return out, true
}

// parseConfig reads a session/new, load or resume result.
func parseConfig(result json.RawMessage) *sessionConfig {
	var w wireConfig
	_ = json.Unmarshal(result, &w)
	s := &sessionConfig{}
	s.Options, _ = parseOptions(w.ConfigOptions)
	if w.Modes != nil {
		l := &legacy{Current: w.Modes.CurrentModeID}
		for _, m := range w.Modes.AvailableModes {
			l.Values = append(l.Values, m.ID)
		}
		s.Modes = l
	}
	if w.Models != nil {
		l := &legacy{Current: w.Models.CurrentModelID}
		for _, m := range w.Models.AvailableModels {
			l.Values = append(l.Values, m.ModelID)
		}
		s.Models = l
	}
	return s
}

// configBook is every session's config as the peer last reported it, by
// session id. The conn feeds it each line it reads, in wire order and
// before a waiter can see the line (noteResult, applyUpdate), so a check
// that has seen a report reads its effect (of).
type configBook struct {
	mu        sync.Mutex
	bySession map[string]*sessionConfig
}

func newConfigBook() *configBook {
	return &configBook{bySession: map[string]*sessionConfig{}}
}

// noteResult records what a successful response says about config.
func (b *configBook) noteResult(method string, request []byte, result json.RawMessage) {
	var req struct {
		Params struct {
			SessionID string `json:"sessionId"`
			ConfigID  string `json:"configId"`
			ModeID    string `json:"modeId"`
			ModelID   string `json:"modelId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(request, &req)
	sid := req.Params.SessionID
	b.mu.Lock()
	defer b.mu.Unlock()
	switch method {
	case "session/new":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(result, &r) == nil && r.SessionID != "" {
			b.bySession[r.SessionID] = parseConfig(result)
		}
	case "session/load", "session/resume":
		b.bySession[sid] = parseConfig(result)
	case "session/set_config_option":
		var r struct {
			ConfigOptions json.RawMessage `json:"configOptions"`
		}
		if json.Unmarshal(result, &r) == nil {
			if opts, ok := parseOptions(r.ConfigOptions); ok {
				b.sessionLocked(sid).Options = opts
			}
		}
	case "session/set_mode":
		if s := b.sessionLocked(sid); s.Modes != nil {
			s.Modes.Current = req.Params.ModeID
		}
	case "session/set_model":
		if s := b.sessionLocked(sid); s.Models != nil {
			s.Models.Current = req.Params.ModelID
		}
	}
}

// sessionLocked is sid's config, made empty if none was reported yet.
// b.mu must be held.
func (b *configBook) sessionLocked(sid string) *sessionConfig {
	s := b.bySession[sid]
	if s == nil {
		s = &sessionConfig{}
		b.bySession[sid] = s
	}
	return s
}

// configUpdate is what the checks read of a session/update's params: the
// config reports (config_option_update, current_mode_update).
type configUpdate struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind          string          `json:"sessionUpdate"`
		ConfigOptions json.RawMessage `json:"configOptions"`
		CurrentModeID string          `json:"currentModeId"`
	} `json:"update"`
}

// applyUpdate records a session/update that reports config.
func (b *configBook) applyUpdate(params json.RawMessage) {
	var p configUpdate
	if json.Unmarshal(params, &p) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch p.Update.Kind {
	case "config_option_update":
		if opts, ok := parseOptions(p.Update.ConfigOptions); ok {
			b.sessionLocked(p.SessionID).Options = opts
		}
	case "current_mode_update":
		if s := b.sessionLocked(p.SessionID); s.Modes != nil {
			s.Modes.Current = p.Update.CurrentModeID
		}
	}
}

// of returns a copy of the session's config as last reported (nil if
// none was).
func (b *configBook) of(sid string) *sessionConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bySession[sid].clone()
}

// nextValue is the offered value after cur, cyclically: a non-current
// offered value, chosen the same way in every run.
func nextValue(values []string, cur string) (string, bool) {
	if len(values) < 2 && (len(values) == 0 || values[0] == cur) {
		return "", false
	}
	i := slices.Index(values, cur)
	for k := 1; k <= len(values); k++ {
		v := values[(i+k+len(values))%len(values)]
		if v != cur {
			return v, true
		}
	}
	return "", false
}

func slicesSort(s []string) { sort.Strings(s) }

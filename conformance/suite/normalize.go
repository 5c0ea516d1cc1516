package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Two runs of the same exchange differ in what the agent makes up: session
// ids, messageId, toolCallId, permission option ids, UUIDs and the like,
// timestamps, usage figures and costs. opencode, claude-agent-acp 0.101.0
// and codex-acp 2.6.0 put a fresh messageId on every chunk (issue 16).
// Comparing those by value fails on a sidecar that changed nothing, and
// blanking them out would miss a sidecar that swaps two ids or drops one.
// So each run's generated ids are numbered by first appearance, and frames
// compare on the numbers: two runs agree when the same id shows up in the
// same places, whatever its value.

var (
	// generatedRE finds ids inside any string: UUIDs, ULIDs, and ids with
	// the prefixes opencode (ses_, msg_, prt_) and Anthropic (toolu_) use.
	generatedRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}` +
		`|\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b` +
		`|\b(?:ses|msg|prt|toolu|call|per)_[0-9A-Za-z]{8,}\b`)
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`)
)

// idKey reports whether a field holds an id the agent made up.
func idKey(k string) bool {
	switch k {
	case "sessionId", "messageId", "userMessageId", "toolCallId", "optionId", "terminalId":
		return true
	}
	return strings.HasSuffix(k, "SessionId") // parentSessionId, …
}

// timeKeys hold a time, as a string or a number.
var timeKeys = map[string]bool{"updatedAt": true, "createdAt": true, "timestamp": true}

// usageKeys hold usage figures and costs (usage_update, a prompt result's
// usage).
var usageKeys = map[string]bool{
	"used": true, "size": true, "amount": true, "inputTokens": true, "outputTokens": true, "cachedReadTokens": true,
	"cachedWriteTokens": true, "thoughtTokens": true, "totalTokens": true,
}

// normalizer turns one run's frames into comparable text: generated ids
// numbered by first appearance (<id1>, <id2>, …), times as <time>, usage
// numbers as 0, the run's own world dir as <world>. For the sidecar's run it
// first takes out what the sidecar documents it adds:
// agentCapabilities._meta["acp-sidecar"], loadSession and
// sessionCapabilities.resume/list/fork/close/delete where the agent lacks
// them (in v2 capabilities._meta["acp-sidecar"] and capabilities.session.*), its slash commands in available_commands_update, and its own
// command list after an open (session/new, load, resume, fork), and the
// pickers it bridges into a session result for the client's dialect (legacy
// modes and models, or configOptions) where the direct run's results never
// had them. Frames are then compared as canonical JSON (keys sorted,
// numbers as written).
type normalizer struct {
	world      string // the run's world root
	proto      int    // the ACP version of the run (0: 1)
	sidecar    bool
	directCaps map[string]any
	own        map[string]bool
	agentFirst map[string]bool // sessions whose first command list was the agent's
	// agentResult are the sessions whose session result carried the
	// agent's commands (v2's availableCommands), which a later
	// available_commands_update replaces.
	agentResult map[string]bool
	// directPickers are the picker members (configOptions, modes, models)
	// some response of the direct run had in its result, and
	// current_mode_update when the direct run had that update.
	directPickers map[string]bool
	adds          []string
	problems      []string
	ids           map[string]string // generated value → its placeholder
}

func newNormalizer(world string, sidecar bool, directCaps map[string]any) *normalizer {
	return &normalizer{world: world, sidecar: sidecar, directCaps: directCaps, own: map[string]bool{}, agentFirst: map[string]bool{},
		agentResult: map[string]bool{}, ids: map[string]string{}}
}

// decodeFrame decodes a line as an object, keeping numbers as written.
func decodeFrame(raw []byte) map[string]any {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// marshalPlain marshals decoded JSON without escaping <, > and &, so
// placeholders and text read as they are.
func marshalPlain(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only decoded JSON comes here
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// pair is v's placeholder: the same for every appearance of v in this run,
// numbered in the order the values first appear.
func (n *normalizer) pair(v string) string {
	if p, ok := n.ids[v]; ok {
		return p
	}
	p := fmt.Sprintf("<id%d>", len(n.ids)+1)
	n.ids[v] = p
	return p
}

// walk normalizes v, found under key, in place where it can and returns
// the result. Object keys go in sorted order, so the numbering is the same
// in two runs that send the same frames.
func (n *normalizer) walk(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			x[k] = n.walk(x[k], k)
		}
		return x
	case []any:
		for i := range x {
			x[i] = n.walk(x[i], key)
		}
		return x
	case json.Number:
		if usageKeys[key] || timeKeys[key] {
			return json.Number("0")
		}
		return x
	case string:
		switch {
		case idKey(key):
			return n.pair(x)
		case timeKeys[key]:
			return "<time>"
		}
		if n.world != "" {
			x = strings.ReplaceAll(x, n.world, "<world>")
		}
		x = timeRE.ReplaceAllString(x, "<time>")
		return generatedRE.ReplaceAllStringFunc(x, n.pair)
	}
	return v
}

// split normalizes lines and separates the available_commands_update
// notifications, which agents send at no fixed point.
func (n *normalizer) split(lines [][]byte) (seq, cmds []string) {
	for _, l := range lines {
		m := decodeFrame(l)
		if m == nil {
			seq = append(seq, "unparsable: "+string(l))
			continue
		}
		isCmds := false
		if up := updateOf(m); n.sidecar && up != nil && up["sessionUpdate"] == "current_mode_update" && !n.directPickers["current_mode_update"] {
			// The legacy report the sidecar adds after a mode change the
			// agent reported only as a config option.
			if add := "current_mode_update bridged for the client's dialect"; !slices.Contains(n.adds, add) {
				n.adds = append(n.adds, add)
			}
			continue
		}
		if up := updateOf(m); up != nil && up["sessionUpdate"] == "available_commands_update" {
			isCmds = true
			if n.sidecar && !n.stripCommands(m, up) {
				continue
			}
		}
		if n.sidecar && fmt.Sprint(m["id"]) == "1" && m["method"] == nil {
			n.stripInit(m)
		}
		if n.sidecar && m["method"] == nil {
			n.stripPickers(m)
			n.resultCommands(m)
		}
		n.walk(m, "")
		b := marshalPlain(m)
		if isCmds {
			cmds = append(cmds, string(b))
		} else {
			seq = append(seq, string(b))
		}
	}
	return seq, cmds
}

func updateOf(m map[string]any) map[string]any {
	if m["method"] != "session/update" {
		return nil
	}
	p, _ := m["params"].(map[string]any)
	u, _ := p["update"].(map[string]any)
	return u
}

// stripCommands takes the sidecar's commands out of a command list and
// reports whether the frame stays (false: it was the sidecar's own list).
func (n *normalizer) stripCommands(m, up map[string]any) bool {
	list, _ := up["availableCommands"].([]any)
	var kept []any
	removed := 0
	for _, c := range list {
		cm, _ := c.(map[string]any)
		if name, _ := cm["name"].(string); slices.Contains(sidecarCommands, name) {
			removed++
			continue
		}
		kept = append(kept, c)
	}
	if kept == nil {
		kept = []any{}
	}
	up["availableCommands"] = kept
	sid := fmt.Sprint(m["params"].(map[string]any)["sessionId"])
	// Each list replaces the one before: the sidecar's own list may come
	// first and the agent's (with the sidecar's merged in) after it, or
	// the agent's alone, but never the sidecar's own after the agent's.
	if removed > 0 && len(kept) == 0 && !n.own[sid] {
		n.own[sid] = true
		if n.agentFirst[sid] {
			n.problems = append(n.problems, "the sidecar's own command list came after the agent's and replaced it")
		}
		if n.agentResult[sid] && !n.agentFirst[sid] {
			n.problems = append(n.problems, "the sidecar's own command list came after the agent's commands in the session result (availableCommands) and replaced them: a v2 client loses the agent's commands")
		}
		n.adds = append(n.adds, "its own command list after session/new")
		return false
	}
	if removed > 0 {
		if removed != len(sidecarCommands) {
			n.problems = append(n.problems, fmt.Sprintf("an available_commands_update holds %d of the sidecar's %d commands", removed, len(sidecarCommands)))
		}
		if !n.own[sid] {
			n.agentFirst[sid] = true
		}
		n.adds = append(n.adds, "its commands merged into the agent's list")
	}
	return true
}

// resultCommands takes the sidecar's commands out of a session result's
// availableCommands (v2), where it may merge them, and notes a session
// whose result carried the agent's own: the sidecar's own list after it
// would replace them (stripCommands).
func (n *normalizer) resultCommands(m map[string]any) {
	res, _ := m["result"].(map[string]any)
	list, ok := res["availableCommands"].([]any)
	if !ok {
		return
	}
	var kept []any
	for _, c := range list {
		cm, _ := c.(map[string]any)
		if name, _ := cm["name"].(string); !slices.Contains(sidecarCommands, name) {
			kept = append(kept, c)
		}
	}
	if len(kept) < len(list) {
		if kept == nil {
			kept = []any{}
		}
		res["availableCommands"] = kept
		if add := "its commands merged into a session result's availableCommands"; !slices.Contains(n.adds, add) {
			n.adds = append(n.adds, add)
		}
	}
	if sid, _ := res["sessionId"].(string); sid != "" && len(kept) > 0 {
		n.agentResult[sid] = true
	}
}

// pickerKeys are the members of a session result that hold its pickers.
var pickerKeys = []string{"configOptions", "modes", "models"}

// pickersIn are the picker members some response's result has in lines.
func pickersIn(lines [][]byte) map[string]bool {
	had := map[string]bool{}
	for _, l := range lines {
		m := decodeFrame(l)
		if up := updateOf(m); up != nil && up["sessionUpdate"] == "current_mode_update" {
			had["current_mode_update"] = true
		}
		if res, ok := m["result"].(map[string]any); ok && m["method"] == nil {
			for _, k := range pickerKeys {
				if _, ok := res[k]; ok {
					had[k] = true
				}
			}
		}
	}
	return had
}

// stripPickers takes out of a response's result the pickers the direct
// run never had: the sidecar bridged them for the client's dialect.
func (n *normalizer) stripPickers(m map[string]any) {
	res, ok := m["result"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range pickerKeys {
		if _, ok := res[k]; ok && !n.directPickers[k] {
			delete(res, k)
			if add := k + " bridged for the client's dialect"; !slices.Contains(n.adds, add) {
				n.adds = append(n.adds, add)
			}
		}
	}
}

func (n *normalizer) stripInit(m map[string]any) {
	res, _ := m["result"].(map[string]any)
	caps, _ := res[capsKey(n.proto)].(map[string]any)
	if caps == nil {
		return
	}
	dcaps := n.directCaps
	if dcaps == nil {
		dcaps = map[string]any{}
	}
	if meta, ok := caps["_meta"].(map[string]any); ok {
		if _, ok := meta["acp-sidecar"]; ok {
			delete(meta, "acp-sidecar")
			n.adds = append(n.adds, `_meta["acp-sidecar"]`)
		}
		if _, had := dcaps["_meta"]; len(meta) == 0 && !had {
			delete(caps, "_meta")
		}
	}
	if dcaps["loadSession"] != true && caps["loadSession"] == true {
		n.adds = append(n.adds, "loadSession")
		if d, ok := dcaps["loadSession"]; ok {
			caps["loadSession"] = d
		} else {
			delete(caps, "loadSession")
		}
	}
	key := sessionCapsKey(n.proto)
	sc, _ := caps[key].(map[string]any)
	dsc, _ := dcaps[key].(map[string]any)
	for _, k := range []string{"resume", "list", "fork", "close", "delete"} {
		if _, had := dsc[k]; !had && sc != nil {
			if _, ok := sc[k]; ok {
				delete(sc, k)
				n.adds = append(n.adds, key+"."+k)
			}
		}
	}
	if _, had := dcaps[key]; sc != nil && len(sc) == 0 && !had {
		delete(caps, key)
	}
}

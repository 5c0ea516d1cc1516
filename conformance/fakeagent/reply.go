package fakeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// ReplyPrefix starts the one line of every prompt reply that says what the
// agent saw.
const ReplyPrefix = "fake-agent: "

// TextLimit is how many characters (runes) of the prompt text the reply
// line repeats.
const TextLimit = 80

// Reply is what the agent saw for one prompt, as written in its reply line:
//
//	fake-agent: session=S model=M mode=M effort=E verbosity=V turns=N blocks=N digest=HEX [k=v ...] text=TEXT
//
// Effort is "-" when the model has no effort option. Turns counts the
// prompts in this native session's own history, this one included (a fork
// inherits its parent's). Digest is Digest(prompt). Text is the first
// TextLimit runes of the last text block, which is the user's own text even
// when the sidecar prepends a handoff block; on the wire \, newline and CR
// are escaped as \\, \n and \r so the reply stays one line. Extra holds
// quirk results (permission=, read=). Echo holds every text block verbatim
// when the prompt started with "echo:".
type Reply struct {
	Session   string
	Model     string
	Mode      string
	Effort    string
	Verbosity string
	Turns     int
	Blocks    int
	Digest    string
	Extra     map[string]string
	Text      string
	Echo      []string
}

// Digest is a short, stable hash of prompt blocks as the SDK decodes them, so
// a test can tell whether blocks reached the agent unchanged. Use the same
// blocks the client sent.
func Digest(blocks []acp.ContentBlock) string {
	b, err := json.Marshal(blocks)
	if err != nil {
		return "unencodable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func unescapeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func excerpt(s string) string {
	r := []rune(s)
	if len(r) > TextLimit {
		r = r[:TextLimit]
	}
	return string(r)
}

// String is the reply line, without a newline and without the echo section.
func (r Reply) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%ssession=%s model=%s mode=%s effort=%s verbosity=%s turns=%d blocks=%d digest=%s",
		ReplyPrefix, r.Session, r.Model, r.Mode, r.Effort, r.Verbosity, r.Turns, r.Blocks, r.Digest)
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, r.Extra[k])
	}
	escaper := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`)
	b.WriteString(" text=" + escaper.Replace(r.Text))
	return b.String()
}

const (
	echoOpen = "<<<fake-agent echo "
	echoEnd  = "<<<fake-agent echo end>>>"
)

// echoSection is the text appended after the reply line for "echo:" prompts.
func echoSection(texts []string) string {
	var b strings.Builder
	for i, t := range texts {
		fmt.Fprintf(&b, "%s%d>>>\n%s\n", echoOpen, i+1, t)
	}
	b.WriteString(echoEnd + "\n")
	return b.String()
}

// ParseReply finds the reply line in an agent's text (the concatenated
// agent_message_chunk text of a turn) and parses it, with the echo section if
// there is one. It reports false if there is no reply line.
func ParseReply(text string) (Reply, bool) {
	start := -1
	if strings.HasPrefix(text, ReplyPrefix) {
		start = 0
	} else if i := strings.Index(text, "\n"+ReplyPrefix); i >= 0 {
		start = i + 1
	}
	if start < 0 {
		return Reply{}, false
	}
	line, rest, _ := strings.Cut(text[start+len(ReplyPrefix):], "\n")
	head, txt, ok := strings.Cut(line, " text=")
	if !ok {
		if !strings.HasPrefix(line, "text=") {
			return Reply{}, false
		}
		head, txt = "", strings.TrimPrefix(line, "text=")
	}
	r := Reply{Text: unescapeText(txt)}
	for _, f := range strings.Fields(head) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "session":
			r.Session = v
		case "model":
			r.Model = v
		case "mode":
			r.Mode = v
		case "effort":
			r.Effort = v
		case "verbosity":
			r.Verbosity = v
		case "turns":
			r.Turns, _ = strconv.Atoi(v)
		case "blocks":
			r.Blocks, _ = strconv.Atoi(v)
		case "digest":
			r.Digest = v
		default:
			if r.Extra == nil {
				r.Extra = map[string]string{}
			}
			r.Extra[k] = v
		}
	}
	r.Echo = parseEcho(rest)
	return r, true
}

func parseEcho(s string) []string {
	var out []string
	for {
		i := strings.Index(s, echoOpen)
		if i < 0 || strings.HasPrefix(s[i:], echoEnd) {
			return out
		}
		s = s[i:]
		_, body, ok := strings.Cut(s, ">>>\n")
		if !ok {
			return out
		}
		next := strings.Index(body, "\n"+echoOpen)
		if next < 0 {
			return append(out, body)
		}
		out = append(out, body[:next])
		s = body[next+1:]
	}
}

package suite

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/conformance/mockllm"
)

// A rewind on an agent the sidecar knows to fork at a message
// (intercept/life's table: claude-agent-acp 0.101.0, codex-acp 2.6.0) is
// the agent's own session/fork at the last kept turn's message, with no
// handoff. The rollback check accepts that way too; rewind-native proves
// it: the sidecar forked at the right message, handed nothing over, and the
// agent's fork really holds the kept turn and not the rewound one, as the
// LLM saw it (--llm-log) or as the fake agent says it.

// nativeFork is the messageId of the last session/fork at a message that
// the sidecar itself sent in entries, "" when it sent none.
func nativeFork(entries []traceEntry) string {
	id := ""
	for _, e := range entries {
		if e.Dir != "client->agent" || e.From != "sidecar" {
			continue
		}
		var f struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(e.Frame, &f) == nil && f.Method == "session/fork" {
			if at := forkAtOf(f.Params); at != "" {
				id = at
			}
		}
	}
	return id
}

// lastMessageID is the messageId of the last agent_message_chunk (or v2
// agent_message) for sid in lines that carries one ("" for none).
func lastMessageID(lines []envelope, sid string) string {
	id := ""
	for _, e := range lines {
		if e.Method != "session/update" {
			continue
		}
		var u struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind      string `json:"sessionUpdate"`
				MessageID string `json:"messageId"`
			} `json:"update"`
		}
		if json.Unmarshal(e.Params, &u) == nil && u.SessionID == sid && (u.Update.Kind == "agent_message_chunk" || u.Update.Kind == "agent_message") && u.Update.MessageID != "" {
			id = u.Update.MessageID
		}
	}
	return id
}

// knownToFork says whether the agent, as the initialize result names it,
// is one known to fork at a message, so that the sidecar rewinds it by
// its own fork (docs/agents.md, "Agents the sidecar knows"); why not, when
// it is not.
func knownToFork(pr probeResult) (bool, string) {
	if !pr.can.session("fork") {
		return false, "the agent does not advertise " + sessionCapName(pr.can.proto, "fork")
	}
	if !forksAtMessage(pr.info.Name, pr.info.Version) {
		return false, fmt.Sprintf("the sidecar does not know %s %s to fork at a message (docs/agents.md)", pr.info.Name, pr.info.Version)
	}
	return true, ""
}

// The suite is the sidecar's oracle, so what it knows of the agents it
// knows on its own: which fork at a message, and how a fork is asked to.
// It reads no table of the sidecar's.

// forksAtMessage says whether the agent named name (its last path element)
// at version honours `_meta.jetbrains.air.fork` on session/fork, as
// claude-agent-acp 0.101.0 (dist/fork-session.js) and codex-acp 2.6.0
// (src/SessionFork.ts) do, and later releases.
func forksAtMessage(name, version string) bool {
	since := map[string]string{"claude-agent-acp": "0.101.0", "codex-acp": "2.6.0"}[name[strings.LastIndexByte(name, '/')+1:]]
	return since != "" && releaseAtLeast(version, since)
}

// releaseAtLeast compares dotted release numbers, ignoring a pre-release
// or build suffix; one it cannot read is at least nothing.
func releaseAtLeast(v, min string) bool {
	parse := func(v string) ([]int, bool) {
		v = strings.TrimPrefix(v, "v")
		if i := strings.IndexAny(v, "-+"); i >= 0 {
			v = v[:i]
		}
		var out []int
		for _, p := range strings.Split(v, ".") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, false
			}
			out = append(out, n)
		}
		return out, len(out) > 0
	}
	a, ok := parse(v)
	b, okMin := parse(min)
	if !ok || !okMin {
		return false
	}
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x > y
		}
	}
	return true
}

// forkAtOf is the messageId a session/fork's params ask to fork at, ""
// for none: `_meta.jetbrains.air.fork` of version 1.
func forkAtOf(params json.RawMessage) string {
	var p struct {
		Meta struct {
			JetBrains struct {
				Air struct {
					Fork *struct {
						Version   int    `json:"version"`
						MessageID string `json:"messageId"`
					} `json:"fork"`
				} `json:"air"`
			} `json:"jetbrains"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.JetBrains.Air.Fork == nil || p.Meta.JetBrains.Air.Fork.Version != 1 {
		return ""
	}
	return p.Meta.JetBrains.Air.Fork.MessageID
}

func needForkAtMessage(pr probeResult) string {
	_, why := knownToFork(pr)
	return why
}

func checkRewindNative(ctx context.Context, r *checkRun, pr probeResult) error {
	ru, sid, err := r.openSidecar(ctx)
	if err != nil {
		return err
	}
	c := ru.c
	// The texts carry the run's own mark: one mock LLM, and its log, may
	// serve several runs and agents (docs/conformance.md), and what this
	// check looks for in the log must be this run's alone.
	sum := sha256.Sum256([]byte(ru.world.root)) // the run's world, unique
	tag := hex.EncodeToString(sum[:6])
	var (
		gone    = "Say OK. (rewind-native-2 pike " + tag + ")"
		after   = "Say OK. (rewind-native-3 after " + tag + ")"
		keptM   = "rewind-native-1 heron " + tag
		goneM   = "rewind-native-2 pike " + tag
		content = "rewind-native tool result " + tag + ": the heron nests in the reeds"
	)
	// The kept turn reads a file with the agent's own tool, where the mock
	// LLM can ask for it (mockllm.ReadMarker): a fork keeps the tool's
	// result, which no handoff carries.
	file := filepath.Join(ru.cwd, "rewind-native.txt")
	if err := os.WriteFile(file, []byte(content+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the file the kept turn reads: %w", err)
	}
	kept := "Say OK. (" + keptM + ") " + mockllm.ReadMarker + file
	mark := c.mark()
	if _, err := promptOK(ctx, c, sid, kept); err != nil {
		return err
	}
	msgID := lastMessageID(c.since(mark), sid)
	if msgID == "" {
		return errors.New("the agent's answer to the first turn carried no messageId, which a fork at a message needs")
	}
	if _, err := promptOK(ctx, c, sid, gone); err != nil {
		return err
	}
	if _, err := promptOK(ctx, c, sid, "/rewind"); err != nil {
		return err
	}
	id, line, err := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]string{"type": "text", "text": after}}})
	if err != nil {
		return err
	}
	mark = c.mark()
	if _, err := c.promptLine(ctx, sid, id, line); err != nil {
		return err
	}
	reply := agentText(c.since(mark), sid)
	nudgeTrace(ctx, c)
	var entries []traceEntry
	var delivered []string
	waitUntil(ctx, 3*time.Second, func() bool {
		if entries, err = readTrace(ru.trace); err != nil {
			return false
		}
		delivered = promptTexts(entries, id)
		return delivered != nil
	})
	if delivered == nil {
		return errors.New("the trace does not show the prompt after /rewind reaching the agent")
	}
	switch at := nativeFork(entries); {
	case at == "":
		return errors.New("the sidecar rewound with a fresh session and the handoff, not with the agent's fork at a message (its log says why)")
	case at != msgID:
		return fmt.Errorf("the sidecar forked at message %q, not at the first turn's answer %q", at, msgID)
	}
	for _, b := range delivered {
		if strings.HasPrefix(b, handoffHeader) {
			return errors.New("the prompt after the native rewind carried a handoff: the fork holds the kept turn itself")
		}
	}
	how, err := forkHolds(r.cfg.llmLog, reply, after, keptM, goneM, content)
	if err != nil {
		return err
	}
	r.note("the sidecar forked at the first turn's message %s; the next prompt carried no handoff; %s", msgID, how)
	return nil
}

// forkHolds checks what the agent's fork holds, from the LLM's request for
// the prompt after (the mock's log at llmLog) or from the fake agent's
// reply: it must hold the turn marked kept and not the one marked gone,
// and, where the kept turn ran a tool that gave tool (the LLM was sent
// it), that tool's result too. It says what it checked, and fails when it
// can check neither way.
//
// The request for the prompt is the one whose last user text is the prompt
// itself. A side request may quote it: codex-acp 2.6.0 asks for a title
// from a fork's first prompt alone ("User's first message:\n" and the
// prompt), at about the time of the turn's own request, and taken for the
// turn it made a good fork look empty.
func forkHolds(llmLog, reply, after, kept, gone, tool string) (string, error) {
	if llmLog != "" {
		reqs, err := readLLMLog(llmLog)
		if err != nil {
			return "", err
		}
		for i := len(reqs) - 1; i >= 0; i-- {
			q := reqs[i]
			if q.LastUserText() != after {
				continue
			}
			all := strings.Join(q.Texts(), "\n")
			if !strings.Contains(all, kept) || strings.Contains(all, gone) {
				return "", fmt.Errorf("the LLM request after the native rewind holds the kept turn: %v, the rewound turn: %v (the agent forked elsewhere)", strings.Contains(all, kept), strings.Contains(all, gone))
			}
			how := fmt.Sprintf("the LLM was sent the kept turn and not the rewound one (%d messages)", q.Messages())
			if ranTool(reqs[:i], tool) {
				if !strings.Contains(strings.Join(q.ToolResults(), "\n"), tool) {
					return "", errors.New("the kept turn's tool result is not in the LLM request after the native rewind: the fork lost it")
				}
				how += ", with the kept turn's tool result"
			} else {
				how += "; the kept turn ran no tool (the mock asks for one only in the Messages API)"
			}
			return how, nil
		}
		return "", fmt.Errorf("--llm-log %s has no request for the prompt after the rewind", llmLog)
	}
	if rp, ok := fakeagent.ParseReply(reply); ok {
		if rp.Turns != 2 {
			return "", fmt.Errorf("the fake agent's fork holds %d turns with the prompt after the rewind, want 2 (the kept turn and it)", rp.Turns)
		}
		return "the fake agent's fork holds the kept turn and the new one", nil
	}
	return "", skipf("what the agent's fork holds is not seen without --llm-log (the mock LLM's request log)")
}

// readLLMLog reads the mock LLM's request log (acp-sidecar mockllm -log).
func readLLMLog(path string) ([]mockllm.Request, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--llm-log: %w", err)
	}
	// The mock may be writing its last line as the log is read (one
	// write(2) a line, but a reader can see part of a write to a file): a
	// line counts once its '\n' is there.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []mockllm.Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var q mockllm.Request
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, fmt.Errorf("--llm-log %s: %w", path, err)
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--llm-log %s: %w", path, err)
	}
	return out, nil
}

// ranTool says whether some request in reqs carried a tool result holding
// text: the agent ran the tool the mock asked for.
func ranTool(reqs []mockllm.Request, text string) bool {
	for _, q := range reqs {
		if strings.Contains(strings.Join(q.ToolResults(), "\n"), text) {
			return true
		}
	}
	return false
}

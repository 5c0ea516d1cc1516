//go:build linux

package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stream builds a run's frames from a template: $S, $T are replaced by the
// run's session ids, $M1, $M2 by its message ids, $C by its tool call id.
func stream(ids map[string]string, tmpl ...string) [][]byte {
	var out [][]byte
	for _, l := range tmpl {
		for k, v := range ids {
			l = strings.ReplaceAll(l, k, v)
		}
		out = append(out, []byte(l))
	}
	return out
}

// TestPairing shows what comparing by first appearance does: two runs
// whose agents made up different ids compare equal, and a sidecar that
// swaps two ids, drops one or moves a frame to the other session does not.
func TestPairing(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"$S"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"sessionId":"$T"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$S","update":{"sessionUpdate":"agent_message_chunk","messageId":"$M1","content":{"type":"text","text":"Hel"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$S","update":{"sessionUpdate":"agent_message_chunk","messageId":"$M1","content":{"type":"text","text":"lo"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$T","update":{"sessionUpdate":"agent_message_chunk","messageId":"$M2","content":{"type":"text","text":"Hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$S","update":{"sessionUpdate":"tool_call","toolCallId":"$C","title":"read $C"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$S","update":{"sessionUpdate":"usage_update","used":1234,"size":200000,"cost":{"amount":0.0123,"currency":"USD"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$S","update":{"sessionUpdate":"session_info_update","updatedAt":"2026-12-01T10:00:00.123Z"}}}`,
	}
	direct := map[string]string{"$S": "ses_4f2a9c1e7b3d", "$T": "ses_88aa77bb66cc", "$M1": "msg_01HZX3K9A2B7", "$M2": "msg_01HZX3K9C4D5", "$C": "toolu_01ABCdef234"}
	fresh := map[string]string{"$S": "0b7f0d9e-5f4c-4c1a-9a63-2d1e7b0c9a11", "$T": "5d2c9f8e-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
		"$M1": "01JDX5W8Q9R2S3T4V5W6X7Y8Z9", "$M2": "01JDX5W8Q9R2S3T4V5W6X7Y8ZA", "$C": "call_9f8e7d6c5b4a"}
	norm := func(lines [][]byte) []string {
		seq, _ := newNormalizer("", false, nil).split(lines)
		return seq
	}
	want := norm(stream(direct, frames...))
	if err := compareSeq("frames", want, norm(stream(fresh, frames...))); err != nil {
		t.Fatalf("two runs with different generated ids: %v", err)
	}
	if got := norm(stream(fresh, strings.ReplaceAll(frames[6], "1234", "99"), frames[7])); !strings.Contains(got[0], `"used":0`) || !strings.Contains(got[1], "<time>") {
		t.Errorf("usage and times are not taken out: %q", got)
	}

	broken := map[string][]string{
		// The second chunk of message 1 carries message 2's id.
		"two message ids swapped": {frames[0], frames[1], frames[2], strings.Replace(frames[3], "$M1", "$M2", 1), strings.Replace(frames[4], "$M2", "$M1", 1), frames[5], frames[6], frames[7]},
		// The tool call lost its id.
		"a tool call id dropped": {frames[0], frames[1], frames[2], frames[3], frames[4], strings.Replace(frames[5], `"toolCallId":"$C",`, "", 1), frames[6], frames[7]},
		// A chunk of session S delivered to session T.
		"two session ids swapped": {frames[0], frames[1], frames[2], strings.Replace(frames[3], `"sessionId":"$S"`, `"sessionId":"$T"`, 1), frames[4], frames[5], frames[6], frames[7]},
		// A message id made up by the relay.
		"a message id replaced": {frames[0], frames[1], frames[2], strings.Replace(frames[3], "$M1", "msg_01NOTTHESAME9", 1), frames[4], frames[5], frames[6], frames[7]},
	}
	for name, tmpl := range broken {
		if err := compareSeq("frames", want, norm(stream(fresh, tmpl...))); err == nil {
			t.Errorf("%s: compares equal to the direct run", name)
		}
	}
}

// TestTransparencyFreshIDs runs the transparency check against an agent
// that makes up ids and figures as the current agents do (the fresh-ids
// double in front of the fake agent): a fresh messageId on every chunk,
// usage and cost after every turn, a title and an updatedAt. The sidecar
// changes none of it, and the check must pass.
func TestTransparencyFreshIDs(t *testing.T) {
	bin := sidecarBinary(t)
	agent, err := doubleAgent("fresh-ids", bin, "fakeagent")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := &config{exe: bin, agent: agent, env: baseEnv(os.Environ(), nil), only: []string{"transparency"},
		timeout: failCheckTimeout, transcripts: filepath.Join(dir, "transcripts")}
	rep, err := runSuite(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Checks[0]; c.Verdict != Pass {
		t.Errorf("transparency against an agent that makes up ids: %s: %s", c.Verdict, c.Detail)
	}
}

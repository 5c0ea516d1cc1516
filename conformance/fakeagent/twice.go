package fakeagent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A buggy agent may answer one request twice, say a result and then an
// error when the request races its own cancellation. -answer-twice makes
// the fake agent do that, so a test can check what the client sees: under
// DESIGN.md "Data flow" 2 every client request gets exactly one answer,
// whatever the agent writes.

// methodSet is the value of the repeatable -answer-twice flag.
type methodSet []string

func (m *methodSet) String() string {
	if m == nil {
		return ""
	}
	return strings.Join(*m, ",")
}

// Set adds METHOD[,METHOD...].
func (m *methodSet) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return fmt.Errorf("empty METHOD in %q", v)
		}
		*m = append(*m, item)
	}
	return nil
}

func (m methodSet) has(method string) bool { return slices.Contains(m, method) }

// SecondAnswerLine is the exact line -answer-twice writes right after the
// agent's real answer to the request with id, under the same write lock so
// that nothing comes between: an error, so that a client that got it can be
// told from one that got the real answer. Requests the agent answers outside
// the SDK (session/delete under -delete, lines over -max-sdk-line) are
// answered once. It includes the trailing newline.
func SecondAnswerLine(id json.RawMessage) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32603,"message":"fake-agent: a second answer to this request (-answer-twice)"}}` + "\n")
}

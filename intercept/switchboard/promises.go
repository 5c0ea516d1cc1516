package switchboard

import (
	"encoding/json"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// promised is what an initialize result promises about prompt content and
// MCP transports.
type promised struct {
	prompt map[string]bool // image, audio, embeddedContext
	mcp    map[string]bool // http, sse
}

func promisedBy(init json.RawMessage) promised {
	var r struct {
		AgentCapabilities struct {
			PromptCapabilities map[string]json.RawMessage `json:"promptCapabilities"`
			McpCapabilities    map[string]json.RawMessage `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	// What cannot be read is not promised: the client is promised less.
	_ = json.Unmarshal(init, &r)
	p := promised{prompt: map[string]bool{}, mcp: map[string]bool{}}
	for k, v := range r.AgentCapabilities.PromptCapabilities {
		p.prompt[k] = string(v) == "true"
	}
	for k, v := range r.AgentCapabilities.McpCapabilities {
		p.mcp[k] = string(v) == "true"
	}
	return p
}

// promptKinds are the prompt capabilities the client is promised only when
// every agent has them; mcpKinds the same for MCP transports.
var (
	promptKinds = []string{"image", "audio", "embeddedContext"}
	mcpKinds    = []string{"http", "sse"}
)

func setOr(line, val []byte, path ...string) []byte {
	out, err := wire.SetPath(line, val, path...)
	if err != nil {
		return line
	}
	return out
}

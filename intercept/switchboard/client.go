package switchboard

import (
	"encoding/json"
	"strings"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
)

// selectorChoice reads a set_config_option's configId and string value.
func selectorChoice(line []byte) (id, value string, ok bool) {
	var p struct {
		Params struct {
			ConfigID string          `json:"configId"`
			Value    json.RawMessage `json:"value"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &p) != nil {
		return "", "", false
	}
	return p.Params.ConfigID, wire.Unquote(p.Params.Value), true
}

// agentSlash finds "/agent NAME" in a prompt of one text block.
func agentSlash(line []byte) (string, bool) {
	text, ok := wire.OnlyText(line)
	if !ok {
		return "", false
	}
	text = strings.TrimSpace(text)
	if text != "/agent" && !strings.HasPrefix(text, "/agent ") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimPrefix(text, "/agent")), true
}

package acpschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

var (
	// ErrNotJSONRPC is what a strict Judge says of a frame that is no
	// JSON-RPC 2.0 message: not JSON, a "jsonrpc" other than "2.0", or
	// neither request, response nor notification.
	ErrNotJSONRPC = errors.New("no JSON-RPC 2.0 message")
	// ErrUnknown is what a strict Judge says of a request or
	// notification of a method the version has no definition for from
	// that side, and of a result that answers one, or answers no request
	// the Judge was fed.
	ErrUnknown = errors.New("no definition in the schema")
)

// A Judge judges one connection's frames, fed to Frame in the order they
// crossed, by what each is: a request or notification by its method and
// the side that sent it, a result by the method of the request it answers
// (which it remembers for that), an error by the schema's Error. A
// method's params left out are judged as null. An extension's method
// (`_…`, as `_sidecar/*`) and a result answering one are never judged: the
// schema allows them anything.
//
// A Judge is not safe for concurrent use: its frames have an order.
type Judge struct {
	// Schema is the version the connection speaks. It must be set before
	// the first Frame and not changed after.
	Schema *Schema
	// Strict makes Frame say why no definition applies to a frame
	// (ErrNotJSONRPC, ErrUnknown), and makes a "jsonrpc" other than
	// "2.0" such a frame: for a caller that knows every method its
	// connection may use. When false, the zero value, such a frame is
	// passed over (Frame returns "" and nil), and a frame is judged
	// whatever its "jsonrpc": for a caller that judges what the schema
	// has words for and leaves the rest to other checks.
	Strict bool

	asked [2]map[string]string // by the side that asked: request id -> method
}

// Frame judges frame, which from wrote after every frame fed before it.
// It returns the definition frame was judged by and, when frame is not
// valid by it, the validator's error, which Detail words. The definition
// is "" when none applies: then err is nil, unless the Judge is Strict and
// frame is not an extension's.
func (j *Judge) Frame(from proxy.Direction, frame []byte) (def string, err error) {
	var m struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(frame, &m); err != nil {
		return "", j.unjudged(fmt.Errorf("%w: %v", ErrNotJSONRPC, err))
	}
	if j.Strict {
		// Decoded here, as a lenient Judge judges a frame whatever its
		// "jsonrpc", a number among them.
		var version string
		if json.Unmarshal(m.JSONRPC, &version) != nil || version != "2.0" {
			return "", fmt.Errorf("%w: jsonrpc %s", ErrNotJSONRPC, cmp.Or(string(m.JSONRPC), "left out"))
		}
	}
	v, id := j.Schema.v, string(bytes.TrimSpace(m.ID))
	var part json.RawMessage
	switch {
	case m.Method != "":
		if len(m.ID) > 0 {
			j.ask(from, id, m.Method)
		}
		if strings.HasPrefix(m.Method, "_") {
			return "", nil
		}
		if def = v.params[from][m.Method]; def == "" {
			return "", j.unjudged(fmt.Errorf("%s method %s: %w of ACP v%d", side(from), m.Method, ErrUnknown, j.Schema.Version))
		}
		part = m.Params
	case m.Error != nil:
		def, part = errorDef, m.Error
	case m.Result != nil:
		method, ok := j.asked[from.Reverse()][id]
		if strings.HasPrefix(method, "_") {
			return "", nil
		}
		if !ok {
			return "", j.unjudged(fmt.Errorf("result from the %s for id %s: %w: the %s sent no request with that id", side(from), id, ErrUnknown, side(from.Reverse())))
		}
		if def = v.results[from][method]; def == "" {
			return "", j.unjudged(fmt.Errorf("result from the %s to %s: %w of ACP v%d", side(from), method, ErrUnknown, j.Schema.Version))
		}
		part = m.Result
	default:
		return "", j.unjudged(fmt.Errorf("%w: neither request, response nor notification", ErrNotJSONRPC))
	}
	if len(part) == 0 {
		part = json.RawMessage("null") // a request's params left out
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
	if err == nil {
		err = j.Schema.defs[def].Validate(inst)
	}
	return def, err
}

// unjudged is what Frame returns for a frame no definition applies to.
func (j *Judge) unjudged(why error) error {
	if j.Strict {
		return why
	}
	return nil
}

func (j *Judge) ask(from proxy.Direction, id, method string) {
	if j.asked[from] == nil {
		j.asked[from] = map[string]string{}
	}
	j.asked[from][id] = method
}

// Detail is err, an error Frame returned with a definition, in the
// validator's words alone: without the first line of a validation error,
// which names the definition by the schema's URL, and with the
// definitions it refers to by their bare names.
func Detail(err error) string {
	s := err.Error()
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		if _, rest, ok := strings.Cut(s, "\n"); ok {
			s = rest
		}
	}
	s = strings.ReplaceAll(s, unstableResource+"#/$defs/", "")
	return strings.ReplaceAll(s, mainResource+"#/$defs/", "")
}

package wire

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes like json.Marshal without turning <>& into \u escapes, so
// the sidecar's frames read like the agent's.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Encode is Marshal for a value the sidecar builds itself, of strings,
// numbers, bools, maps and slices of them, and json.RawMessage taken from a
// frame that scanned or from the store. Such a value always encodes, so
// Encode has no error to return; a value that does not is a bug, and it
// encodes as null, which every reader of the frame can still parse.
func Encode(v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// String is s as a JSON string. Encoding a Go string cannot fail: invalid
// UTF-8 becomes U+FFFD.
func String(s string) json.RawMessage {
	b, _ := json.Marshal(s) // cannot fail, as above
	return b
}

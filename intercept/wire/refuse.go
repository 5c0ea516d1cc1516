package wire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/proxy"
)

// Error is a refusal the client should read: it carries the JSON-RPC code
// the answer uses.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Refuse is an Error with code and a message made as fmt.Sprintf makes it.
func Refuse(code int, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf is the JSON-RPC code to answer err with: an Error's own, else
// internal error.
func CodeOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return proxy.CodeInternalError
}

// ErrorCodeOf reads the code of a JSON-RPC error object.
func ErrorCodeOf(raw json.RawMessage) int {
	var e struct {
		Code int `json:"code"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return 0 // an error without a numeric code has no code we know
	}
	return e.Code
}

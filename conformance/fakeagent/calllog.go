package fakeagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Call is one line of a -call-log file: one message with a method that the
// agent received, in arrival order. Params are the exact bytes received.
// For a line too long for the SDK, Params is left out and Bytes and SHA256
// describe the whole line instead.
type Call struct {
	Method    string          `json:"method"`
	ID        json.RawMessage `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Bytes     int             `json:"bytes,omitempty"`
	SHA256    string          `json:"sha256,omitempty"`
}

// callLog appends one line per received method. Only the stdin reader
// writes to it, and each line is a single write to an O_APPEND file, so two
// agent processes sharing a log never interleave within a line.
type callLog struct {
	w io.Writer // nil when -call-log is not set
}

// bigLine describes a line logged without its params.
type bigLine struct {
	bytes  int
	sha256 string
}

func (l callLog) record(method string, id json.RawMessage, sid string, params json.RawMessage, big *bigLine) {
	if l.w == nil {
		return
	}
	// Built by hand: json.Marshal would compact and HTML-escape the raw
	// params, and the log promises the bytes as received.
	b := []byte(`{"method":` + jsonString(method))
	if len(id) > 0 && string(id) != "null" {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	if sid != "" {
		b = append(b, `,"sessionId":`+jsonString(sid)...)
	}
	switch {
	case big != nil:
		b = append(b, `,"bytes":`+strconv.Itoa(big.bytes)+`,"sha256":"`+big.sha256+`"`...)
	case len(params) > 0:
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	b = append(b, "}\n"...)
	_, _ = l.w.Write(b) // a broken log must not break the agent
}

// ReadCallLog reads a -call-log file. Lines may be of any length.
func ReadCallLog(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read call log: %w", err)
	}
	defer f.Close()
	var calls []Call
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(line) > 0 {
			var c Call
			if uerr := json.Unmarshal(line, &c); uerr != nil {
				return calls, fmt.Errorf("read call log %s line %d: %w", path, n, uerr)
			}
			calls = append(calls, c)
		}
		if errors.Is(err, io.EOF) {
			return calls, nil
		}
		if err != nil {
			return calls, fmt.Errorf("read call log %s: %w", path, err)
		}
	}
}

// Methods lists the methods of calls in order, for compact assertions.
func Methods(calls []Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Method
	}
	return out
}

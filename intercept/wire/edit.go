package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The rewrites the sidecar makes change only what they must and keep every
// other byte as it was (DESIGN.md "Data flow" 2): a member's value is found
// by its byte span and replaced in place; nothing is decoded into Go values
// and encoded again.

// member is one member of a JSON object: its unescaped key, where its key
// starts, and the span of its value.
type member struct {
	key        string
	keyAt      int
	start, end int
}

// members lists the members of the object that raw holds (white space
// around it allowed), with their value spans as offsets into raw.
func members(raw []byte) (open, close int, ms []member, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return 0, 0, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, 0, nil, errors.New("not an object")
	}
	open = int(dec.InputOffset()) - 1
	for dec.More() {
		keyAt := int(dec.InputOffset())
		for keyAt < len(raw) && raw[keyAt] != '"' {
			keyAt++ // white space, and the comma after the member before
		}
		tok, err := dec.Token()
		if err != nil {
			return 0, 0, nil, err
		}
		key, _ := tok.(string)
		after := int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, 0, nil, err
		}
		end := int(dec.InputOffset())
		start := valueStart(raw, after)
		ms = append(ms, member{key: key, keyAt: keyAt, start: start, end: end})
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, nil, err
	}
	close = int(dec.InputOffset()) - 1
	return open, close, ms, nil
}

// valueStart skips the white space and the colon after a key.
func valueStart(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r' || raw[i] == ':') {
		i++
	}
	return i
}

func Splice(raw []byte, start, end int, val []byte) []byte {
	out := make([]byte, 0, len(raw)-(end-start)+len(val))
	out = append(out, raw[:start]...)
	out = append(out, val...)
	return append(out, raw[end:]...)
}

// Find returns the span of the member at path, or ok false.
func Find(raw []byte, path ...string) (start, end int, ok bool) {
	base := 0
	cur := raw
	for _, key := range path {
		_, _, ms, err := members(cur)
		if err != nil {
			return 0, 0, false
		}
		found := false
		for i := len(ms) - 1; i >= 0; i-- { // the last duplicate wins, as in encoding/json
			if ms[i].key == key {
				base += ms[i].start
				cur = cur[ms[i].start:ms[i].end]
				found = true
				break
			}
		}
		if !found {
			return 0, 0, false
		}
	}
	return base, base + len(cur), true
}

// SetPath sets the member at path to val, creating the objects on the way
// that are missing.
func SetPath(raw []byte, val []byte, path ...string) ([]byte, error) {
	if len(path) == 0 {
		return val, nil
	}
	open, close, ms, err := members(raw)
	if err != nil {
		return nil, fmt.Errorf("set %v: %w", path, err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key != path[0] {
			continue
		}
		inner := raw[ms[i].start:ms[i].end]
		if len(path) > 1 && (len(inner) == 0 || inner[0] != '{') {
			inner = []byte("{}")
		}
		nv, err := SetPath(inner, val, path[1:]...)
		if err != nil {
			return nil, err
		}
		return Splice(raw, ms[i].start, ms[i].end, nv), nil
	}
	nv, err := SetPath([]byte("{}"), val, path[1:]...)
	if err != nil {
		return nil, err
	}
	k := String(path[0])
	add := append(append(append([]byte{}, k...), ':'), nv...)
	if len(ms) > 0 {
		add = append([]byte{','}, add...)
	}
	_ = open
	return Splice(raw, close, close, add), nil
}

// InsertArray puts elems at the front (or the back) of the array at path.
func InsertArray(raw []byte, front bool, elems [][]byte, path ...string) ([]byte, error) {
	start, end, ok := Find(raw, path...)
	if !ok {
		return nil, fmt.Errorf("insert into %v: no such member", path)
	}
	arr := bytes.TrimSpace(raw[start:end])
	if len(arr) < 2 || arr[0] != '[' {
		return nil, fmt.Errorf("insert into %v: not an array", path)
	}
	empty := len(bytes.TrimSpace(arr[1:len(arr)-1])) == 0
	joined := bytes.Join(elems, []byte{','})
	if front {
		if !empty {
			joined = append(joined, ',')
		}
		return Splice(raw, start+1, start+1, joined), nil
	}
	if !empty {
		joined = append([]byte{','}, joined...)
	}
	return Splice(raw, end-1, end-1, joined), nil
}

// Delete takes out the member at path, with its comma; a member that is
// not there leaves raw as it is. Every other byte stays.
func Delete(raw []byte, path ...string) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("delete: empty path")
	}
	base, obj := 0, raw
	if len(path) > 1 {
		start, end, ok := Find(raw, path[:len(path)-1]...)
		if !ok {
			return raw, nil
		}
		base, obj = start, raw[start:end]
	}
	_, _, ms, err := members(obj)
	if err != nil {
		return nil, fmt.Errorf("delete %v: %w", path, err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key != path[len(path)-1] {
			continue
		}
		from, to := ms[i].keyAt, ms[i].end
		switch {
		case i > 0:
			from = ms[i-1].end // the comma before it goes with it
		case len(ms) > 1:
			to = ms[1].keyAt // the first member: the comma after it goes
		}
		return Splice(raw, base+from, base+to, nil), nil
	}
	return raw, nil
}

// OtherMembers is the object raw holds without the members named in skip,
// each other member's key and value as they were, in their order; nil when
// none is left, or raw is no object.
func OtherMembers(raw []byte, skip ...string) json.RawMessage {
	_, _, ms, err := members(raw)
	if err != nil {
		return nil
	}
	var b []byte
	for _, m := range ms {
		if slices.Contains(skip, m.key) {
			continue
		}
		if b == nil {
			b = []byte{'{'}
		} else {
			b = append(b, ',')
		}
		b = append(b, String(m.key)...)
		b = append(b, ':')
		b = append(b, raw[m.start:m.end]...)
	}
	if b == nil {
		return nil
	}
	return append(b, '}')
}

// EachMember calls fn with each member of the object raw holds, its key
// and its value's bytes, in order; raw that is no object calls it never.
func EachMember(raw []byte, fn func(key string, value json.RawMessage)) {
	_, _, ms, err := members(raw)
	if err != nil {
		return
	}
	for _, m := range ms {
		fn(m.key, json.RawMessage(raw[m.start:m.end]))
	}
}

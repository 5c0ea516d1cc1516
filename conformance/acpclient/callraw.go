package acpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

const rawIDPrefix = "acpclient-raw-"

type rawResult struct {
	result json.RawMessage
	err    error
}

// rawCalls are the requests and notifications the Client writes itself,
// past the SDK, for methods the SDK has no type for: it numbers its own
// requests, and the Client's reader hands each response with one of its
// ids to the call waiting for it (answer), never to the SDK.
type rawCalls struct {
	w     *lockedWriter   // the peer's stdin, shared with the SDK
	ended <-chan struct{} // closed when the peer's output has ended

	mu   sync.Mutex
	next int
	wait map[string]chan rawResult // by id, the calls waiting for their response
}

func newRawCalls(w *lockedWriter, ended <-chan struct{}) *rawCalls {
	return &rawCalls{w: w, ended: ended, wait: map[string]chan rawResult{}}
}

// answer hands the response p to the call waiting for it, if one still
// does.
func (r *rawCalls) answer(p peek) {
	id, _ := strconv.Unquote(string(p.ID))
	r.mu.Lock()
	ch := r.wait[id]
	delete(r.wait, id)
	r.mu.Unlock()
	if ch == nil {
		return
	}
	var res rawResult
	if p.Error != nil {
		res.err = p.Error
	} else {
		res.result = p.Result
	}
	ch <- res // buffered; the waiter may have gone
}

func rawLine(id *string, method string, params any) ([]byte, error) {
	line := []byte(`{"jsonrpc":"2.0",`)
	if id != nil {
		line = append(line, `"id":`+strconv.Quote(*id)+`,`...)
	}
	m, err := json.Marshal(method)
	if err != nil {
		return nil, fmt.Errorf("marshal method: %w", err)
	}
	line = append(line, `"method":`...)
	line = append(line, m...)
	if params != nil {
		p, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("marshal %s params: %w", method, err)
		}
		line = append(line, `,"params":`...)
		line = append(line, p...)
	}
	return append(line, "}\n"...), nil
}

// CallRaw sends a request for any method, e.g. `_sidecar/reset` or a
// method the SDK has no type for, and returns the result bytes exactly as
// received, or the error object as an *acp.RequestError. params are
// marshalled with encoding/json (nil sends none). Its ids are strings
// ("acpclient-raw-N") that the SDK's own ids never collide with.
func (r *rawCalls) CallRaw(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan rawResult, 1)
	r.mu.Lock()
	r.next++
	id := rawIDPrefix + strconv.Itoa(r.next)
	r.wait[id] = ch
	r.mu.Unlock()
	forget := func() {
		r.mu.Lock()
		delete(r.wait, id)
		r.mu.Unlock()
	}
	line, err := rawLine(&id, method, params)
	if err != nil {
		forget()
		return nil, err
	}
	if _, err := r.w.Write(line); err != nil {
		forget()
		return nil, fmt.Errorf("call %s: write: %w", method, err)
	}
	select {
	case res := <-ch:
		if res.err != nil {
			return nil, fmt.Errorf("call %s: %w", method, res.err)
		}
		return res.result, nil
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("call %s: %w", method, context.Cause(ctx))
	case <-r.ended:
		return nil, fmt.Errorf("call %s: %w", method, ErrEnded)
	}
}

// NotifyRaw sends a notification for any method.
func (r *rawCalls) NotifyRaw(_ context.Context, method string, params any) error {
	line, err := rawLine(nil, method, params)
	if err != nil {
		return err
	}
	if _, err := r.w.Write(line); err != nil {
		return fmt.Errorf("notify %s: %w", method, err)
	}
	return nil
}

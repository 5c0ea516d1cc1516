package proxy

import (
	"bytes"
	"context"
	"fmt"
)

// later runs the Later of a Hold or Defer verdict for f on a goroutine the
// relay owns. A Hold reserves f's place first, so what f's peer sends after
// it waits; a Defer reserves nothing. f is copied where it is needed: the
// relay reuses it for the next frame.
func (r *Relay) later(ctx context.Context, f *Frame, v Verdict) {
	dir := f.Dir
	if v.Later == nil {
		r.log.Error("a hook held a frame without deciding it; dropped", "dir", dir.String(), "method", string(f.Env.Method))
		v.Later = func(context.Context) Decision { return Decision{} }
	}
	release := func(lines ...[]byte) {
		for _, l := range lines {
			if err := r.Send(dir, l); err != nil {
				r.log.Debug("forward a deferred frame", "dir", dir.String(), "err", err)
			}
		}
	}
	if v.Do == Hold {
		release = r.Hold(dir)
	}
	var id []byte
	if f.Env.Kind == KindRequest {
		id = bytes.Clone(f.Env.ID)
	}
	method := string(f.Env.Method)
	r.latersMu.Lock()
	if r.latersDone {
		// The relay is stopping: nobody reads an answer any more.
		r.latersMu.Unlock()
		release()
		return
	}
	r.laters.Add(1)
	r.latersMu.Unlock()
	go func() {
		defer r.laters.Done()
		d := v.Later(ctx)
		if id != nil {
			d = r.answerOnce(dir, id, method, d)
		}
		release(d.Forward...)
		if len(d.Answer) > 0 {
			// The answer's lines go out as one run: a response and what
			// follows it (a command list after an open) must not have the
			// peer's next exchange between them.
			r.Hold(dir.Reverse())(d.Answer...)
		}
	}()
}

// answerOnce holds a hook to the rule that a request it took gets exactly
// one answer: forwarded once (its peer answers), or answered once by the
// sidecar. A second answer is dropped, and a request neither forwarded nor
// answered gets an error, so its sender never waits for ever. Either is a
// bug in a hook, logged as one.
func (r *Relay) answerOnce(dir Direction, id []byte, method string, d Decision) Decision {
	forwarded := 0
	for _, l := range d.Forward {
		if env, err := Scan(l); err == nil && env.Kind == KindRequest && bytes.Equal(env.ID, id) {
			forwarded++
		}
	}
	answered := 0
	kept := d.Answer[:0:0]
	for _, l := range d.Answer {
		if env, err := Scan(l); err == nil && env.Kind == KindResponse && bytes.Equal(env.ID, id) {
			answered++
			if forwarded+answered > 1 {
				r.hookBug("a hook answered a request twice; the extra answer is dropped", dir, method, id)
				continue
			}
		}
		kept = append(kept, l)
	}
	d.Answer = kept
	if forwarded+answered == 0 {
		r.hookBug("a hook took a request and never answered it; it gets an error", dir, method, id)
		d.Answer = append(d.Answer, ErrorResponse(id, CodeInternalError, "Internal error: acp-sidecar lost this request; send it again"))
	}
	if forwarded > 1 {
		r.hookBug("a hook forwarded a request twice", dir, method, id)
	}
	return d
}

// hookBug reports a hook that broke the promise of one answer per request:
// logged, or under Config.Strict a panic that names the request.
func (r *Relay) hookBug(msg string, dir Direction, method string, id []byte) {
	r.log.Error(msg, "dir", dir.String(), "method", method, "id", string(id))
	if r.cfg.Strict {
		panic(fmt.Sprintf("acp-sidecar strict answers: %s (%s %s, id %s)", msg, dir, method, id))
	}
}

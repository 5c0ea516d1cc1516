package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// laters owns the goroutines that decide held and deferred frames
// (Verdict.Later): it starts each, holds its decision to one answer
// (answerOnce), writes what it decides, and lets Run wait for them all.
type laters struct {
	w    *writer
	log  *slog.Logger
	once answerOnce

	wg sync.WaitGroup
	// mu guards done: once Run has stopped waiting (stop), no new
	// goroutine starts.
	mu   sync.Mutex
	done bool
}

// start runs the Later of a Hold or Defer verdict for f on a goroutine the
// relay owns. A Hold reserves f's place first, so what f's peer sends after
// it waits; a Defer reserves nothing. f is copied where it is needed: the
// relay reuses it for the next frame.
func (l *laters) start(ctx context.Context, f *Frame, v Verdict) {
	dir := f.Dir
	if v.Later == nil {
		l.log.Error("a hook held a frame without deciding it; dropped", "dir", dir.String(), "method", string(f.Env.Method))
		v.Later = func(context.Context) Decision { return Decision{} }
	}
	release := func(lines ...[]byte) {
		for _, line := range lines {
			if err := l.w.send(dir, line); err != nil {
				l.log.Debug("forward a deferred frame", "dir", dir.String(), "err", err)
			}
		}
	}
	if v.Do == Hold {
		release = l.w.hold(dir)
	}
	var id []byte
	if f.Env.Kind == KindRequest {
		id = bytes.Clone(f.Env.ID)
	}
	method := string(f.Env.Method)
	l.mu.Lock()
	if l.done {
		// The relay is stopping: nobody reads an answer any more.
		l.mu.Unlock()
		release()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		d := v.Later(ctx)
		if id != nil {
			d = l.once.check(dir, id, method, d)
		}
		release(d.Forward...)
		if len(d.Answer) > 0 {
			// The answer's lines go out as one run: a response and what
			// follows it (a command list after an open) must not have the
			// peer's next exchange between them.
			l.w.hold(dir.Reverse())(d.Answer...)
		}
		if d.Placed != nil {
			d.Placed()
		}
	}()
}

// stop waits for every goroutine started, after which none starts: a frame
// held from then on is released empty. Run calls it once its context has
// ended, which the Laters see.
func (l *laters) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
	l.wg.Wait()
}

// answerOnce notes a hook that breaks the rule that a request it took
// gets exactly one answer: forwarded once (its peer answers), or answered
// once by the sidecar. The rule itself is held in one place, by the hook's
// owner (intercept's Chain.WithAnswers, against the ledger's Respond, for
// one agent and for several), which sees every answer: the agent's, a
// stage's, a Later's and a death's. The relay sees only a Later's, so it
// only notes what reaches it broken, a bug of the hook: logged, or under
// Config.Strict a panic, so no test passes on it. It changes no decision.
type answerOnce struct {
	log    *slog.Logger
	strict bool
}

// check notes whether decision d of the request id keeps the rule, and
// returns d as it is.
func (a answerOnce) check(dir Direction, id []byte, method string, d Decision) Decision {
	forwarded, answered := 0, 0
	for _, l := range d.Forward {
		if env, err := Scan(l); err == nil && env.Kind == KindRequest && bytes.Equal(env.ID, id) {
			forwarded++
		}
	}
	for _, l := range d.Answer {
		if env, err := Scan(l); err == nil && env.Kind == KindResponse && bytes.Equal(env.ID, id) {
			answered++
		}
	}
	switch {
	case forwarded+answered == 0:
		a.bug("a hook took a request and never answered it", dir, method, id)
	case forwarded > 1:
		a.bug("a hook forwarded a request twice", dir, method, id)
	case forwarded+answered > 1:
		a.bug("a hook answered a request twice", dir, method, id)
	}
	return d
}

// bug reports a hook that broke the promise of one answer per request:
// logged, or under Config.Strict a panic that names the request.
func (a answerOnce) bug(msg string, dir Direction, method string, id []byte) {
	a.log.Error(msg, "dir", dir.String(), "method", method, "id", string(id))
	if a.strict {
		panic(fmt.Sprintf("acp-sidecar strict answers: %s (%s %s, id %s)", msg, dir, method, id))
	}
}

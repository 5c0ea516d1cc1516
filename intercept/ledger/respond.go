package ledger

import "context"

// Respond is Flight.Respond in an update of its own: the one gate of an
// answer to a client request (the chain's, for the agent's answers and the
// stages'). first false: the answer is a second one, to drop.
func (l *Ledger) Respond(id string) (q Request, first bool) {
	l.Update(func(f *Flight) { q, first = f.Respond(id) })
	return q, first
}

// Take notes a client request the chain took, before any stage decides
// it: every request is in the ledger from then until it is answered, so
// a stage's answer to it is checked like the agent's, and a client that
// uses an id again is told apart from a second answer.
func (l *Ledger) Take(id, method, sid string) {
	l.Update(func(f *Flight) { f.Note(id, method, sid) })
}

// answeredKey carries, in a context, what the agent's answer being
// decided answers (WithAnswered).
type answeredKey struct{}

// WithAnswered is ctx carrying q, the request an agent's answer answers,
// as Respond took it out of the ledger: the stages that decide the answer
// read it there (AnsweredOf), as the ledger no longer holds it.
func WithAnswered(ctx context.Context, q Request) context.Context {
	return context.WithValue(ctx, answeredKey{}, q)
}

// AnsweredOf is the request the agent's answer being decided answers, and
// false when the ledger had not noted it.
func AnsweredOf(ctx context.Context) (Request, bool) {
	q, ok := ctx.Value(answeredKey{}).(Request)
	return q, ok
}

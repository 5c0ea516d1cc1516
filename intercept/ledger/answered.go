package ledger

import "context"

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

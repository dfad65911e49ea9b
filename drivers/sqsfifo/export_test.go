package sqsfifo

import "context"

// WithDeleteHook returns ctx carrying f, which DeadLetter runs between its
// copy and its delete.
func WithDeleteHook(ctx context.Context, f func(context.Context) error) context.Context {
	return context.WithValue(ctx, deleteHookKey{}, f)
}

package nats

import "context"

// WithTermHook returns ctx carrying a failpoint that runs between a dead
// letter's copy and the +TERM of its original.
func WithTermHook(ctx context.Context, hook func(context.Context) error) context.Context {
	return context.WithValue(ctx, termHookKey{}, hook)
}

// Package failpoint arms the fault-injection points of the outbox relay and
// the keys caller, for tests and fault-injection runs (examples/orders'
// relay crash, the soak). A failpoint travels in the context the relay or
// the caller is run with, never in their options, so production code
// cannot set one by accident, and a program that never imports this
// package pays one context lookup per batch or call.
//
// The package imports neither testing nor the store suite (idem/internal/idemtest),
// so a program that injects faults links only what it runs.
package failpoint

import (
	"context"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/failpoint"
)

// WithAfterPublish returns ctx carrying a failpoint for the outbox relay
// that runs with it (Relay.Run, RunOnce, Drain): f is called after each
// message was published and before it is marked sent. An error from f
// makes the relay act as if the process died there: the batch is released
// without marking anything, and the call returns the error.
func WithAfterPublish(ctx context.Context, f func(m *broker.Message) error) context.Context {
	return failpoint.WithAfterPublish(ctx, f)
}

// WithAfterCall returns ctx carrying a failpoint for keys.Caller.Call: f
// runs after the external call returned and before its outcome is
// recorded. An error from f makes Call act as if the process died there:
// nothing is recorded, and Call returns the error.
func WithAfterCall(ctx context.Context, f func(key string) error) context.Context {
	return failpoint.WithAfterCall(ctx, f)
}

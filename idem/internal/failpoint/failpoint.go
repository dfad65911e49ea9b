// Package failpoint carries the test failpoints of idem's packages in a
// context, so that they stay out of the production options: the outbox
// relay and the keys caller look them up in the context they are given
// (Relay.Run, RunOnce and Drain; Caller.Call), and a nil one costs a
// context lookup per batch or call. Package idem/failpoint exports the setters
// for tests in other modules (the rig, the examples).
package failpoint

import (
	"context"

	"github.com/wary-go/wary/broker"
)

type afterPublishKey struct{}

type afterCallKey struct{}

// WithAfterPublish returns ctx carrying f, which the relay calls after
// each message was published and before it is marked sent. An error from
// f makes the relay act as if the process died there: the claim is
// released without marking anything, and
// RunOnce (Run, Drain) returns the error.
func WithAfterPublish(ctx context.Context, f func(m *broker.Message) error) context.Context {
	return context.WithValue(ctx, afterPublishKey{}, f)
}

// AfterPublish returns ctx's AfterPublish failpoint, or nil.
func AfterPublish(ctx context.Context) func(m *broker.Message) error {
	f, _ := ctx.Value(afterPublishKey{}).(func(m *broker.Message) error)
	return f
}

// WithAfterCall returns ctx carrying f, which Caller.Call runs after the
// external call returned and before its outcome is recorded. An error from
// f makes Call act as if the process died there: nothing is recorded, and
// Call returns the error.
func WithAfterCall(ctx context.Context, f func(key string) error) context.Context {
	return context.WithValue(ctx, afterCallKey{}, f)
}

// AfterCall returns ctx's AfterCall failpoint, or nil.
func AfterCall(ctx context.Context) func(key string) error {
	f, _ := ctx.Value(afterCallKey{}).(func(key string) error)
	return f
}

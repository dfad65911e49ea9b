package broker

import (
	"context"
	"time"
)

// Middleware wraps a Handler in another: tracing, timeouts, decoding, the
// inbox of package idem. It runs inside the handler loop, so what it
// returns is settled as a Handler's is.
type Middleware func(Handler) Handler

// Chain returns h wrapped in ms, the first outermost: Chain(h, a, b) runs
// a, which runs b, which runs h.
func Chain(h Handler, ms ...Middleware) Handler {
	for i := len(ms) - 1; i >= 0; i-- {
		h = ms[i](h)
	}
	return h
}

// Timeout bounds each handler call: the handler's context is canceled d
// after it starts, and the error it then returns is settled as any other
// (a nack with a delay). A handler that ignores its context is not
// stopped.
func Timeout(d time.Duration) Middleware {
	return func(h Handler) Handler {
		return func(ctx context.Context, dl *Delivery) error {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return h(ctx, dl)
		}
	}
}

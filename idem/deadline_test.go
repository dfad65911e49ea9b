package idem

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type key struct{}

// TestCommitDeadlines: a commit's context keeps the caller's values, not
// its cancellation, and ends at a deadline between 15/16 of the timeout
// and the timeout; commits that begin close together share it, and the
// contexts derived from it (and context.AfterFunc, as pgx watches a
// query's context) end with it without a goroutine each.
func TestCommitDeadlines(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := &commitDeadlines{timeout: timeout}
	caller, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	before := time.Now()
	ctx := c.bound(caller)
	after := time.Now()
	cancel()
	if ctx.Value(key{}) != "v" {
		t.Fatalf("value %v, want the caller's", ctx.Value(key{}))
	}
	if ctx.Err() != nil {
		t.Fatalf("ended with the caller: %v", ctx.Err())
	}
	dl, ok := ctx.Deadline()
	if !ok || dl.After(after.Add(timeout)) || dl.Before(before.Add(timeout*15/16)) {
		t.Fatalf("deadline %v (%v), want within [%v, %v]", dl, ok, before.Add(timeout*15/16), after.Add(timeout))
	}
	if d2, _ := c.bound(t.Context()).Deadline(); !d2.Equal(dl) {
		t.Errorf("a commit begun at once: deadline %v, want the shared %v", d2, dl)
	}

	const watchers = 200
	goroutines := runtime.NumGoroutine()
	fired := make(chan struct{}, watchers)
	for range watchers {
		context.AfterFunc(ctx, func() { fired <- struct{}{} })
	}
	if n := runtime.NumGoroutine() - goroutines; n >= watchers {
		t.Errorf("%d goroutines started for %d context.AfterFunc", n, watchers)
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	<-child.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("ended with %v (child's cause %v), want the deadline", ctx.Err(), context.Cause(child))
	}
	if time.Now().Before(dl) {
		t.Fatalf("ended before the deadline %v", dl)
	}
	for range watchers {
		<-fired
	}
	if d3, _ := c.bound(t.Context()).Deadline(); !d3.After(dl) {
		t.Errorf("after the deadline: deadline %v, want a new one after %v", d3, dl)
	}
}

// BenchmarkCommitCtx: a commit's context as pgx uses it (context.AfterFunc
// on it, stopped when the statement is done): a timer per commit
// (context.WithTimeout, as before) against the shared deadline.
func BenchmarkCommitCtx(b *testing.B) {
	const timeout = 30 * time.Second
	watch := func(ctx context.Context) { context.AfterFunc(ctx, func() {})() }
	b.Run("timer", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(b.Context()), timeout)
			watch(ctx)
			cancel()
		}
	})
	b.Run("shared", func(b *testing.B) {
		c := &commitDeadlines{timeout: timeout}
		for b.Loop() {
			watch(c.bound(b.Context()))
		}
	})
}

package seam_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

type detachKey struct{}

// A call under Detach runs although its caller's context ended, keeps the
// caller's values, and a call that never answers ends at DetachTimeout
// with context.DeadlineExceeded (in a synctest bubble: its clock moves
// only when every goroutine waits).
func TestDetachBoundsAHungCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caller, cancel := context.WithCancel(context.WithValue(t.Context(), detachKey{}, "v"))
		cancel()
		start := time.Now()
		ctx, release := seam.Detach(caller)
		defer release()
		if ctx.Err() != nil {
			t.Fatalf("detached context ended with its caller: %v", ctx.Err())
		}
		if got := ctx.Value(detachKey{}); got != "v" {
			t.Errorf("detached context lost the caller's value: %v", got)
		}
		if dl, ok := ctx.Deadline(); !ok || !dl.Equal(start.Add(seam.DetachTimeout)) {
			t.Errorf("deadline %v (set %v), want %v", dl, ok, start.Add(seam.DetachTimeout))
		}
		hung := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		if err := hung(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hung call returned %v, want context.DeadlineExceeded", err)
		}
	})
}

package failpoint

import (
	"context"
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
)

func TestFailpoints(t *testing.T) {
	ctx := context.Background()
	if AfterPublish(ctx) != nil || AfterCall(ctx) != nil {
		t.Fatal("a context without failpoints has one")
	}
	boom := errors.New("boom")
	ctx = WithAfterPublish(ctx, func(m *broker.Message) error { return boom })
	ctx = WithAfterCall(ctx, func(key string) error { return nil })
	if f := AfterPublish(ctx); f == nil || !errors.Is(f(&broker.Message{}), boom) {
		t.Error("AfterPublish does not return the failpoint set")
	}
	if f := AfterCall(ctx); f == nil || f("k") != nil {
		t.Error("AfterCall does not return the failpoint set")
	}
}

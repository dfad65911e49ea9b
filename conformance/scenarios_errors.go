package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/wary-go/wary/broker"
)

func init() {
	register(
		scenario{"missing-topic-not-found", func(_ Capabilities, h *Harness) string {
			if h.OpenMissingTopic == nil {
				return "the harness cannot open a missing topic"
			}
			return ""
		}, missingTopic},
		scenario{"missing-subscription-not-found", func(_ Capabilities, h *Harness) string {
			if h.OpenMissingSubscription == nil {
				return "the harness cannot open a missing subscription"
			}
			return ""
		}, missingSubscription},
		scenario{"canceled-context", always, canceledContext},
		scenario{"closed-topic-and-subscription", always, closedScenario},
	)
}

// failFast is how long a not-found answer may take.
const failFast = 15 * time.Second

func missingTopic(t T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), failFast)
	defer cancel()
	top, err := e.h.OpenMissingTopic(ctx)
	if err == nil {
		defer top.Close()
		m := e.msg(t, "")
		err = top.Publish(ctx, m)
	}
	if ctx.Err() != nil {
		t.Fatalf("a missing topic did not fail within %s: %v", failFast, err)
	}
	mustIs(t, err, broker.ErrNotFound)
}

func missingSubscription(t T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), failFast)
	defer cancel()
	s, err := e.h.OpenMissingSubscription(ctx)
	if err == nil {
		defer s.Close()
		_, err = s.Receive(ctx, 1)
	}
	if ctx.Err() != nil {
		t.Fatalf("a missing subscription did not fail within %s: %v", failFast, err)
	}
	mustIs(t, err, broker.ErrNotFound)
}

// canceledContext: a canceled context fails Publish before anything is
// sent (context.Canceled, ErrNotSent) and ends Receive with
// context.Canceled; a deadline ends Receive with DeadlineExceeded.
func canceledContext(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	m := e.msg(t, "")
	mustIs(t, f.Topic.Publish(cctx, m), context.Canceled, broker.ErrNotSent)
	_, err := s.Receive(cctx, 1)
	mustIs(t, err, context.Canceled)
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	_, err = s.Receive(dctx, 1)
	mustIs(t, err, context.DeadlineExceeded)
	// A receive blocked when its context is canceled returns promptly.
	bctx, bcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Receive(bctx, 1)
		done <- err
	}()
	bcancel()
	select {
	case err := <-done:
		mustIs(t, err, context.Canceled)
	case <-time.After(failFast):
		t.Fatalf("Receive did not return within %s of its context being canceled", failFast)
	}
	e.expectNone(ctx, t, s, "a publish with a canceled context must send nothing")
}

// closedScenario: Close unblocks a waiting Receive with ErrClosed; calls
// after Close fail with ErrClosed; closing twice is harmless.
func closedScenario(t T, e *env) {
	ctx, f := e.setup(t)
	s, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, err := s.Receive(ctx, 1)
		done <- err
	}()
	<-started
	if err := s.Close(); err != nil {
		t.Fatalf("close subscription: %v", err)
	}
	select {
	case err := <-done:
		mustIs(t, err, broker.ErrClosed)
	case <-time.After(failFast):
		t.Fatalf("Receive did not return within %s of Close", failFast)
	}
	_, err = s.Receive(ctx, 1)
	mustIs(t, err, broker.ErrClosed)
	if err := s.Close(); err != nil {
		t.Fatalf("second close of a subscription: %v", err)
	}
	if err := s.Run(ctx, func(context.Context, *broker.Delivery) error { return nil }, nil); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("Run on a closed subscription: %v, want ErrClosed", err)
	}
	if err := f.Topic.Close(); err != nil {
		t.Fatalf("close topic: %v", err)
	}
	mustIs(t, f.Topic.Publish(ctx, e.msg(t, "")), broker.ErrClosed, broker.ErrNotSent)
	if err := f.Topic.Close(); err != nil {
		t.Fatalf("second close of a topic: %v", err)
	}
}

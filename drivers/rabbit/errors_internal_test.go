package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code      driver.ErrorCode
		maybeSent bool
	}{
		{&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange"}, driver.NotFound, false},
		{&amqp.Error{Code: amqp.AccessRefused}, driver.PermissionDenied, false},
		{&amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg"}, driver.Invalid, false},
		{&amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 200 is larger than configured max size 100"}, driver.TooLarge, false},
		{&amqp.Error{Code: amqp.FrameError, Reason: "read tcp: connection reset by peer"}, driver.Unavailable, false},
		{amqp.ErrClosed, driver.Unavailable, false},
		{notSent(amqp.ErrClosed), driver.Unavailable, false},
		{maybeSent(fmt.Errorf("x: %w", &amqp.Error{Code: amqp.ConnectionForced})), driver.Unavailable, true},
		{maybeSent(context.Canceled), driver.Canceled, true},
		{notSent(&returnedError{code: amqp.NoRoute, text: "NO_ROUTE"}), driver.NotFound, false},
		{maybeSent(nackError{}), driver.Unavailable, true},
		{fmt.Errorf("%w: %w", errLockLost, amqp.ErrClosed), driver.LockLost, false},
		{errClosed, driver.Closed, false},
		{errNotReady, driver.Unavailable, false},
		{&invalidError{"x"}, driver.Invalid, false},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, driver.Unavailable, false},
	} {
		got := classify(tc.err)
		if got.Code != tc.code || got.MaybeSent != tc.maybeSent {
			t.Errorf("classify(%v) = %v/%t, want %v/%t", tc.err, got.Code, got.MaybeSent, tc.code, tc.maybeSent)
		}
	}
}

func TestDelayBuckets(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{time.Millisecond, 25 * time.Millisecond},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{3 * time.Second, 5 * time.Second},
		{48 * time.Hour, 24 * time.Hour},
	} {
		if got := delayBucket(tc.in); got != tc.want {
			t.Errorf("delayBucket(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if !isDelayQueue(delayQueueName("orders.3", time.Second)) || isDelayQueue("orders.delay.x") || isDelayQueue("orders") {
		t.Errorf("isDelayQueue")
	}
}

func TestFromDelivery(t *testing.T) {
	d := &amqp.Delivery{
		MessageId:   "m1",
		Exchange:    "q.dlx",
		RoutingKey:  "3",
		Redelivered: true,
		Headers: amqp.Table{
			"a": "b", "n": int32(7), hdrKey: "customer-1", hdrPrior: int32(2), "x-delivery-count": int64(1),
			"x-death":              []any{amqp.Table{"reason": "delivery_limit", "queue": "q.0"}, amqp.Table{"reason": "expired", "queue": "q.0.delay.100ms"}},
			"x-first-death-reason": "expired",
		},
	}
	dlq := origin{queue: "q.dlq", deadLettersFrom: "q.dlx"}
	m, prior := fromDelivery(d, dlq)
	if m.Key != "customer-1" || prior != 2 || m.Attempt != 4 {
		t.Fatalf("key %q prior %d attempt %d", m.Key, prior, m.Attempt)
	}
	want := driver.Headers{{"a", "b"}, {"n", "7"}, {hdrReason, "delivery_limit"}}
	if !m.Headers.Equal(want) {
		t.Fatalf("headers %v, want %v", m.Headers, want)
	}
	// Back from a delay queue: not a dead letter.
	d.Headers["x-death"] = []any{amqp.Table{"reason": "expired", "queue": "q.0.delay.100ms"}}
	if m, _ := fromDelivery(d, dlq); m.Headers.Get(hdrReason) != "" {
		t.Fatalf("a message back from a delay queue reports reason %q", m.Headers.Get(hdrReason))
	}
	// Back from its own delay queue through the default exchange: the
	// prior attempts count; the same headers through another exchange do not.
	back := &amqp.Delivery{MessageId: "m2", RoutingKey: "q.0", Headers: amqp.Table{hdrKey: "k", hdrPrior: int32(3),
		"x-death": []any{amqp.Table{"reason": "expired", "queue": "q.0.delay.100ms"}}}}
	if m, prior := fromDelivery(back, origin{queue: "q.0"}); prior != 3 || m.Attempt != 4 || m.Key != "k" {
		t.Fatalf("from the delay queue: prior %d attempt %d key %q", prior, m.Attempt, m.Key)
	}
	back.Exchange = "orders"
	if m, prior := fromDelivery(back, origin{queue: "q.0"}); prior != 0 || m.Attempt != 1 {
		t.Fatalf("forged delay-queue return: prior %d attempt %d", prior, m.Attempt)
	}
	// Single queue: the key is the routing key.
	if m, _ := fromDelivery(&amqp.Delivery{RoutingKey: "k"}, origin{queue: "q"}); m.Key != "k" || m.Attempt != 1 {
		t.Fatalf("key %q attempt %d", m.Key, m.Attempt)
	}
}

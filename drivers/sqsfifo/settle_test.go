package sqsfifo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestDeadLetterCrashBetweenCopyAndDelete: DeadLetter copies, then
// deletes. A failure between the two leaves the message in both queues:
// the copy is in the DLQ and the original comes back; dead-lettering it
// again leaves one copy in the DLQ (SQS deduplicates the second by the
// deduplication ID) and none in the queue. Never none anywhere.
func TestDeadLetterCrashBetweenCopyAndDelete(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	url, dlqURL := e.createQueue(t, sqsemu.QueueSpec{Visibility: 2 * time.Second, MaxReceive: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m := &broker.Message{ID: "poison", Key: "g", Body: []byte("poison body"), Headers: broker.Headers{{"h", "v"}}}
	if err := top.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("injected crash between copy and delete")
	fired := 0
	crashing := sqsfifo.WithDeleteHook(ctx, func(context.Context) error { fired++; return crash })
	d := receiveOne(ctx, t, sub)
	err = d.DeadLetter(crashing, "bad input")
	if fired != 1 || !errors.Is(err, crash) {
		t.Fatalf("the injected crash did not fire (fired %d): %v", fired, err)
	}
	if n := e.count(ctx, t, dlqURL); n != 1 {
		t.Fatalf("after the crash the DLQ holds %d messages, want the copy", n)
	}
	// The original was not deleted: it comes back after its visibility.
	d2 := receiveOne(ctx, t, sub)
	if d2.Message.ID != m.ID || d2.Attempt != 2 {
		t.Fatalf("redelivered %s attempt %d", d2.Message.ID, d2.Attempt)
	}
	if err := d2.DeadLetter(ctx, "bad input"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(ctx, t, url); n != 0 {
		t.Fatalf("the queue still holds %d messages", n)
	}
	if n := e.count(ctx, t, dlqURL); n != 1 {
		t.Fatalf("the DLQ holds %d messages, want one (the second copy deduplicated)", n)
	}
	dead, err := sqsfifo.OpenDeadLetters(ctx, e.client, url, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	dd := receiveOne(ctx, t, dead)
	if dd.Message.ID != m.ID || string(dd.Message.Body) != "poison body" || dd.Message.Headers.Get("h") != "v" ||
		dd.Message.Headers.Get(driver.HeaderDeadLetterReason) != "bad input" || dd.Message.Key != "g" {
		t.Fatalf("dead letter %+v", dd.Message)
	}
	if err := dd.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func receiveOne(ctx context.Context, t *testing.T, s *broker.Subscription) *broker.Delivery {
	t.Helper()
	ds, err := s.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ds[0]
}

// TestSettleAfterVisibility: once the visibility timeout expired and the
// message was received again, the first receipt handle can no longer
// extend the lock (ErrLockLost), and the second delivery acks.
func TestSettleAfterVisibility(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "v1", Key: "g", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	d1 := receiveOne(ctx, t, sub)
	d2 := receiveOne(ctx, t, sub) // after the visibility timeout
	if d2.Attempt != 2 || !d2.Redelivered {
		t.Fatalf("second delivery attempt %d", d2.Attempt)
	}
	err = d1.ExtendLock(ctx, 10*time.Second)
	if !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("extending a stale receipt handle: %v, want ErrLockLost", err)
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(ctx, t, url); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

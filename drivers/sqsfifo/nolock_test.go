package sqsfifo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestVisibilityZeroIsNoLock: a FIFO queue with VisibilityTimeout 0 locks
// nothing (a message received and not settled is received again at once,
// while its first receiver still holds it), so the subscription declares
// LockNone, not the "held until settled" of a LockTimeout 0, and Run
// refuses it rather than hand a running handler's message out again.
func TestVisibilityZeroIsNoLock(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqsemu.UniqueName("nolock") + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = e.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})

	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	c := sub.Capabilities()
	if c.LockTimeout != capability.LockNone || c.LockExtendable || c.Source.IsUnread(capability.SettingLockTimeout) {
		t.Fatalf("VisibilityTimeout 0 declared as %s (lock unread: %t), want lock=none extend=false, read from the queue",
			c, c.Source.IsUnread(capability.SettingLockTimeout))
	}

	// What LockNone says is what the queue does: the message comes back
	// to a receiver while the first delivery is unsettled.
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "slow", Key: "g", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	first := receiveOne(ctx, t, sub)
	second := receiveOne(ctx, t, sub)
	if first.Message.ID != "slow" || second.Message.ID != "slow" || second.Attempt < 2 {
		t.Fatalf("received %s (attempt %d) then %s (attempt %d), want slow twice while the first is unsettled",
			first.Message.ID, first.Attempt, second.Message.ID, second.Attempt)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var called atomic.Bool
	err = sub.Run(runCtx, func(context.Context, *broker.Delivery) error {
		called.Store(true)
		stop()
		return nil
	}, nil)
	if !errors.Is(err, broker.ErrInvalid) || called.Load() {
		t.Fatalf("Run on a queue without a lock returned %v (handler called: %t), want an error matching ErrInvalid before any handler",
			err, called.Load())
	}
	if err := second.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

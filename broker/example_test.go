package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

func Example() {
	ctx := context.Background()
	topic, sub, done := orders()
	defer done()

	if err := topic.Publish(ctx, &broker.Message{ID: "order-1/created", Body: []byte("hello")}); err != nil {
		fmt.Println("publish:", err)
		return
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	for _, d := range ds {
		fmt.Printf("%s attempt %d: %s\n", d.Message.ID, d.Attempt, d.Message.Body)
		if err := d.Ack(ctx); err != nil {
			fmt.Println("ack:", err)
		}
	}
	// Output: order-1/created attempt 1: hello
}

// Run calls the handler for each delivery and settles it from the result:
// nil acks, an error nacks with backoff, broker.Permanent dead-letters.
// PerKey runs one handler per ordering key at a time.
func ExampleSubscription_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO})
	_ = b.CreateSubscription("orders", "shipping")
	topic, _ := b.OpenTopic("orders", nil)
	defer topic.Close()
	sub, _ := b.OpenSubscription("orders", "shipping", nil)
	defer sub.Close()

	_ = topic.Publish(ctx,
		&broker.Message{Key: "order-1", Body: []byte("created")},
		&broker.Message{Key: "order-1", Body: []byte("paid")},
		&broker.Message{Key: "order-2", Body: []byte("garbage")},
	)
	var mu sync.Mutex
	var seen []string
	_ = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if string(d.Message.Body) == "garbage" {
			seen = append(seen, d.Message.Key+": dead-lettered")
			if len(seen) == 3 {
				cancel()
			}
			return broker.Permanent(errors.New("cannot decode"))
		}
		seen = append(seen, d.Message.Key+": "+string(d.Message.Body))
		if len(seen) == 3 {
			cancel()
		}
		return nil
	}, &broker.RunOptions{Concurrency: 4, PerKey: true})
	sort.Strings(seen)
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// order-1: created
	// order-1: paid
	// order-2: dead-lettered
}

// Publish errors say whether the message may have reached the broker.
func ExampleTopic_Publish_errors() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO})
	topic, _ := b.OpenTopic("orders", nil)
	defer topic.Close()

	err := topic.Publish(ctx, &broker.Message{Body: []byte("no group")})
	fmt.Println(errors.Is(err, broker.ErrInvalid), errors.Is(err, broker.ErrNotSent), errors.Is(err, broker.ErrMaybeSent))
	// Output: true true false
}

func ExampleAckAll() {
	ctx := context.Background()
	topic, sub, done := orders()
	defer done()
	for i := range 3 {
		_ = topic.Publish(ctx, &broker.Message{ID: fmt.Sprintf("order-%d/created", i), Body: []byte("x")})
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	// The batch is processed, then acknowledged with one driver call.
	if errs := broker.AckAll(ctx, ds); errs != nil {
		for i, err := range errs {
			if err != nil {
				fmt.Println(ds[i].Message.ID, err) // the others are acknowledged
			}
		}
		return
	}
	fmt.Println("acknowledged:", len(ds), ds[0].Settled())
	// Output:
	// acknowledged: 3 true
}

// orders returns a topic and a subscription of the examples' in-memory
// broker, and the function that closes them.
func orders() (*broker.Topic, *broker.Subscription, func()) {
	b := memory.New(nil)
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.Queue})
	_ = b.CreateSubscription("orders", "billing")
	topic, _ := b.OpenTopic("orders", nil)
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	return topic, sub, func() {
		_ = sub.Close()
		_ = topic.Close()
		_ = b.Close()
	}
}

// OpenDeadLetters takes the consumer's own subscription URL and reads the
// dead letters of that subscription, each with its reason, whatever the
// driver keeps them in.
func ExampleOpenDeadLetters() {
	ctx := context.Background()
	const subURL = "mem://example-dead-letters/billing"
	sub, err := broker.OpenSubscription(ctx, subURL)
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer sub.Close()
	topic, err := broker.OpenTopic(ctx, "mem://example-dead-letters")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer topic.Close()
	if err := topic.Publish(ctx, &broker.Message{ID: "order-2/created", Body: []byte("{")}); err != nil {
		fmt.Println("publish:", err)
		return
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	if err := ds[0].DeadLetter(ctx, "cannot parse the body"); err != nil {
		fmt.Println("dead-letter:", err)
		return
	}

	dead, err := broker.OpenDeadLetters(ctx, subURL)
	if err != nil {
		fmt.Println("open dead letters:", err)
		return
	}
	defer dead.Close()
	ds, err = dead.Receive(ctx, 1)
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	d := ds[0]
	fmt.Printf("%s: %s\n", d.Message.ID, d.Message.Headers[broker.HeaderDeadLetterReason])
	if err := d.Ack(ctx); err != nil {
		fmt.Println("ack:", err)
	}
	// Output: order-2/created: cannot parse the body
}

// OpenTopic and OpenSubscription open by URL through the driver that
// registered the scheme (mem:// here: imported for its side effect in a
// program, `_ "github.com/wary-go/wary/drivers/memory"`). The subscription
// is opened first: a fan-out broker gives a subscription only the messages
// published after it exists.
func ExampleOpenTopic() {
	ctx := context.Background()
	sub, err := broker.OpenSubscription(ctx, "mem://example-open/billing?profile=sqsfifo")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer sub.Close()
	topic, err := broker.OpenTopic(ctx, "mem://example-open")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer topic.Close()

	caps := topic.Capabilities()
	fmt.Println("key:", caps.OrderingKey, "required:", caps.KeyRequired, "dedup:", caps.DedupWindow)
	fmt.Println("order:", sub.Capabilities().Ordering)
	msg := &broker.Message{ID: "order-1/placed", Key: "order-1", Body: []byte("placed")}
	if err := topic.Publish(ctx, msg, msg); err != nil { // a retried publish: dropped by the dedup window
		fmt.Println("publish:", err)
		return
	}
	ds, err := sub.Receive(ctx, 10)
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	for _, d := range ds {
		fmt.Println("received", d.Message.ID, "attempt", d.Attempt)
		_ = d.Ack(ctx)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = sub.Receive(done, 10) // a poll: nothing more
	fmt.Println("then nothing:", errors.Is(err, context.Canceled))
	// Output:
	// key: MessageGroupId required: true dedup: 5m0s
	// order: message group
	// received order-1/placed attempt 1
	// then nothing: true
}

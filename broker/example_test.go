package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
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
	fmt.Printf("%s: %s\n", d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason))
	if err := d.Ack(ctx); err != nil {
		fmt.Println("ack:", err)
	}
	// Output: order-2/created: cannot parse the body
}

// OpenTopic opens a topic by URL through the driver that registered the
// scheme: mem:// here, which a program imports for its side effect,
// _ "github.com/wary-go/wary/drivers/memory". The topic states what the
// broker promises its publisher.
func ExampleOpenTopic() {
	ctx := context.Background()
	topic, err := broker.OpenTopic(ctx, "mem://example-open?profile=sqsfifo")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer topic.Close()
	caps := topic.Capabilities()
	fmt.Println("key:", caps.OrderingKey, "required:", caps.KeyRequired)
	fmt.Println("dedup:", caps.DedupWindow, "per", caps.DedupScope)
	err = topic.Publish(ctx, &broker.Message{ID: "order-1/placed", Body: []byte("placed")})
	fmt.Println("without a key:", errors.Is(err, broker.ErrInvalid))
	// Output:
	// key: MessageGroupId required: true
	// dedup: 5m0s per queue
	// without a key: true
}

// OpenSubscription opens a subscription by URL: TOPIC/SUBSCRIPTION for
// the memory broker. The subscription states what the broker promises
// its consumer; an inbox reads its redelivery horizon.
func ExampleOpenSubscription() {
	ctx := context.Background()
	sub, err := broker.OpenSubscription(ctx, "mem://example-open-sub/billing?profile=servicebus&limit=5")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer sub.Close()
	caps := sub.Capabilities()
	fmt.Println("order per", caps.Ordering, "head-of-line:", caps.HeadOfLine)
	fmt.Println("dead-letters after", caps.DeliveryLimit, "deliveries:", caps.DeliveryLimitMode)
	fmt.Println("copies for up to", caps.RedeliveryHorizon)
	// Output:
	// order per session head-of-line: true
	// dead-letters after 5 deliveries: native
	// copies for up to 168h0m0s
}

// Command psemu serves Google's Pub/Sub fake (pstest, through package
// psemu) on a local address until interrupted, with a topic and a pull
// subscription of it created, for local runs of programs that use
// gcppubsub:// URLs:
//
//	go -C drivers/gcppubsub run ./psemu/cmd/psemu -addr 127.0.0.1:8085 -project wary -topic orders -subscription orders -ordering -dead-letter
//	export PUBSUB_EMULATOR_HOST=127.0.0.1:8085
//
// -dead-letter adds a dead-letter policy (5 delivery attempts) to the
// subscription, with the topic TOPIC-dead and its subscription
// TOPIC-dead. The fake keeps everything in memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/drivers/gcppubsub/psemu"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8085", "address to serve on")
	project := flag.String("project", "wary", "project of the topic and subscription")
	topic := flag.String("topic", "", "topic to create (none: create nothing)")
	sub := flag.String("subscription", "", "pull subscription of the topic to create")
	ordering := flag.Bool("ordering", false, "enable message ordering on the subscription")
	exactlyOnce := flag.Bool("exactly-once", false, "enable exactly-once delivery on the subscription")
	deadLetter := flag.Bool("dead-letter", false, "give the subscription a dead-letter policy (5 attempts) to TOPIC-dead, with a subscription TOPIC-dead")
	ackDeadline := flag.Duration("ack-deadline", 10*time.Second, "the subscription's ack deadline")
	flag.Parse()
	if err := run(*addr, *project, *topic, *sub, *ordering, *exactlyOnce, *deadLetter, *ackDeadline); err != nil {
		log.Fatal(err)
	}
}

func run(addr, project, topic, sub string, ordering, exactlyOnce, deadLetter bool, ackDeadline time.Duration) error {
	srv, err := psemu.Start(addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := srv.NewClient(ctx, project)
	if err != nil {
		return err
	}
	defer c.Close()
	name := func(kind, n string) string { return "projects/" + project + "/" + kind + "/" + n }
	if topic != "" {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name("topics", topic)}); err != nil {
			return err
		}
		fmt.Printf("topic        gcppubsub://%s\n", name("topics", topic))
	}
	if sub != "" {
		ps := &pubsubpb.Subscription{Name: name("subscriptions", sub), Topic: name("topics", topic),
			AckDeadlineSeconds: int32(ackDeadline / time.Second), EnableMessageOrdering: ordering, EnableExactlyOnceDelivery: exactlyOnce}
		if deadLetter {
			dead := topic + "-dead"
			if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name("topics", dead)}); err != nil {
				return err
			}
			if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: name("subscriptions", dead), Topic: name("topics", dead)}); err != nil {
				return err
			}
			ps.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: name("topics", dead), MaxDeliveryAttempts: 5}
		}
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, ps); err != nil {
			return err
		}
		fmt.Printf("subscription gcppubsub://%s\n", name("subscriptions", sub))
	}
	fmt.Printf("PUBSUB_EMULATOR_HOST=%s\n", srv.Addr)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// Command quickstart publishes a few order events to the embedded
// in-memory broker (profile "sqsfifo": per-group order, head-of-line
// blocking, a dedup window), consumes them with the handler loop, and
// prints what happened: one duplicate dropped by the broker's dedup window,
// one handler failure retried, per-order sequence kept.
//
//	go -C examples run ./quickstart
//
// -broker runs it on another broker (-subscription names where to
// consume; by default the -broker URL itself for a queue: sqsfifo://,
// servicebus://), e.g. on the fauxqs emulator of docs/brokers/sqs-fifo.md, "Run it
// locally":
//
//	go -C examples run -tags sqsfifo ./quickstart -broker 'sqsfifo://orders.fifo?endpoint=http://127.0.0.1:PORT&region=us-east-1'
//
// As in examples/orders, each driver but the embedded one is built in only
// under a build tag of its name (rabbit, kafka, sqsfifo, servicebus), so
// that the default run compiles, and a fresh machine downloads, only what
// it runs; a URL whose driver the build left out fails with the command
// that builds it in.
//
// On a broker other than the embedded one, the message IDs get a suffix of
// the run, so that a second run is not dropped as a copy of the first by a
// dedup window; on a broker without one, the retried publish is delivered
// too (an inbox, package idem, is what drops it then).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/memory" // registers mem://; the others under their tags
	"github.com/wary-go/wary/redact"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %s\n", redact.String(err.Error()))
		os.Exit(1)
	}
}

const defaultBroker = "mem://orders?profile=sqsfifo"

func run(ctx context.Context, args []string, w, errw io.Writer) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(errw)
	topicURL := fs.String("broker", defaultBroker, "topic URL to publish to: mem:// (built in); with -tags rabbit: rabbit://, amqp://; with -tags kafka: kafka://; with -tags sqsfifo: sqsfifo://; with -tags servicebus: servicebus://")
	subURL := fs.String("subscription", "", "subscription URL to consume from (default: TOPIC/billing for mem://, the -broker URL itself for sqsfifo:// and servicebus://)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	u, err := url.Parse(*topicURL)
	if err != nil {
		return fmt.Errorf("-broker: %w", err)
	}
	suffix := ""
	if *subURL == "" {
		switch u.Scheme {
		case "mem":
			s := *u
			s.Path = strings.TrimSuffix(s.Path, "/") + "/billing"
			*subURL = s.String()
		case "sqsfifo", "servicebus":
			*subURL = *topicURL // one queue: the topic and the subscription
		default:
			return fmt.Errorf("-broker %s: give the subscription to consume from with -subscription", redact.URL(u))
		}
	}
	if u.Scheme != "mem" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		suffix = "@" + hex.EncodeToString(b[:])
	}

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topic, err := broker.OpenTopic(ctx, *topicURL)
	if err != nil {
		if tag := tagOf(u.Scheme); tag != "" && errors.Is(err, broker.ErrInvalid) {
			return fmt.Errorf("%w (%s:// is built in only with -tags %s: go -C examples run -tags %s ./quickstart -broker %s://…)", err, u.Scheme, tag, tag, u.Scheme)
		}
		return err
	}
	defer topic.Close()
	sub, err := broker.OpenSubscription(ctx, *subURL)
	if err != nil {
		return err
	}
	defer sub.Close()
	fmt.Fprintf(w, "broker: %s\n", redact.URL(u))
	fmt.Fprintf(w, "capabilities: %s\n", topic.Capabilities())

	events := []*broker.Message{
		{ID: "order-1/created" + suffix, Key: "order-1", Body: []byte(`{"order":1,"event":"created"}`)},
		{ID: "order-2/created" + suffix, Key: "order-2", Body: []byte(`{"order":2,"event":"created"}`)},
		{ID: "order-1/paid" + suffix, Key: "order-1", Body: []byte(`{"order":1,"event":"paid"}`)},
		{ID: "order-1/shipped" + suffix, Key: "order-1", Body: []byte(`{"order":1,"event":"shipped"}`)},
	}
	if err := topic.Publish(ctx, events...); err != nil {
		return err
	}
	// A producer retry: the same ID again, inside the dedup window.
	if err := topic.Publish(ctx, &broker.Message{ID: "order-1/paid" + suffix, Key: "order-1", Body: []byte(`{"order":1,"event":"paid"}`)}); err != nil {
		return err
	}
	fmt.Fprintf(w, "published 5 messages (one a retry of order-1/paid%s)\n", suffix)
	// Without a dedup window the broker delivers the retry too.
	want := len(events)
	dedup := topic.Capabilities().DedupWindow > 0
	if !dedup {
		want++
	}

	var mu sync.Mutex
	handled := 0
	failedOnce := false
	runCtx, stop := context.WithCancel(ctx)
	err = sub.Run(runCtx, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if d.Message.ID == "order-2/created"+suffix && !failedOnce {
			failedOnce = true
			fmt.Fprintf(w, "handle %-16s attempt %d: failing on purpose (will be retried)\n", d.Message.ID, d.Attempt)
			return errors.New("payment service unavailable")
		}
		handled++
		fmt.Fprintf(w, "handle %-16s attempt %d: %s\n", d.Message.ID, d.Attempt, d.Message.Body)
		if handled == want {
			stop()
		}
		return nil
	}, &broker.RunOptions{Concurrency: 2, PerKey: true, Backoff: broker.Backoff{Initial: 10 * time.Millisecond}})
	if err != nil {
		return err
	}
	if dedup {
		fmt.Fprintf(w, "done: %d distinct events handled, the duplicate publish was dropped by the broker's dedup window\n", handled)
	} else {
		fmt.Fprintf(w, "done: %d messages handled: this broker has no dedup window, so the retried publish was delivered too (an inbox, package idem, drops such copies)\n", handled)
	}
	return nil
}

// tagOf is the build tag under which the quickstart builds in the driver of
// a URL scheme: "" for mem://, always built in.
func tagOf(scheme string) string {
	switch scheme {
	case "rabbit", "amqp", "amqps":
		return "rabbit"
	case "kafka", "sqsfifo", "servicebus":
		return scheme
	}
	return ""
}

package rabbit_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/rabbit"
)

// A delivery limit without a dead-letter exchange would drop messages past
// it: options, topologies and URLs that ask for one on a queue without one
// are refused at open with ErrInvalid, and a queue that holds one opens. On the live server (3.x, no default limit) a queue
// without a limit needs none, and NoDeliveryLimit says so explicitly.
func TestDeliveryLimitNeedsDeadLetter(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	ver := c.ServerVersion()
	if !strings.HasPrefix(ver, "3.") {
		t.Skipf("server %q: this test expects RabbitMQ 3.x (no default delivery limit)", ver)
	}
	name := uniqueName("limit")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, DeadLetter: true})

	invalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}

	bare := uniqueName("limit")
	declare(t, c, rabbit.Topology{Exchange: bare, Queue: bare})
	_, err := rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: bare, DeliveryLimit: 3}, nil)
	invalid("subscription with a limit and no dead-letter exchange", err)
	other := uniqueName("limit")
	err = rabbit.Declare(ctx, c, rabbit.Topology{Exchange: other, Queue: other, DeliveryLimit: 3})
	invalid("topology with a limit and no dead letters", err)
	_, err = rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: top.Queue, DeliveryLimit: -2}, nil)
	invalid("negative limit", err)
	t.Setenv(rabbit.ServerURLEnv, serverURL())
	_, err = broker.OpenSubscription(ctx, "rabbit://"+bare+"?delivery_limit=3")
	invalid("URL with a limit and no dead-letter exchange", err)

	// Issue 44: a queue that holds a dead-letter exchange the options do
	// not name does not drop messages past a limit: it opens, and
	// dead-letters there.
	for _, open := range []func() (*broker.Subscription, error){
		func() (*broker.Subscription, error) {
			return rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: top.Queue, DeliveryLimit: 3}, nil)
		},
		func() (*broker.Subscription, error) {
			return broker.OpenSubscription(ctx, "rabbit://"+top.Queue+"?delivery_limit=3")
		},
	} {
		sub, err := open()
		if err != nil {
			t.Fatalf("a limit without dead_letter_exchange on a queue that holds one: %v", err)
		}
		if caps := sub.Capabilities(); !caps.DeadLetter {
			t.Errorf("capabilities %+v: want DeadLetter, the queue's exchange", caps)
		}
		_ = sub.Close()
	}

	// The limit is the queue's, read from the broker: a queue declared
	// without one, on 3.x, has none, whatever the options state (a
	// limit stated otherwise is a conflict), as with NoDeliveryLimit.
	for _, tc := range []struct {
		top       rabbit.Topology
		limit     int
		conflicts int
	}{
		{rabbit.Topology{Queue: top.Queue, DeliveryLimit: 3, DeadLetterExchangeName: top.DeadLetterExchange()}, 0, 1},
		{rabbit.Topology{Queue: top.Queue}, 0, 0},
		{rabbit.Topology{Queue: top.Queue, DeliveryLimit: rabbit.NoDeliveryLimit}, 0, 0},
		{rabbit.Topology{Queue: top.DeadLetterQueue(), DeliveryLimit: rabbit.NoDeliveryLimit, DeadLettersFrom: top.DeadLetterExchange()}, 0, 0},
	} {
		sub, err := rabbit.OpenSubscription(ctx, c, tc.top, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tc.top, err)
		}
		caps := sub.Capabilities()
		_ = sub.Close()
		wantMode := capability.LimitNone
		if tc.limit > 0 {
			wantMode = capability.LimitNative
		}
		if caps.DeliveryLimit != tc.limit || caps.DeliveryLimitMode != wantMode || len(caps.Source.Conflicts) != tc.conflicts {
			t.Errorf("%+v: limit %d mode %s, conflicts %+v; want %d %s, %d conflict(s)", tc.top, caps.DeliveryLimit, caps.DeliveryLimitMode, caps.Source.Conflicts, tc.limit, wantMode, tc.conflicts)
		}
	}
}

// RabbitMQ keeps a message until it is acked, and delay queues hold nacked
// ones up to a day: the subscription declares an unbounded horizon.
func TestRedeliveryHorizonUnbounded(t *testing.T) {
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	name := uniqueName("horizon")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name, DeliveryLimit: 4, DeadLetter: true})
	sub, err := rabbit.OpenSubscription(t.Context(), c, top, &rabbit.SubscriptionOptions{NackDelay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	caps := sub.Capabilities()
	if caps.RedeliveryHorizon != capability.HorizonUnbounded {
		t.Errorf("horizon %s, want unbounded", capability.HorizonString(caps.RedeliveryHorizon))
	}
	if caps.DeliveryLimit != 4 || caps.DeliveryLimitMode != capability.LimitNative || !caps.DeadLetter {
		t.Errorf("%s", caps)
	}
}

// Errors are classified the same on every path, and never show the
// password or a parameter's value: a refused login is ErrPermission from
// Dial as from broker.OpenTopic, a malformed parameter value ErrInvalid.
func TestDialErrorsClassified(t *testing.T) {
	c := dial(t) // skips without a server
	_ = c.Close()
	ctx := ctxT(t)
	u, err := url.Parse(serverURL())
	if err != nil {
		t.Fatal(err)
	}
	const secret = "wrong-s3cr3t-pa55"
	u.User = url.UserPassword(u.User.Username(), secret)
	wrong := u.String()

	check := func(what string, err error, class error, hidden ...string) {
		t.Helper()
		if !errors.Is(err, class) {
			t.Errorf("%s: %v, want %v", what, err, class)
			return
		}
		for _, h := range hidden {
			if strings.Contains(err.Error(), h) {
				t.Errorf("%s: the error shows %q: %v", what, h, err)
			}
		}
	}
	_, err = rabbit.Dial(ctx, wrong, nil)
	check("Dial with a wrong password", err, broker.ErrPermission, secret)
	_, err = broker.OpenTopic(ctx, wrong+"?exchange=x")
	check("OpenTopic with a wrong password", err, broker.ErrPermission, secret)

	const bad = "notanumber"
	for _, p := range []string{"heartbeat", "connection_timeout", "channel_max"} {
		_, err = rabbit.Dial(ctx, wrong+"?"+p+"="+bad, nil)
		check("Dial with "+p, err, broker.ErrInvalid, secret, bad)
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Errorf("Dial with %s: the error does not name it: %v", p, err)
		}
		_, err = broker.OpenTopic(ctx, wrong+"?exchange=x&"+p+"="+bad)
		check("OpenTopic with "+p, err, broker.ErrInvalid, secret, bad)
	}
	_, err = rabbit.Dial(ctx, "amqp://user:"+secret+"@127.0.0.1:1/?heartbeat=70000", nil)
	check("heartbeat out of range", err, broker.ErrInvalid, secret, "70000")

	t.Setenv(rabbit.ServerURLEnv, serverURL())
	for _, q := range []string{"partitions=" + bad, "skip_check=" + bad, "dead_letter=" + bad, "max_message_size=" + bad, "no_check=true", "delivery_limit=-2"} {
		_, err := broker.OpenTopic(ctx, "rabbit://x?"+q)
		check("topic "+q, err, broker.ErrInvalid, bad)
	}
	for _, q := range []string{"prefetch=" + bad, "nack_delay=" + bad, "concurrency=4", "partitions=4&assigned=" + bad} {
		_, err := broker.OpenSubscription(ctx, "rabbit://x?"+q)
		check("subscription "+q, err, broker.ErrInvalid, bad)
	}
}

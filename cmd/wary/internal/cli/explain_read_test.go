package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/rabbit"
)

// handQueue declares, as a user's own program would (not through wary's
// Topology), a quorum queue with a single active consumer and args (a nil
// value leaves that argument out), deleted at cleanup, on the server rabbitTopology found (call it first).
func handQueue(t *testing.T, args map[string]any) string {
	t.Helper()
	conn := handConn(t)
	ch, err := conn.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	name := unique("wary-cli-hand")
	all := map[string]any{"x-queue-type": "quorum", "x-single-active-consumer": true}
	for k, v := range args {
		all[k] = v
		if v == nil {
			delete(all, k)
		}
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, all); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Connection().Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			_ = ch.Close()
		}
	})
	return name
}

// handConn dials the server rabbitTopology found, closed at cleanup.
func handConn(t *testing.T) *rabbit.Conn {
	t.Helper()
	conn, err := rabbit.Dial(t.Context(), os.Getenv(rabbit.ServerURLEnv), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// needManagement skips when explain's r read nothing through the
// management API (fails with WARY_REQUIRE_SERVICES=1).
func needManagement(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.out, "through the management API") {
		return
	}
	msg := "the management API does not answer (rabbitmq-plugins enable rabbitmq_management):\n" + r.out
	if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestExplainRabbitReadsBroker: explain states what RabbitMQ holds for a
// queue wary did not declare, not what the URL says: the real limit (20
// deliveries for x-delivery-limit 19), a URL that says otherwise flagged,
// a queue without a limit flagged, and, with the management API out of
// reach, what could not be read stated as unknown with how to read it.
func TestExplainRabbitReadsBroker(t *testing.T) {
	_, topicURL, _, _ := rabbitTopology(t)
	limited := handQueue(t, map[string]any{"x-delivery-limit": 19, "x-dead-letter-exchange": "amq.fanout"})
	explain := func(code int, sub string) result {
		t.Helper()
		return newWary(t).want(code, "explain", "--broker", topicURL, "--subscription", sub, "--outbox", "--inbox", "--consumer", "billing")
	}
	r := explain(cli.ExitOK, "rabbit://"+limited)
	needManagement(t, r)
	r.has(t, "dead-letters after 20 deliveries (native)", "subscription read from quorum queue "+limited+" through the management API at ", "x-delivery-limit 19")
	// The lock's bound, RabbitMQ's consumer_timeout, is the one setting no
	// interface shows: stated as unknown, with where to look it up, which
	// makes the transport weak and the exit status no worse.
	r.has(t, "transport:   [weak]", "lock unknown",
		"UNKNOWN (transport): the subscription's lock timeout could not be read from the broker: RabbitMQ closes the channel of a consumer that holds a delivery unacknowledged longer than consumer_timeout",
		"consumer_timeout is a server-wide setting (30 minutes by default)", "to read it: it cannot be read remotely")
	if strings.Contains(r.out, "held until settled") || strings.Count(r.out, "UNKNOWN") != 1 {
		t.Errorf("want the lock unknown, the only setting not read:\n%s", r.out)
	}

	r = explain(cli.ExitFinding, "rabbit://"+limited+"?delivery_limit=5&dead_letter_exchange=amq.fanout")
	r.has(t, "dead-letters after 20 deliveries (native)", "the subscription's delivery limit is stated as 5 deliveries (delivery_limit=5), but the broker holds 20 deliveries (x-delivery-limit 19), which applies", "drop delivery_limit from the URL")

	unlimited := handQueue(t, nil)
	r = explain(cli.ExitFinding, "rabbit://"+unlimited)
	r.has(t, "no delivery limit", "subscription read from quorum queue "+unlimited)

	r = explain(cli.ExitOK, "rabbit://"+unlimited+"?management=http://127.0.0.1:1")
	r.has(t, "delivery limit unknown", "UNKNOWN (transport): the subscription's delivery limit could not be read from the broker: the management API at 127.0.0.1:1 did not answer",
		"to read it: enable the rabbitmq_management plugin", "lock unknown")
	// The limit, the dead-letter target, the order and the queue length,
	// which the management API would show, and the lock, which nothing
	// shows.
	if n := strings.Count(r.out, "UNKNOWN (transport)"); n != 5 {
		t.Errorf("%d settings unknown, want 5:\n%s", n, r.out)
	}
}

// TestExplainRabbitOrderUnread (issue 44): a quorum queue declared by hand
// without x-single-active-consumer delivers to its consumers in parallel.
// Through the management API explain states "no order"; with
// management=off, where the queue's arguments are read over AMQP, which
// cannot show that argument, it states the order as UNKNOWN with how to
// make it readable, never "order per queue"; its delivery limit likewise,
// whatever x-delivery-limit says.
func TestExplainRabbitOrderUnread(t *testing.T) {
	_, topicURL, _, _ := rabbitTopology(t)
	q := handQueue(t, map[string]any{"x-single-active-consumer": nil, "x-delivery-limit": 19, "x-dead-letter-exchange": "amq.fanout"})
	explain := func(code int, sub string) result {
		t.Helper()
		return newWary(t).want(code, "explain", "--broker", topicURL, "--subscription", sub, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	}
	r := explain(cli.ExitFinding, "rabbit://"+q)
	needManagement(t, r)
	r.has(t, "at least once; no order", "no x-single-active-consumer", "MISCONFIGURED (order): ordering is needed but the broker declares no ordering scope")

	r = explain(cli.ExitOK, "rabbit://"+q+"?management=off")
	r.has(t, "at least once; order unknown", "order:       [weak] needed, but the order the broker delivers in could not be read",
		"UNKNOWN (transport): the subscription's ordering could not be read from the broker: whether the queue has x-single-active-consumer",
		"cannot be read over AMQP", "the management API is not used (management=off)",
		"to read it: enable the rabbitmq_management plugin (rabbitmq-plugins enable rabbitmq_management), or pass management=http://HOST:PORT in the URL")
	// Nor is the limit read: a delivery-limit policy, which AMQP cannot
	// show, applies over x-delivery-limit when lower.
	r.has(t, "delivery limit unknown", "x-delivery-limit 19 is read over AMQP, but a delivery-limit policy")
	if strings.Contains(r.out, "order per") || strings.Contains(r.out, "orders per") || strings.Contains(r.out, "after 20 deliveries") {
		t.Errorf("an order or a limit stated that was not read:\n%s", r.out)
	}
}

// TestExplainRabbitReadVerdict (issue 44): the verdict takes what was read
// from the queue. A delivery_limit URL parameter without
// dead_letter_exchange, on a queue that holds a dead-letter exchange, is
// no claim that RabbitMQ would drop messages: the queue's exchange
// applies. Four handlers without PerKey on the queue's single active
// consumer are graded as a queue without order is, with the same inbox:
// ok where version checks hold gaps, broken without them.
func TestExplainRabbitReadVerdict(t *testing.T) {
	_, topicURL, _, _ := rabbitTopology(t)
	q := handQueue(t, map[string]any{"x-delivery-limit": 4, "x-dead-letter-exchange": "amq.fanout"})
	explain := func(code int, sub string, flags ...string) result {
		t.Helper()
		return newWary(t).want(code, append([]string{"explain", "--broker", topicURL, "--subscription", sub, "--outbox", "--inbox", "--consumer", "billing"}, flags...)...)
	}
	r := explain(cli.ExitOK, "rabbit://"+q+"?delivery_limit=5")
	needManagement(t, r)
	r.has(t, "dead-letters after 5 deliveries (native)", `x-dead-letter-exchange "amq.fanout"`, "no misconfiguration found")

	r = explain(cli.ExitOK, "rabbit://"+q, "--ordered", "--versioned", "--concurrency", "4")
	r.has(t, "order:       [ok] the broker orders per queue, but 4 concurrent handlers without PerKey apply an aggregate's events in any order; version checks hold an early event in the store")
	unordered := handQueue(t, map[string]any{"x-single-active-consumer": nil, "x-delivery-limit": 4, "x-dead-letter-exchange": "amq.fanout"})
	r = explain(cli.ExitOK, "rabbit://"+unordered, "--ordered", "--versioned", "--concurrency", "4")
	r.has(t, "order:       [ok] the broker keeps no order; version checks hold an early event in the store")
	explain(cli.ExitFinding, "rabbit://"+q, "--ordered", "--concurrency", "4").has(t, "order:       [broken]", "MISCONFIGURED (order): 4 concurrent handlers without PerKey")
	explain(cli.ExitFinding, "rabbit://"+unordered, "--ordered", "--concurrency", "4").has(t, "order:       [broken]", "MISCONFIGURED (order): ordering is needed but the broker declares no ordering scope")
}

// TestExplainRabbitLimitDrops: a quorum queue with x-delivery-limit and no
// dead-letter exchange, on the broker or in the URL, deletes a message
// past its limit: explain states "drops after 5 deliveries" as a
// misconfiguration of the transport, with how to keep such messages, and
// exits 1. A dead_letter_exchange in the URL does not keep them (RabbitMQ
// uses the queue's), so it is flagged as well, and the drop stays.
func TestExplainRabbitLimitDrops(t *testing.T) {
	_, topicURL, _, _ := rabbitTopology(t)
	q := handQueue(t, map[string]any{"x-delivery-limit": 4})
	explain := func(sub string) result {
		t.Helper()
		return newWary(t).want(cli.ExitFinding, "explain", "--broker", topicURL, "--subscription", sub, "--outbox", "--inbox", "--consumer", "billing")
	}
	r := explain("rabbit://" + q)
	needManagement(t, r)
	drop := "MISCONFIGURED (transport): the subscription drops a message after 5 deliveries: it has no dead-letter target, so a message whose handler keeps failing is deleted by the broker"
	r.has(t, "transport:   [broken] at least once; order per queue", "drops after 5 deliveries (native)", "no dead-letter exchange", drop,
		"fix: give the subscription a dead-letter target that keeps what passes the limit for wary dlq (RabbitMQ: a dead-letter-exchange policy or x-dead-letter-exchange on the queue")
	if strings.Count(r.out, "MISCONFIGURED") != 1 || strings.Contains(r.out, "dead-letters after") {
		t.Errorf("want the drop, the only misconfiguration:\n%s", r.out)
	}

	r = explain("rabbit://" + q + "?dead_letter_exchange=amq.fanout")
	r.has(t, "drops after 5 deliveries (native)", drop, `the subscription's dead-letter target is stated as dead-letter exchange "amq.fanout" (dead_letter_exchange), but the broker holds no dead-letter exchange`)
}

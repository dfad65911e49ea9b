package cli_test

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
)

// handDeadLetters declares, as a user's own program would, a quorum
// dead-letter queue with args (handQueue's, without a single active
// consumer) and a fanout dead-letter exchange bound to it, deleted at
// cleanup; it returns their names.
func handDeadLetters(t *testing.T, args map[string]any) (dlx, dlq string) {
	t.Helper()
	args["x-single-active-consumer"] = nil
	dlq = handQueue(t, args)
	dlx = dlq + ".dlx"
	conn := handConn(t)
	ch, err := conn.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	t.Cleanup(func() {
		if ch, err := conn.Connection().Channel(); err == nil {
			_ = ch.ExchangeDelete(dlx, false, false)
			_ = ch.Close()
		}
	})
	if err := ch.ExchangeDeclare(dlx, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	return dlx, dlq
}

// TestExplainRabbitDeadLetterLimit (issue 44): a dead-letter queue
// declared by hand with a delivery limit is flagged, since reading its
// dead letters counts toward that limit before RabbitMQ 4.3, with how to
// lift it; the one rabbit.Declare makes is not; and where the dead-letter
// queue's limit cannot be read (management=off, and no x-delivery-limit
// for AMQP to show), it is stated as unknown, never as none.
func TestExplainRabbitDeadLetterLimit(t *testing.T) {
	_, topicURL, _, subURL := rabbitTopology(t)
	explain := func(code int, sub string) result {
		t.Helper()
		return newWary(t).want(code, "explain", "--broker", topicURL, "--subscription", sub, "--outbox", "--inbox", "--consumer", "billing")
	}
	dlx, dlq := handDeadLetters(t, map[string]any{"x-delivery-limit": 4})
	q := handQueue(t, map[string]any{"x-delivery-limit": 19, "x-dead-letter-exchange": dlx})
	limited := "rabbit://" + q + "?dead_letter_exchange=" + dlx + "&dead_letter_queue=" + dlq
	r := explain(cli.ExitFinding, limited)
	needManagement(t, r)
	r.has(t, "MISCONFIGURED (transport): the subscription's dead-letter queue (quorum queue "+dlq+" through the management API at ",
		") has a delivery limit of 5 deliveries (x-delivery-limit 4), and reading its dead letters counts toward it",
		"reading its dead letters counts toward it: before RabbitMQ 4.3 each look of wary dlq list or the console counts once for every message",
		"fix: lift the dead-letter queue's limit: a delivery-limit policy of -1", "or let wary declare the topology")
	if n := strings.Count(r.out, "MISCONFIGURED"); n != 1 {
		t.Errorf("%d findings, want the dead-letter queue's limit alone:\n%s", n, r.out)
	}
	// Over AMQP the argument is read: the same finding.
	r = explain(cli.ExitFinding, limited+"&management=off")
	r.has(t, "the subscription's dead-letter queue (quorum queue "+dlq+" over AMQP) has a delivery limit of 5 deliveries, and reading")

	// wary's own dead-letter queue has no limit: nothing to say.
	r = explain(cli.ExitOK, subURL)
	if strings.Contains(r.out, "dead-letter queue") {
		t.Errorf("explain speaks of the dead-letter queue rabbit.Declare made:\n%s", r.out)
	}
	// With management=off, its lack of x-delivery-limit does not show
	// that no policy sets one: unknown.
	r = explain(cli.ExitOK, subURL+"&management=off")
	r.has(t, "UNKNOWN (transport): whether the subscription's dead-letter queue has a delivery limit, which reading its dead letters (wary dlq list, the console) counts toward before RabbitMQ 4.3, could not be read: the management API is not used (management=off)",
		"to read it: enable the rabbitmq_management plugin")
}

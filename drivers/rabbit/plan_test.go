package rabbit_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/topology"
	"github.com/wary-go/wary/drivers/rabbit"
)

// withQuery is the test server's amqp:// URL with query q.
func withQuery(q string) string {
	u, _ := url.Parse(serverURL())
	u.RawQuery = q
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String()
}

// TestPlanTopologyDeclares: a fresh exchange and queue are planned as
// missing, Apply declares them with Declare's arguments, and a second
// plan finds them all, with nothing that differs; topic and subscription
// then open on the same URLs.
func TestPlanTopologyDeclares(t *testing.T) {
	c := dial(t)
	defer c.Close()
	ctx := t.Context()
	name := uniqueName("plan")
	top := rabbit.Topology{Exchange: name, Queue: name + ".billing", DeliveryLimit: 5, DeadLetter: true}
	t.Cleanup(func() { _ = top.Delete(context.Background(), c) })

	exURL := withQuery("exchange=" + name)
	subURL := withQuery("queue=" + top.Queue + "&exchange=" + name + "&delivery_limit=5&dead_letter_exchange=" + top.DeadLetterExchange())
	if _, err := broker.OpenTopic(ctx, exURL); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("open topic on a fresh server: %v, want ErrNotFound", err)
	}
	p, err := topology.PlanURL(ctx, broker.DefaultURLMux(), subURL)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range p.Entities {
		if e.Exists {
			t.Errorf("%s %s exists before Apply", e.Kind, e.Name)
		}
		kinds = append(kinds, e.Kind+" "+e.Name)
	}
	want := []string{"dead-letter exchange " + top.DeadLetterExchange(), "dead-letter queue " + top.DeadLetterQueue(), "exchange " + name, "quorum queue " + top.Queue}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("entities %q, want %q", kinds, want)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{subURL, exURL} {
		p, err = topology.PlanURL(ctx, broker.DefaultURLMux(), u)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entities {
			if !e.Exists || len(e.Conflicts) > 0 {
				t.Errorf("after Apply, %s %s: exists %v, differences %v (unread: %s)", e.Kind, e.Name, e.Exists, e.Conflicts, e.Unread)
			}
		}
	}
	// The driver's own Declare finds the same arguments (it fails with
	// PRECONDITION_FAILED on any other).
	if err := rabbit.Declare(ctx, c, top); err != nil {
		t.Fatalf("Declare after Apply: %v", err)
	}
	topic, err := broker.OpenTopic(ctx, exURL)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := broker.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := topic.Publish(ctx, &broker.Message{ID: "1", Key: "k", Body: []byte("x")}); err != nil {
		t.Fatalf("publish through the declared binding: %v", err)
	}
}

// TestPlanTopologyDiffers: an existing queue declared otherwise is
// reported with its differences, and Apply leaves it as it is.
func TestPlanTopologyDiffers(t *testing.T) {
	q := handQueue(t, amqp.Table{"x-delivery-limit": 19, "x-dead-letter-exchange": "elsewhere"})
	ctx := t.Context()
	t.Setenv(rabbit.ServerURLEnv, serverURL())
	u := "rabbit://" + q + "?delivery_limit=5&dead_letter_exchange=" + q + ".dlx"
	p, err := topology.PlanURL(ctx, broker.DefaultURLMux(), u)
	if err != nil {
		t.Fatal(err)
	}
	var queue topology.Entity
	for _, e := range p.Entities {
		if e.Name == q {
			queue = e
		}
	}
	if !queue.Exists {
		t.Fatalf("queue %s not found in %+v", q, p.Entities)
	}
	got := map[capability.Setting]string{}
	for _, d := range queue.Conflicts {
		got[d.Setting] = d.Stated + " / " + d.Held
	}
	if queue.Unread != "" && !strings.Contains(queue.Unread, "over AMQP") {
		t.Logf("unread: %s", queue.Unread)
	}
	if !strings.HasPrefix(got[capability.SettingDeliveryLimit], "5 deliveries / 20 deliveries") || got[capability.SettingDeadLetter] != `"`+q+`.dlx" / "elsewhere"` {
		t.Fatalf("differences %q", got)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	defer c.Close()
	// The queue keeps its arguments: redeclaring with them succeeds.
	ch, err := c.Connection().Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.SingleActiveConsumerArg: true,
		"x-delivery-limit": 19, "x-dead-letter-exchange": "elsewhere"}); err != nil {
		t.Fatalf("the queue's arguments changed: %v", err)
	}
	_, _ = ch.QueueDelete(q+".dlq", false, false, false)
}

// TestPlanTopologyInvalid: a URL that describes nothing to declare, or a
// limit without a dead-letter exchange, is ErrInvalid and touches nothing.
func TestPlanTopologyInvalid(t *testing.T) {
	c := dial(t)
	_ = c.Close()
	for _, q := range []string{"heartbeat=5", "queue=x&delivery_limit=5", "queue=x&dead_letters_from=y", "queue=x&bogus=1"} {
		if _, err := topology.PlanURL(t.Context(), broker.DefaultURLMux(), withQuery(q)); !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "guest:guest") {
			t.Errorf("%s: %v, want ErrInvalid without the password", q, err)
		}
	}
}

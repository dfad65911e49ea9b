package cli_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// TestServiceBusDLQ: the dead-letter sub-queue of a Service Bus queue
// (our emulator) is listed, replayed and discarded through the queue's
// plain servicebus:// URL, the namespace in
// WARY_SERVICEBUS_CONNECTION_STRING and its administration API in
// WARY_SERVICEBUS_ADMIN_ENDPOINT, where the driver reads the queue.
func TestServiceBusDLQ(t *testing.T) {
	name := unique("orders")
	// On our emulator, a message read from a dead-letter queue and
	// abandoned (what list does to put it back) came back only when its
	// lock expired (measured: 30s with a 30s lock): a short lock lets the
	// next command read it.
	u, top, sub := sbQueue(t, name, 2*time.Second)
	if c := sub.Capabilities(); c.DeliveryLimit != 5 || c.LockTimeout != 2*time.Second || c.Source.Read == "" {
		t.Fatalf("%s: %s, source %+v: want the queue's settings, read from it", u, c, c.Source)
	}
	dlqWalkthrough(t, newWary(t), top, u, sub, u, "10s")
}

// TestServiceBusDLQPeeks: wary dlq list peeks at a Service Bus
// dead-letter sub-queue: after five listings each dead letter is still
// at its first delivery (ATTEMPT 1), and the next command reads it at
// once, with no lock to wait for.
func TestServiceBusDLQPeeks(t *testing.T) {
	name := unique("orders")
	u, top, sub := sbQueue(t, name, time.Minute)
	id := unique("dead")
	publish(t, top, event(id, "order-9", 1))
	if err := receive(t, sub, 1)[0].DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
		t.Fatal(err)
	}
	w := newWary(t)
	for range 5 {
		var got []struct {
			MessageID string `json:"message_id"`
			Attempt   int    `json:"attempt"`
		}
		w.want(cli.ExitFinding, "dlq", "list", u, "--json", "--wait", "1s").json(t, &got)
		if len(got) != 1 || got[0].MessageID != id || got[0].Attempt != 1 {
			t.Fatalf("dlq list: %+v, want %s at attempt 1", got, id)
		}
	}
	w.want(cli.ExitOK, "dlq", "discard", u, "--all", "--yes", "--wait", "10s").has(t, "discard: 1 dead letter(s)", id)
}

// sbQueue starts the emulator with the queue name (lock duration lock,
// MaxDeliveryCount 5), points the driver at it, and opens the queue's
// URL as a topic and a subscription.
func sbQueue(t *testing.T, name string, lock time.Duration) (string, *broker.Topic, *broker.Subscription) {
	t.Helper()
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: name, LockDuration: lock, MaxDeliveryCount: 5}}})
	if emu.Real {
		t.Skip("runs on the emulator, whose entities it declares")
	}
	sbEnv(t, emu)
	u := "servicebus://" + name
	return u, mustOpenTopic(t, u), mustOpenSub(t, u)
}

// sbEnv points the driver (which reads the environment, as the command
// does) at emu's namespace and administration API.
func sbEnv(t *testing.T, emu *sbemu.Emulator) {
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString)
	t.Setenv(servicebus.EnvAdminEndpoint, emu.AdminEndpoint)
}

// TestExplainServiceBus: a queue configured by hand through the
// administration API, not by wary, with MaxDeliveryCount 7 and its
// dead-letter queue: explain on plain URLs states the broker's values and
// where it read them; a URL stating max_delivery_count=3 is flagged (exit
// 1) with the broker's 7 and the fix; read_entity=false states the
// settings it took from the URL as unknown, with how to read them, and
// not as the broker's.
func TestExplainServiceBus(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{})
	sbEnv(t, emu)
	q := sbemu.CreateQueue(t, emu.AdminClient(t), sbemu.Entity{DeliveryLimit: 7, Lock: 5 * time.Second})
	w := newWary(t)
	// no outbox and no inbox: those stages are flagged (exit 1) whatever
	// the broker, and the transport's findings are looked for by stage
	explain := func(topic, sub string) result {
		t.Helper()
		r := w.want(cli.ExitFinding, "explain", "--broker", topic, "--subscription", sub, "--inbox=false", "--outbox=false")
		if strings.Contains(r.out+r.errout, "SharedAccessKey=") {
			t.Errorf("the connection string is printed")
		}
		return r
	}
	u := "servicebus://" + q
	r := explain(u, u)
	r.has(t, "transport:   [ok] at least once;", "dead-letters after 7 deliveries (native)", "lock 5s, extendable",
		"topic read from queue "+q+" through the administration API", "subscription read from queue "+q+" through the administration API")
	if strings.Contains(r.out, "(transport)") {
		t.Errorf("a transport finding or unknown for the entity as it is:\n%s", r.out)
	}

	r = explain(u, u+"?max_delivery_count=3")
	r.has(t, "transport:   [weak]", "MISCONFIGURED (transport): ")
	r.has(t, "dead-letters after 7 deliveries (native)",
		"the subscription's delivery limit is stated as max_delivery_count=3 in the URL, but the broker holds MaxDeliveryCount 7, which applies",
		"drop max_delivery_count from the URL, or set the entity's MaxDeliveryCount to 3")

	off := u + "?read_entity=false&max_delivery_count=3"
	r = explain(off, off)
	r.has(t, "transport:   [weak]", "delivery limit unknown", "lock unknown", "subscription not read from the broker (delivery limit, ",
		"UNKNOWN (transport): the subscription's delivery limit could not be read from the broker: read_entity=false: taken from the URL (max_delivery_count=3)",
		"to read it: drop read_entity=false; for an emulator set "+servicebus.EnvAdminEndpoint)
	if strings.Contains(r.out, "after 3 deliveries") {
		t.Errorf("the URL's limit is stated as the broker's:\n%s", r.out)
	}
}

// sbProbe starts our emulator (with no entities: probe creates them) and
// returns a command whose namespace is the emulator, and the emulator's
// administration endpoint.
func sbProbe(t *testing.T) (*wary, string) {
	emu := sbemu.Start(t, sbemu.Topology{})
	if emu.Real {
		t.Skip("runs on the emulator, whose administration port it names")
	}
	w := newWary(t)
	w.env[cli.EnvServiceBus] = emu.ConnectionString
	return w, emu.AdminEndpoint
}

// TestProbeServiceBus: the Service Bus driver keeps what it declares on our
// emulator, on scratch queues (plain and session) that probe creates and
// deletes through the administration API, which --servicebus-admin-endpoint
// reaches on the emulator's own port.
func TestProbeServiceBus(t *testing.T) {
	w, admin := sbProbe(t)
	only := "order-within-scope,dedup-within-window,delivery-limit-dead-letters,lock-expiry-redelivers"
	for _, c := range []struct{ url, order, lock string }{
		{"servicebus://scratch", "order per none", "lock 5s"},
		// a session's lock is renewed while its receiver holds it
		{"servicebus://scratch?sessions=true", "order per session", "held until settled"},
		{"servicebus://scratch?topic=true", "order per none", "lock 5s"},
	} {
		r := w.want(cli.ExitOK, "probe", c.url, "--servicebus-admin-endpoint", admin, "--only", only)
		r.has(t, c.order, c.lock, "dedup 3s per ", "limit 3 (native)", "every observation matches the declaration")
		if strings.Contains(r.out+r.errout, "RootManageSharedAccessKey;SharedAccessKey") {
			t.Errorf("the connection string is printed")
		}
	}
	if r := w.want(cli.ExitError, "probe", "servicebus://scratch?partitions=2", "--servicebus-admin-endpoint", admin); !strings.Contains(r.errout, "partitions: unknown parameter") {
		t.Errorf("stderr does not name the parameter: %s", r.errout)
	}
	// Plain http to an address that is not loopback would carry the
	// namespace's token in the clear: refused, a usage error.
	w.env[cli.EnvServiceBusAdmin] = "http://10.0.0.1:1"
	r := w.want(cli.ExitError, "probe", "servicebus://scratch", "--only", only)
	if !strings.Contains(r.errout, "loopback") {
		t.Errorf("stderr does not say why: %s", r.errout)
	}
}

// TestProbeServiceBusCatchesALie: a Service Bus queue behind drivers that
// declare two deliveries more than its MaxDeliveryCount is caught, exit 1.
func TestProbeServiceBusCatchesALie(t *testing.T) {
	w, admin := sbProbe(t)
	w.env[cli.EnvServiceBusAdmin] = admin
	w.harnesses = map[string]cli.HarnessFunc{"sbliar": func(ctx context.Context, u *url.URL, getenv func(string) string) (conformance.Harness, func(), error) {
		real := *u
		real.Scheme = servicebus.Scheme
		h, closeH, err := cli.ServiceBusHarness(ctx, &real, getenv)
		if err != nil {
			return h, closeH, err
		}
		setup := h.Setup
		h.Setup = func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			f, err := setup(ctx, tb, cfg)
			if err != nil {
				return nil, err
			}
			subscribe := f.Subscribe
			f.Subscribe = func(ctx context.Context) (*broker.Subscription, error) {
				s, err := subscribe(ctx)
				if err != nil {
					return nil, err
				}
				caps := s.Capabilities()
				caps.DeliveryLimit += 2
				return broker.NewSubscription(&lyingSub{s: s, caps: caps}, nil), nil
			}
			return f, nil
		}
		return h, closeH, nil
	}}
	r := w.want(cli.ExitFinding, "probe", "sbliar://scratch", "--only", "delivery-limit-dead-letters")
	r.has(t, "limit 5 (native)", "BROKEN: ", "the broker does not keep what it declares")
}

// TestServiceBusGuideExplain: the Service Bus guide's own wary explain
// command, run as written from the repository's root on the queue its
// emulator command creates (lock 30s, MaxDeliveryCount 10, the command's
// defaults), states the orders example's pipeline without a
// misconfiguration, as the SQS guide's does (TestSQSGuideExplain).
func TestServiceBusGuideExplain(t *testing.T) {
	guide, err := os.ReadFile("../../../../docs/brokers/servicebus.md")
	if err != nil {
		t.Fatal(err)
	}
	emuLine := guideLine(t, string(guide), "go -C drivers/servicebus run ./sbemu/cmd/sbemu ")
	line := guideLine(t, string(guide), "wary explain ")
	var queue string
	if _, err := fmt.Sscanf(emuLine, "go -C drivers/servicebus run ./sbemu/cmd/sbemu -queue %s ", &queue); err != nil {
		t.Fatalf("the guide's emulator command %q: %v", emuLine, err)
	}
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: queue, LockDuration: 30 * time.Second, MaxDeliveryCount: 10}}})
	if emu.Real {
		t.Skip("runs on the emulator, whose entities it declares")
	}
	sbEnv(t, emu)
	args := shellWords(t, line)
	t.Chdir("../../../..")
	r := newWary(t).want(cli.ExitOK, args[1:]...)
	r.has(t, "subscription read from queue "+queue+" through the administration API", "dead-letters after 10 deliveries", "no misconfiguration found")
}

// TestExplainCountsDeadLetters (issue 44): with a store, explain's "now:"
// lines count the subscription's dead letters where the driver shows them
// without receiving them (Service Bus peeks), twice alike, and say where
// they are not counted (the memory driver cannot peek).
func TestExplainCountsDeadLetters(t *testing.T) {
	u, top, sub := sbQueue(t, unique("orders"), time.Minute)
	publish(t, top, event(unique("dead"), "order-8", 1))
	publish(t, top, event(unique("dead"), "order-9", 1))
	for _, d := range receive(t, sub, 2) {
		if err := d.DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
			t.Fatal(err)
		}
	}
	p := sqlitePipe(t)
	w := newWary(t)
	for range 2 {
		w.want(cli.ExitOK, p.args("explain", "--broker", u, "--subscription", u, "--consumer", "billing")...).has(t,
			"dead-lettered messages (wary dlq list; replay or discard)", "now: 2 dead letter(s) (wary dlq list)")
	}
	w.want(cli.ExitOK, p.args("explain", "--broker", p.topicURL, "--subscription", p.topicURL+"/billing", "--consumer", "billing")...).has(t,
		"now: dead letters not counted: the driver cannot show them without receiving them")
}

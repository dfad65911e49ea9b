package cli_test

import (
	"context"
	"net/url"
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
// servicebus:// URL, the namespace in WARY_SERVICEBUS_CONNECTION_STRING.
func TestServiceBusDLQ(t *testing.T) {
	name := unique("orders")
	// On our emulator, a message read from a dead-letter queue and
	// abandoned (what list does to put it back) came back only when its
	// lock expired (measured: 30s with a 30s lock): a short lock lets the
	// next command read it.
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: name, LockDuration: 2 * time.Second, MaxDeliveryCount: 5}}})
	if emu.Real {
		t.Skip("runs on the emulator, whose entities it declares")
	}
	t.Setenv(servicebus.ConnectionStringEnv, emu.ConnectionString) // the driver reads it
	q := "?read_entity=false&lock_duration=2s&max_delivery_count=5"
	top := mustOpenTopic(t, "servicebus://"+name+q)
	sub := mustOpenSub(t, "servicebus://"+name+q)
	dlqWalkthrough(t, newWary(t), top, "servicebus://"+name+q, sub, "servicebus://"+name+q, "10s")
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

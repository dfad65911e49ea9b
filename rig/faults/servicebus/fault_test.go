package servicebus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/rig/effecttest"
)

// proxiedClient starts an in-process toxiproxy in front of the emulator and
// returns it with a client that connects through it.
func proxiedClient(t *testing.T, e *env) (*toxiproxy.Proxy, *azservicebus.Client) {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "sb", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", e.emu.Port))
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	cs := strings.Replace(e.emu.ConnectionString, fmt.Sprintf("127.0.0.1:%d", e.emu.Port), p.Listen, 1)
	c, err := azservicebus.NewClientFromConnectionString(cs, e.emu.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return p, c
}

// The connection is reset (TCP RST both ways, reconnections too) in the
// middle of a run that publishes and consumes through it, until a publish
// has failed: nothing is lost, and an idem inbox on SQLite applies each
// message's effect once although some deliveries repeat (settles lost with
// the connection, copies of maybe-sent messages).
func TestFaultConnectionReset(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("needs the emulator's port behind a proxy")
	}
	q := e.createQueue(t, sbemu.Entity{Lock: 5 * time.Second, Dedup: time.Minute})
	p, client := proxiedClient(t, e)
	// One try per Publish: the test retries, and sees the failures.
	topic, err := servicebus.OpenTopic(t.Context(), client, q, &servicebus.TopicOptions{Admin: e.admin,
		TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := servicebus.OpenSubscription(t.Context(), client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := conformance.NewHistory()
	eff := effecttest.New(t, h)
	handler := eff.Handler(t, "servicebus-fault", sub.Capabilities())
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() {
		runDone <- sub.Run(rctx, handler, &broker.RunOptions{Concurrency: 4, Backoff: broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	}()

	failures := 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m-%03d", i)
		fault := i == n/2
		if fault {
			// from here every connection through the proxy is reset,
			// the consumer's too, until this publish has failed
			if err := addResets(p); err != nil {
				t.Fatal(err)
			}
		}
		for {
			err := topic.Publish(ctx, &broker.Message{ID: id, Body: []byte("effect " + id)})
			if err == nil {
				h.Sent(id)
				break
			}
			failures++
			if !errors.Is(err, broker.ErrRetryable) {
				t.Fatalf("publish %s: %v, want a retryable failure", id, err)
			}
			if errors.Is(err, broker.ErrMaybeSent) {
				h.MaybeSent(id) // the entity's duplicate detection drops a second copy
			}
			if fault {
				fault = false
				if err := removeResets(p); err != nil {
					t.Fatal(err)
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %s never succeeded: %v", id, err)
			}
		}
		if fault {
			// The resets would stay on: fail now, saying why, rather than
			// let every later publish fail until ctx ends.
			t.Fatalf("the reset did not fire: publish %s succeeded", id)
		}
	}
	eff.WaitCount(ctx, t, n, runDone)
	stop()
	if err := <-runDone; err != nil && ctx.Err() == nil && rctx.Err() == nil {
		t.Fatalf("Run: %v", err)
	}
	eff.Applied(t)
	rep := h.Check()
	t.Logf("%d failed publishes; %s", failures, rep)
	if !rep.Valid() || rep.Applied != n {
		t.Fatalf("history invalid: %s", rep)
	}
}

// addResets makes the proxy reset every connection through it, both ways,
// new ones too, until removeResets.
func addResets(p *toxiproxy.Proxy) error {
	for _, stream := range []string{"downstream", "upstream"} {
		js := fmt.Sprintf(`{"name":"reset_%s","type":"reset_peer","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("add toxic: %w", err)
		}
	}
	return nil
}

func removeResets(p *toxiproxy.Proxy) error {
	for _, stream := range []string{"downstream", "upstream"} {
		if err := p.Toxics.RemoveToxic(context.Background(), "reset_"+stream); err != nil {
			return fmt.Errorf("remove toxic: %w", err)
		}
	}
	return nil
}

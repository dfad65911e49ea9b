package servicebus_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
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

// The connection is reset (TCP RST both ways, reconnections too) for a
// second in the middle of a run that publishes and consumes through it:
// nothing is lost, and an inbox keyed by message ID applies each effect
// once although some deliveries repeat.
func TestFaultConnectionReset(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("needs the emulator's port behind a proxy")
	}
	q := e.createQueue(t, entityConfig{lock: 5 * time.Second, dedup: time.Minute})
	p, client := proxiedClient(t, e)
	topic, err := servicebus.OpenTopic(client, q, &servicebus.TopicOptions{Admin: e.admin,
		TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 20, Backoff: broker.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := servicebus.OpenSubscription(client, q, &servicebus.SubscriptionOptions{Admin: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	inbox := map[string]int{} // effects applied, by message ID
	deliveries := 0
	all := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() {
		runDone <- sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			deliveries++
			if inbox[d.Message.ID] == 0 && len(inbox) == n-1 {
				close(all)
			}
			inbox[d.Message.ID]++ // counted per delivery; the effect is the first
			return nil
		}, &broker.RunOptions{Concurrency: 4})
	}()
	published := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := topic.Publish(ctx, &broker.Message{ID: fmt.Sprintf("m-%03d", i), Body: []byte("x")}); err != nil {
				published <- fmt.Errorf("publish %d: %w", i, err)
				return
			}
			if i == n/2 {
				resetFor(t, p, time.Second)
			}
		}
		published <- nil
	}()
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d messages handled", len(inbox), n)
	}
	stop()
	if err := <-runDone; err != nil && ctx.Err() == nil && rctx.Err() == nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < n; i++ {
		if inbox[fmt.Sprintf("m-%03d", i)] == 0 {
			t.Fatalf("m-%03d lost", i)
		}
	}
	t.Logf("%d messages, %d deliveries (repeats are the inbox's to absorb)", n, deliveries)
}

func resetFor(t *testing.T, p *toxiproxy.Proxy, d time.Duration) {
	if err := addResets(p); err != nil {
		t.Error(err)
		return
	}
	time.Sleep(d) // the outage's length, not a synchronisation
	if err := removeResets(p); err != nil {
		t.Error(err)
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

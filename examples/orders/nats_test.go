//go:build nats

package main

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/topology"
	"github.com/wary-go/wary/drivers/nats"
)

// TestNATS runs the example on a fresh JetStream stream and consumer of
// the local server (WARY_NATS_URL, default nats://127.0.0.1:4222),
// declared as wary topology --apply declares them. The stream's
// duplicate_window drops the relay's and the broker's copies (same
// Nats-Msg-Id, inside 2 minutes): the inbox sees none of them.
func TestNATS(t *testing.T) {
	runDedup(t, Config{Broker: natsStream(t)}, true)
}

// TestTelemetryNATS is TestNATS with OpenTelemetry on (see runTraced):
// the trace context travels in NATS headers.
func TestTelemetryNATS(t *testing.T) {
	u := natsStream(t)
	pu, _ := url.Parse(u)
	runTracedDedup(t, Config{Broker: u}, "nats", pu.Path[1:], true)
}

// natsStream declares a fresh stream with a consumer billing and its
// dead-letter stream, deleted at the end, and returns the URL.
func natsStream(t *testing.T) string {
	server := "nats://127.0.0.1:4222"
	if v, ok := os.LookupEnv("WARY_NATS_URL"); ok {
		server = v
	}
	name := "ORDERS_" + newSuffix()
	u := server + "/" + name + "?consumer=billing&subject=orders." + name + "&ack_wait=5s&max_deliver=10"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := topology.PlanURL(ctx, broker.DefaultURLMux(), u)
	if err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" || os.Getenv("WARY_NATS_URL") != "" {
			t.Fatalf("NATS at %s: %v", server, err)
		}
		t.Skipf("NATS unreachable at %s (set WARY_NATS_URL, or WARY_REQUIRE_SERVICES=1 to fail): %v", server, err)
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteStreams(t, server, name) })
	return u
}

// deleteStreams deletes the stream name and its dead-letter stream.
func deleteStreams(t *testing.T, server, name string) {
	nc, err := natsgo.Connect(server)
	if err != nil {
		t.Errorf("delete %s: %v", name, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, name)
	_ = js.DeleteStream(ctx, nats.DeadLetterStream(name))
}

package nats_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/nats"
	"github.com/wary-go/wary/internal/servicetest"
)

// ServerURLEnv names the NATS server (with JetStream) the tests use.
const serverURLEnv = "WARY_NATS_URL"

// serverURL is the NATS server the tests use; t is skipped when it is
// unreachable (failed with WARY_REQUIRE_SERVICES=1 or WARY_NATS_URL set).
func serverURL(t testing.TB) string {
	t.Helper()
	return servicetest.URL(t, serverURLEnv, "nats://127.0.0.1:4222", func(ctx context.Context, u string) error {
		nc, err := natsgo.Connect(u, natsgo.Timeout(3*time.Second))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	})
}

// connect returns a JetStream on the test server, closed at cleanup.
func connect(t conformance.T, url string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

var nameSeq atomic.Int64

// uniqueName returns a stream or consumer name no other test (nor run)
// uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// declare creates spec's stream (with a unique name when spec.Stream is
// empty), consumer and dead-letter stream, deleted at cleanup.
func declare(t conformance.T, js jetstream.JetStream, spec nats.Spec) nats.Spec {
	t.Helper()
	if spec.Stream == "" {
		spec.Stream = uniqueName("wary")
	}
	if spec.Subject == "" {
		spec.Subject = "wary.test." + spec.Stream
	}
	if spec.Consumer == "" {
		spec.Consumer = "c"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := nats.Declare(ctx, js, spec); err != nil {
		t.Fatalf("declare: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, spec.Stream)
		_ = js.DeleteStream(ctx, nats.DeadLetterStream(spec.Stream))
	})
	return spec
}

func ctxT(t conformance.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func jetstreamNoAck(name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckNonePolicy}
}

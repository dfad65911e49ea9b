package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestOpenEndsWithCallersContext: against a broker that accepts the
// connection and never answers, each constructor waits for as long as the
// caller's context lets it, and returns its error when it ends.
func TestOpenEndsWithCallersContext(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(ctx context.Context, seeds []kgo.Opt) error
	}{
		{"OpenTopic", func(ctx context.Context, seeds []kgo.Opt) error {
			cl, err := kgo.NewClient(append(kafka.TopicOpts(), seeds...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = kafka.OpenTopic(ctx, cl, "orders", nil)
			return err
		}},
		{"OpenTopic on a plain client", func(ctx context.Context, seeds []kgo.Opt) error {
			cl, err := kgo.NewClient(seeds...)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = kafka.OpenTopic(ctx, cl, "orders", nil)
			return err
		}},
		{"OpenSubscription", func(ctx context.Context, seeds []kgo.Opt) error {
			cl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"), seeds...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = kafka.OpenSubscription(ctx, cl, "orders", "billing", nil)
			return err
		}},
		{"OpenTransactSession", func(ctx context.Context, seeds []kgo.Opt) error {
			sess, err := kgo.NewGroupTransactSession(append(kafka.TransactOpts("enricher"), seeds...)...)
			if err != nil {
				return err
			}
			defer sess.Close()
			_, err = kafka.OpenTransactSession(ctx, sess, "orders", "enricher", nil)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, accepted := silentBroker(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.open(ctx, []kgo.Opt{kgo.SeedBrokers(addr)}) }()
			<-accepted // the open is waiting on the broker
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want the caller's context.Canceled", err)
			}
		})
	}
}

// silentBroker listens on loopback, accepts connections and never
// answers; accepted receives a value for each connection.
func silentBroker(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), accepted
}

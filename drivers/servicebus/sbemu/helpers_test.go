package sbemu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/redact"
)

// opTimeout bounds every single SDK call; waitTimeout bounds a poll loop that
// waits for something time-driven (lock expiry, schedule, TTL).
const (
	opTimeout   = 20 * time.Second
	waitTimeout = 60 * time.Second
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// env starts the emulator with topology (or uses the real namespace) and
// returns a client; with a real namespace it first empties every entity
// named in the topology.
func env(t *testing.T, topology sbemu.Topology) (*sbemu.Emulator, *azservicebus.Client) {
	t.Helper()
	emu := sbemu.Start(t, topology)
	client := emu.NewClient(t)
	if emu.Real {
		purge(t, client, topology)
	}
	return emu, client
}

func purge(t *testing.T, client *azservicebus.Client, topology sbemu.Topology) {
	t.Helper()
	drain := func(open func(opts *azservicebus.ReceiverOptions) (*azservicebus.Receiver, error)) {
		for _, sub := range []azservicebus.SubQueue{0, azservicebus.SubQueueDeadLetter} {
			r, err := open(&azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, SubQueue: sub})
			if err != nil {
				t.Fatalf("purge: %v", redact.String(err.Error()))
			}
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				msgs, err := r.ReceiveMessages(ctx, 100, nil)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("purge: %v", err)
				}
				if len(msgs) == 0 {
					break
				}
			}
			_ = r.Close(context.Background())
		}
	}
	for _, q := range topology.Queues {
		if q.RequiresSession {
			continue // session queues are emptied by the tests that use them
		}
		drain(func(o *azservicebus.ReceiverOptions) (*azservicebus.Receiver, error) {
			return client.NewReceiverForQueue(q.Name, o)
		})
	}
	for _, tp := range topology.Topics {
		for _, s := range tp.Subscriptions {
			if s.RequiresSession {
				continue
			}
			drain(func(o *azservicebus.ReceiverOptions) (*azservicebus.Receiver, error) {
				return client.NewReceiverForSubscription(tp.Name, s.Name, o)
			})
		}
	}
}

func send(t *testing.T, client *azservicebus.Client, entity string, msgs ...*azservicebus.Message) {
	t.Helper()
	sender, err := client.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("NewSender(%s): %v", entity, err)
	}
	defer sender.Close(context.Background())
	for _, m := range msgs {
		if err := sender.SendMessage(ctxT(t), m, nil); err != nil {
			t.Fatalf("SendMessage(%s): %v", entity, err)
		}
	}
}

func msg(body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body)}
}

func queueReceiver(t *testing.T, client *azservicebus.Client, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := client.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatalf("NewReceiverForQueue(%s): %v", queue, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// receiveN receives until it has n messages or opTimeout passes.
func receiveN(t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx := ctxT(t)
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("ReceiveMessages: got %d of %d: %v", len(out), n, err)
		}
		out = append(out, msgs...)
	}
	return out
}

// receiveNone asserts that nothing arrives within wait.
func receiveNone(t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReceiveMessages: %v", err)
	}
	if len(msgs) > 0 {
		t.Fatalf("expected no message, got %d (first body %q)", len(msgs), msgs[0].Body)
	}
}

func bodies(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

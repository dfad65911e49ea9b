package rabbit_test

import (
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// countWrites is a connection counting its writes.
type countWrites struct {
	net.Conn
	n *atomic.Int64
}

func (c countWrites) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// dialWrapped connects as dial does, each socket of the connection
// wrapped by wrap, and closes the connection when t ends.
func dialWrapped(t *testing.T, wrap func(net.Conn) net.Conn) *rabbit.Conn {
	t.Helper()
	plain := dial(t) // to skip or fail as every test does when the server is down
	_ = plain.Close()
	dialer := amqp.DefaultDial(10 * time.Second)
	cfg := &amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US", Dial: func(network, addr string) (net.Conn, error) {
		c, err := dialer(network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}}
	c, err := rabbit.Dial(ctxT(t), serverURL(), &rabbit.ConnOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestPublishGathersWrites: a batch of 200 messages reaches the server in
// a few writes, not one per message (amqp091-go flushes after each
// publish), and every message arrives, in order, with its headers.
func TestPublishGathersWrites(t *testing.T) {
	ctx := ctxT(t)
	var writes atomic.Int64
	c := dialWrapped(t, func(c net.Conn) net.Conn { return countWrites{Conn: c, n: &writes} })
	name := uniqueName("cork")
	top, _ := declare(t, c, rabbit.Topology{Exchange: name, Queue: name})
	topic, err := rabbit.OpenTopic(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	// The channel is opened by the first publish: open it before counting.
	if err := topic.Publish(ctx, &broker.Message{ID: "first", Body: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var msgs []*broker.Message
	want := []string{"first"}
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		want = append(want, id)
		msgs = append(msgs, &broker.Message{ID: id, Key: "k", Headers: broker.Headers{{"h", id}}, Body: []byte(id)})
	}
	before := writes.Load()
	if err := topic.Publish(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	// 200 messages of about 100 bytes: one write per batch the broker
	// package hands the driver; a heartbeat may add one.
	if w := writes.Load() - before; w > 10 {
		t.Errorf("%d messages went out in %d writes, want at most 10", n, w)
	}
	sub, err := rabbit.OpenSubscription(ctx, c, top, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for len(got) < len(want) {
		ds, err := sub.Receive(ctx, len(want)-len(got))
		if err != nil {
			t.Fatalf("receive: %v (got %d so far)", err, len(got))
		}
		for _, d := range ds {
			got = append(got, d.Message.ID)
			if d.Message.ID != "first" && d.Message.Headers.Get("h") != d.Message.ID {
				t.Errorf("%s: header h = %q", d.Message.ID, d.Message.Headers.Get("h"))
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}

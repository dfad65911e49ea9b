package servicebus_test

import (
	"context"
	"fmt"
	"strconv"
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
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// Order at volume: 16 sessions × 12 messages, 4 consumers holding sessions
// concurrently; every session's messages are handled in publish order.
func TestSessionOrderAtVolume(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{Sessions: true, Lock: 5 * time.Second})
	topic := e.openTopic(t, q)
	const sessions, per = 16, 12
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 0; i < per; i++ {
		var round []*broker.Message
		for s := 0; s < sessions; s++ {
			round = append(round, &broker.Message{Key: fmt.Sprintf("s%d", s), Body: []byte(strconv.Itoa(i))})
		}
		if err := topic.Publish(ctx, round...); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	last := map[string]int{}
	handled, outOfOrder := 0, 0
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		sub, err := servicebus.OpenSubscription(ctx, e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin, MaxSessions: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sub.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
				n, _ := strconv.Atoi(string(d.Message.Body))
				mu.Lock()
				defer mu.Unlock()
				prev, ok := last[d.Message.Key]
				if (!ok && n != 0) || (ok && n != prev+1) {
					outOfOrder++
					t.Errorf("session %s: %d after %d", d.Message.Key, n, prev)
				}
				last[d.Message.Key] = n
				if handled++; handled == sessions*per {
					stop()
				}
				return nil
			}, &broker.RunOptions{Concurrency: 4, PerKey: true})
		}()
	}
	wg.Wait()
	if handled != sessions*per || outOfOrder != 0 {
		t.Fatalf("handled %d of %d, %d out of order", handled, sessions*per, outOfOrder)
	}
}

// A consumer that goes silent while holding a session (its connection
// black-holed, as a killed process's would be): once the session lock
// expires another consumer takes the session, gets the unsettled message
// first, counted as a second attempt, and the rest in order.
func TestSessionTakenOverAfterConsumerDies(t *testing.T) {
	e := newEnv(t)
	if e.emu.Real {
		t.Skip("needs the emulator's port behind a proxy")
	}
	q := e.createQueue(t, sbemu.Entity{Sessions: true, Lock: 2 * time.Second})
	topic := e.openTopic(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := topic.Publish(ctx, &broker.Message{Key: "S", Body: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "sb", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", e.emu.Port))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	cs := strings.Replace(e.emu.ConnectionString, fmt.Sprintf("127.0.0.1:%d", e.emu.Port), p.Listen, 1)
	clientA, err := azservicebus.NewClientFromConnectionString(cs, e.emu.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, err := servicebus.OpenSubscription(ctx, clientA, q, &servicebus.SubscriptionOptions{Admin: e.admin, MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := a.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Message.Body) != "0" {
		t.Fatalf("consumer A: %v %v", ds, err)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"hole_%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := servicebus.OpenSubscription(ctx, e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin, MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []string
	for len(got) < 3 {
		ds, err := b.Receive(ctx, 1)
		if err != nil {
			t.Fatalf("consumer B after %v: %v", got, err)
		}
		d := ds[0]
		if len(got) == 0 && d.Attempt != 2 {
			t.Fatalf("the dead consumer's message came back as attempt %d, want 2", d.Attempt)
		}
		got = append(got, string(d.Message.Body))
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "0,1,2" {
		t.Fatalf("consumer B got %v, want 0,1,2", got)
	}
	p.Stop() // the dead consumer's connection goes away
	_ = a.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	_ = clientA.Close(cctx)
}

// A consumer that may hold one session at a time releases a session with
// no message for SessionIdle, so that the next session gets its turn (and
// the released one can be taken again).
func TestSessionReleasedWhenIdle(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue(t, sbemu.Entity{Sessions: true, Lock: 30 * time.Second})
	topic := e.openTopic(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publish := func(key string) {
		if err := topic.Publish(ctx, &broker.Message{Key: key, Body: []byte(key)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("S1")
	publish("S2")
	sub, err := servicebus.OpenSubscription(ctx, e.client, q, &servicebus.SubscriptionOptions{Admin: e.admin, MaxSessions: 1, SessionIdle: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	receive := func() {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatalf("after %v: %v (a held session with no message was not released)", got, err)
		}
		got = append(got, ds[0].Message.Key)
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	receive()
	receive()
	if got[0] == got[1] {
		t.Fatalf("got %v, want both sessions", got)
	}
	publish(got[0])
	receive()
	if got[2] != got[0] {
		t.Fatalf("got %v", got)
	}
}

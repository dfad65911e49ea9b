package memory_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/memory"
)

func TestDedupWindowBoundary(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: time.Minute})
	s := f.sub()
	f.publish(msg("a", "g"))
	f.clock.Advance(time.Minute - 1)
	f.publish(msg("a", "other-group")) // same ID, another group: still a duplicate
	f.clock.Advance(1)
	f.publish(msg("a", "g")) // the window counts from the first publish: accepted
	d := pollOne(t, s, "a")
	if err := d.Ack(bg); err != nil {
		t.Fatal(err)
	}
	d = pollOne(t, s, "a")
	if !d.PublishTime.Equal(t0.Add(time.Minute)) {
		t.Fatalf("second copy published at %v", d.PublishTime)
	}
	if caps := f.topic.Capabilities(); caps.DedupWindow != time.Minute || caps.DedupScope != capability.DedupQueue {
		t.Fatalf("capabilities %v", caps)
	}
}

func TestCopying(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	s := f.sub()
	m := &broker.Message{ID: "a", Headers: broker.Headers{{"h", "1"}}, Body: []byte("abc")}
	f.publish(m)
	m.Headers.Set("h", "changed")
	m.Body[0] = 'X'
	d := pollOne(t, s, "a")
	if d.Message.Headers.Get("h") != "1" || string(d.Message.Body) != "abc" {
		t.Fatalf("the driver kept the caller's message: %+v", d.Message)
	}
	d.Message.Headers.Set("h", "mutated")
	d.Message.Body[0] = 'Y'
	if err := d.Nack(bg, 0); err != nil {
		t.Fatal(err)
	}
	d = pollOne(t, s, "a")
	if d.Message.Headers.Get("h") != "1" || string(d.Message.Body) != "abc" {
		t.Fatalf("a receiver changed the stored message: %+v", d.Message)
	}
}

func TestFanOut(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	f.publish(msg("before", ""))
	if err := f.b.CreateSubscription("t", "s2"); err != nil {
		t.Fatal(err)
	}
	f.publish(msg("after", ""))
	s2, _ := f.b.OpenSubscription("t", "s2", nil)
	defer s2.Close()
	pollOne(t, s2, "after")
	if got := ids(poll(t, f.sub(), 10)); got != "[before#1 after#1]" {
		t.Fatalf("first subscription got %s", got)
	}
}

func TestCloseReturnsInFlight(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	a, b := f.sub(), f.sub()
	f.publish(msg("a", ""))
	d := pollOne(t, a, "a")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(bg); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("ack after close: %v, want ErrClosed", err)
	}
	if d := pollOne(t, b, "a"); d.Attempt != 2 {
		t.Fatalf("attempt %d", d.Attempt)
	}
}

// TestReceiveWakes checks that a blocked receiver wakes on a publish and at
// a lock expiry, with no polling.
func TestReceiveWakes(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{LockTimeout: time.Minute})
	s := f.sub()
	got := make(chan []*broker.Delivery)
	receive := func() {
		ds, err := s.Receive(bg, 10)
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}
	go receive()
	f.publish(msg("a", ""))
	if ds := <-got; ids(ds) != "[a#1]" {
		t.Fatalf("got %s", ids(ds))
	}
	go receive()
	f.clock.WaitForWaiters(1, nil) // the receiver waits for the lock to expire
	f.clock.Advance(time.Minute)
	if ds := <-got; ids(ds) != "[a#2]" {
		t.Fatalf("got %s", ids(ds))
	}
	if n := f.clock.Waiters(); n != 0 {
		t.Fatalf("%d clock waiters left behind by a receiver that returned", n)
	}
}

func TestReceiveReturnsOnCloseAndCancel(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	s := f.sub()
	errc := make(chan error)
	go func() {
		_, err := s.Receive(bg, 1)
		errc <- err
	}()
	s.Close()
	if err := <-errc; !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("receive during close: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	go func() {
		_, err := f.sub().Receive(ctx, 1)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("receive with a canceled context: %v", err)
	}
	if err := f.b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.topic.Publish(bg, msg("x", "")); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("publish after broker close: %v", err)
	}
}

func TestMissing(t *testing.T) {
	b := memory.New(nil)
	top, err := b.OpenTopic("nope", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.Publish(bg, msg("a", "")); !errors.Is(err, broker.ErrNotFound) || !errors.Is(err, broker.ErrNotSent) {
		t.Fatalf("publish to a missing topic: %v", err)
	}
	for _, open := range []func(string, string, *memory.SubscriptionOptions) (*broker.Subscription, error){b.OpenSubscription, b.OpenDeadLetters} {
		s, err := open("nope", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Receive(bg, 1); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("receive from a missing subscription: %v", err)
		}
		s.Close()
	}
	if err := b.CreateSubscription("nope", "s"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("subscription of a missing topic: %v", err)
	}
	if err := b.CreateTopic("t", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("t", nil); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("topic created twice: %v", err)
	}
}

func TestValidation(t *testing.T) {
	b := memory.New(nil)
	if err := b.CreateTopic("huge", &memory.TopicConfig{Profile: memory.Partitioned, Partitions: memory.MaxPartitions + 1}); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("a topic of %d partitions: %v, want ErrInvalid", memory.MaxPartitions+1, err)
	}
	if err := b.CreateTopic("largest", &memory.TopicConfig{Profile: memory.Partitioned, Partitions: memory.MaxPartitions}); err != nil {
		t.Fatalf("a topic of MaxPartitions partitions: %v", err)
	}
	f := newFixture(t, memory.TopicConfig{Profile: memory.ServiceBus, MaxMessageSize: 10})
	if err := f.topic.Publish(bg, msg("a", "")); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("no session: %v", err)
	}
	if err := f.topic.Publish(bg, &broker.Message{ID: "a", Key: "k", Body: make([]byte, 9)}); !errors.Is(err, broker.ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestURLOpener(t *testing.T) {
	b := memory.New(nil)
	mux := new(broker.URLMux)
	o := &memory.URLOpener{Broker: b}
	mux.RegisterTopic("mem", o)
	mux.RegisterSubscription("mem", o)

	top, err := mux.OpenTopic(bg, "mem://orders?profile=sqsfifo&lock=2s&limit=3&dedup=1m&maxsize=1024")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if caps := top.Capabilities(); caps.DedupWindow != time.Minute || caps.MaxMessageSize != 1024 || caps.MaxBatchSize != 10 || !caps.KeyRequired {
		t.Fatalf("topic capabilities %v", caps)
	}
	sub, err := mux.OpenSubscription(bg, "mem://orders/billing")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if caps := sub.Capabilities(); caps.Ordering != capability.OrderMessageGroup || caps.LockTimeout != 2*time.Second || caps.DeliveryLimit != 3 {
		t.Fatalf("subscription capabilities %v", caps)
	}
	if err := top.Publish(bg, msg("a", "g")); err != nil {
		t.Fatal(err)
	}
	pollOne(t, sub, "a")

	for _, bad := range []string{
		"mem://orders?profile=queue",                       // exists with another profile
		"mem://x?colour=hunter2",                           // unknown parameter
		"mem://user:hunter2@x",                             // userinfo: the scheme takes none
		"mem://user@x",                                     // userinfo: the scheme takes none
		"mem://x?lock=soon",                                // not a duration
		"mem://x?limit=hunter2",                            // not an integer
		"mem://x?maxsize=1.5",                              // not an integer
		"mem://x?retention=hunter2",                        // not a duration
		"mem://x?profile=partitioned&partitions=100000000", // more than MaxPartitions
		"mem://x?profile=partitioned&partitions=-1",        // not positive
		"mem://x?profile=rabbit",                           // unknown profile
		"mem://x/y/z",                                      // a topic URL names one topic
	} {
		_, err := mux.OpenTopic(bg, bad)
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		} else if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "100000000") || strings.Contains(err.Error(), "rabbit") {
			t.Errorf("%s: the error echoes the value: %v", bad, err)
		}
	}
	if _, err := mux.OpenSubscription(bg, "mem://orders"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("subscription URL without a subscription: %v", err)
	}

	// The default mux has the scheme, on Default().
	u, _ := url.Parse("mem://memory-test-default?profile=partitioned&partitions=2")
	dt, err := broker.OpenTopic(bg, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer dt.Close()
	var got *memory.Broker
	if !dt.As(&got) || got != memory.Default() {
		t.Fatalf("As(**Broker) on a URL-opened topic: %v", got)
	}
	if cfg, ok := memory.Default().TopicConfig("memory-test-default"); !ok || cfg.Partitions != 2 || cfg.Profile != memory.Partitioned {
		t.Fatalf("default broker topic config %v %t", cfg, ok)
	}
}

func TestCapabilitiesByProfile(t *testing.T) {
	for _, tc := range []struct {
		p        memory.Profile
		ordering capability.OrderingScope
		hol, key bool
		dedup    time.Duration
		lock     time.Duration
		nack     bool
	}{
		{memory.Queue, capability.OrderNone, false, false, 0, 30 * time.Second, true},
		{memory.Partitioned, capability.OrderPartition, false, false, 0, 0, true},
		{memory.SQSFIFO, capability.OrderMessageGroup, true, true, 5 * time.Minute, 30 * time.Second, true},
		{memory.ServiceBus, capability.OrderSession, true, true, 10 * time.Minute, 0, false},
	} {
		c := both{memory.TopicConfig{Profile: tc.p}.TopicCapabilities(), memory.TopicConfig{Profile: tc.p}.SubscriptionCapabilities()}
		if c.Ordering != tc.ordering || c.HeadOfLine != tc.hol || c.KeyRequired != tc.key || c.DedupWindow != tc.dedup ||
			c.LockTimeout != tc.lock || c.DeliveryLimit != 10 || !c.DeadLetter || c.NackDelay != tc.nack || c.DeliveryCount != (tc.p != memory.Partitioned) ||
			c.RedeliveryHorizon != memory.DefaultMessageRetention {
			t.Errorf("%s: %v", tc.p, c)
		}
	}
	if c := (memory.TopicConfig{DeliveryLimit: -1}).SubscriptionCapabilities(); c.DeliveryLimit != 0 || c.DeliveryLimitMode != capability.LimitNone {
		t.Errorf("no limit: %v", c)
	}
	if c := (memory.TopicConfig{NoNackDelay: true}).SubscriptionCapabilities(); c.NackDelay {
		t.Errorf("NoNackDelay: %v", c)
	}
}

// TestRunCompetingConsumers drives the portable handler loop on the real
// clock: every message is handled, per-group order holds across consumers.
func TestRunCompetingConsumers(t *testing.T) {
	b := memory.New(nil)
	if err := b.CreateTopic("t", &memory.TopicConfig{Profile: memory.SQSFIFO}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("t", "s"); err != nil {
		t.Fatal(err)
	}
	top, _ := b.OpenTopic("t", nil)
	defer top.Close()
	const groups, perGroup = 8, 50
	type seen struct{ group, seq int }
	handled := make(chan seen, groups*perGroup)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 3)
	for range 3 {
		s, _ := b.OpenSubscription("t", "s", nil)
		defer s.Close()
		go func() {
			done <- s.Run(ctx, func(_ context.Context, d *broker.Delivery) error {
				var g, n int
				fmt.Sscanf(d.Message.ID, "g%d-%d", &g, &n)
				handled <- seen{g, n}
				return nil
			}, &broker.RunOptions{Concurrency: 4})
		}()
	}
	for n := range perGroup {
		for g := range groups {
			if err := top.Publish(bg, &broker.Message{ID: fmt.Sprintf("g%d-%d", g, n), Key: fmt.Sprint(g)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := make([]int, groups)
	for range groups * perGroup {
		h := <-handled
		if h.seq != next[h.group] {
			t.Fatalf("group %d: handled %d, want %d", h.group, h.seq, next[h.group])
		}
		next[h.group]++
	}
	cancel()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestDedupScope checks that a window scoped to the message group drops a
// repeated ID only inside its group, that the scope is declared, and that
// an unknown scope is refused.
func TestDedupScope(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: time.Minute, DedupScope: capability.DedupMessageGroup})
	s := f.sub()
	f.publish(&broker.Message{ID: "x", Key: "a"}, &broker.Message{ID: "x", Key: "b"}, &broker.Message{ID: "x", Key: "a"})
	poll, cancel := context.WithCancel(bg)
	cancel()
	var keys []string
	for {
		ds, _ := s.Receive(poll, 10)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			keys = append(keys, d.Message.Key)
			if err := d.Ack(bg); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("delivered keys %v, want [a b]", keys)
	}
	if c := f.topic.Capabilities(); c.DedupScope != capability.DedupMessageGroup {
		t.Fatalf("declared dedup scope %s", c.DedupScope)
	}
	if c := (memory.TopicConfig{Profile: memory.SQSFIFO}).TopicCapabilities(); c.DedupScope != capability.DedupQueue {
		t.Fatalf("default dedup scope %s, want queue", c.DedupScope)
	}
	err := memory.New(nil).CreateTopic("bad", &memory.TopicConfig{DedupWindow: time.Minute, DedupScope: 7})
	if !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("unknown dedup scope: %v, want ErrInvalid", err)
	}
}

// TestNoNackDelay: a subscription of the servicebus profile, or of a topic
// with nackdelay=false, refuses a Nack with a delay (as Service Bus does on
// sessions and topic subscriptions) and takes one without; a URL stating
// another nackdelay than an existing topic's is refused.
func TestNoNackDelay(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	mux := urlMux(b)
	for _, u := range []string{"mem://sessions?profile=servicebus", "mem://events?nackdelay=false"} {
		top, err := mux.OpenTopic(bg, u)
		if err != nil {
			t.Fatal(err)
		}
		defer top.Close()
		su, _ := url.Parse(u)
		su.Path = "/billing"
		sub, err := mux.OpenSubscription(bg, su.String())
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if sub.Capabilities().NackDelay {
			t.Fatalf("%s: capabilities %v", u, sub.Capabilities())
		}
		if err := top.Publish(bg, &broker.Message{ID: "m", Key: "k", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		for attempt := 1; attempt <= 2; attempt++ {
			ds, err := sub.Receive(bg, 1)
			if err != nil || len(ds) != 1 || ds[0].Attempt != attempt {
				t.Fatalf("%s: receive %d: %v %v", u, attempt, ds, err)
			}
			if attempt == 2 {
				break
			}
			if err := ds[0].Nack(bg, time.Second); !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("%s: Nack with a delay: %v, want ErrUnsupported", u, err)
			}
			if err := ds[0].Nack(bg, 0); err != nil {
				t.Fatalf("%s: Nack: %v", u, err)
			}
		}
	}
	if _, err := mux.OpenTopic(bg, "mem://events?nackdelay=true"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("another nackdelay than the topic's: %v, want ErrInvalid", err)
	}
}

// urlMux opens mem:// URLs on b.
func urlMux(b *memory.Broker) *broker.URLMux {
	mux := new(broker.URLMux)
	o := &memory.URLOpener{Broker: b}
	mux.RegisterTopic("mem", o)
	mux.RegisterSubscription("mem", o)
	return mux
}

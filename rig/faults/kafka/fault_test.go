package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/kafka"
	"github.com/wary-go/wary/rig/effecttest"
)

// runUntil runs sub's handler loop until cond holds (checked every 20ms) or
// 60s pass.
func runUntil(t *testing.T, sub *broker.Subscription, h broker.Handler, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var runErr error
	go func() {
		defer wg.Done()
		runErr = sub.Run(ctx, h, &broker.RunOptions{Concurrency: 4, Backoff: broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if !cond() {
		t.Fatalf("condition not met within 60s")
	}
}

func publishN(t *testing.T, top *broker.Topic, h *conformance.History, n int, prefix string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		m := &broker.Message{ID: fmt.Sprintf("%s-%d", prefix, i), Key: fmt.Sprint(i % 5), Body: []byte("x")}
		if err := top.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		h.Sent(m.ID)
		ids = append(ids, m.ID)
	}
	return ids
}

// TestFaultCommitFails: every offset commit fails while a consumer applies
// every message (through the inbox) and closes. Nothing was committed, so
// the next consumer gets every message again: nothing is lost, and the
// inbox keeps each effect to one.
func TestFaultCommitFails(t *testing.T) {
	e := newTestEnv(t, kfake.NumBrokers(1))
	topic := e.createTopic(t, 2, "fault-commit")
	group := uniqueName("g")
	top, err := kafka.OpenTopic(t.Context(), e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	h := conformance.NewHistory()
	ids := publishN(t, top, h, 40, "commit")
	fx := effecttest.New(t, h)

	fault := e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: group, Err: kerr.UnknownServerError, Count: -1})
	a, err := e.openSub(t, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, a, fx.Handler(t, "kafka-fault", a.Capabilities()), func() bool { return fx.Count(t) == len(ids) })
	if err := a.Close(); err == nil {
		t.Errorf("close committed nothing, but reported no error")
	}
	if fault.Hits() == 0 {
		t.Fatalf("the commit fault never fired")
	}
	t.Logf("commit fault fired %d times", fault.Hits())
	fault.Remove()

	b, err := e.openSub(t, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	runUntil(t, b, fx.Handler(t, "kafka-fault", b.Capabilities()), func() bool {
		r := h.Check()
		return len(r.DuplicateDeliveries) == len(ids)
	})
	fx.Applied(t)
	r := h.Check()
	t.Logf("history: %s", r)
	if !r.Valid() || r.Applied != len(ids) {
		t.Fatalf("history: %s", r)
	}
}

// TestFaultProduceTimesOutAfterAppend: produce requests are answered
// REQUEST_TIMED_OUT after the broker appended the records. The idempotent
// producer's own retry is deduplicated by the broker; where Publish gives
// up, it says ErrMaybeSent, and the caller's republish (with the same ID)
// is absorbed by the inbox: nothing lost, each effect once.
func TestFaultProduceTimesOutAfterAppend(t *testing.T) {
	e := newTestEnv(t, kfake.NumBrokers(1))
	topic := e.createTopic(t, 2, "fault-produce")
	top, err := kafka.OpenTopic(t.Context(), e.topicClient(t), topic, &kafka.TopicOptions{TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	h := conformance.NewHistory()

	// One timed-out answer: the producer retries inside its idempotent
	// session, and the broker drops the copy.
	once := e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.RequestTimedOut})
	ids := publishN(t, top, h, 10, "retry")
	if once.Hits() != 1 {
		t.Fatalf("the produce fault fired %d times, want 1", once.Hits())
	}

	// Every answer times out until the deadline: Publish gives up, and
	// must say the message may have been sent.
	always := e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.RequestTimedOut, Count: -1})
	m := &broker.Message{ID: "maybe-0", Body: []byte("x")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = top.Publish(ctx, m)
	cancel()
	if always.Hits() == 0 {
		t.Fatalf("the produce fault never fired")
	}
	always.Remove()
	switch {
	case err == nil:
		h.Sent(m.ID)
		t.Logf("publish succeeded despite the fault")
	case errors.Is(err, broker.ErrMaybeSent):
		h.MaybeSent(m.ID)
		t.Logf("publish: %v", err)
		// The outbox relay's answer: publish again with the same ID.
		if err := top.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		h.Sent(m.ID)
	default:
		t.Fatalf("publish failed with %v; a timed-out append must be ErrMaybeSent", err)
	}
	ids = append(ids, m.ID)

	fx := effecttest.New(t, h)
	sub, err := e.openSub(t, topic, uniqueName("g"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	runUntil(t, sub, fx.Handler(t, "kafka-fault", sub.Capabilities()), func() bool { return fx.Count(t) == len(ids) })
	fx.Applied(t)
	r := h.Check()
	t.Logf("history: %s", r)
	if !r.Valid() {
		t.Fatalf("history: %s", r)
	}
	for _, id := range r.DuplicateDeliveries {
		if id != m.ID {
			t.Errorf("%s was written twice: the idempotent producer's retry was not deduplicated", id)
		}
	}
}

package idemtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// Broker is a real driver for the end-to-end scenarios of RunBroker: one
// topic with one subscription, no broker-side dedup and no delivery limit,
// on a clock the test controls.
type Broker struct {
	// Topic publishes to the subscription.
	Topic *broker.Topic
	// Subscribe opens one more consumer on the subscription; the harness
	// closes it when t ends.
	Subscribe func(t testing.TB) *broker.Subscription
	// Advance moves the broker's clock forward: past the lock timeout,
	// unsettled deliveries become due again.
	Advance func(d time.Duration)
	// LockTimeout is the subscription's lock timeout.
	LockTimeout time.Duration
	// DeadLetters, if not nil, opens a consumer on the subscription's
	// dead-letter queue (the PoisonID scenario needs it).
	DeadLetters func(t testing.TB) *broker.Subscription
}

// RunBroker runs the end-to-end scenarios on a real driver: a consumer
// that commits and then crashes before its ack, and competing consumers
// under redelivery, duplicates and handler failures.
func RunBroker[Tx any](t *testing.T, f Factory[Tx], b func(t testing.TB) Broker) {
	t.Run("CrashBeforeAck", func(t *testing.T) { testCrash(t, f, b(t)) })
	t.Run("RunLoop", func(t *testing.T) { testRunLoop(t, f, b(t)) })
	t.Run("RunGrouped", func(t *testing.T) { testRunGrouped(t, f, b(t)) })
	t.Run("RunGroupedVersions", func(t *testing.T) { RunGroupedVersions(t, f, b(t)) })
	t.Run("PoisonID", func(t *testing.T) { testBrokerPoison(t, f, b(t)) })
}

// testRunGrouped runs Subscription.Run with Inbox.Wrap over an inbox whose
// concurrent deliveries share transactions (Options.Batch): every message
// published twice has one effect, and every delivery is settled by the
// inbox (the loop has nothing left to ack or nack).
func testRunGrouped[Tx any](t *testing.T, f Factory[Tx], b Broker) {
	e := Setup(t, f, "")
	const n = 60
	sub := b.Subscribe(t)
	in, err := idem.NewInbox(e.Store, "rungrouped", sub.Capabilities(), Quiet(&idem.Options{Batch: 16}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("m%03d", i))
		m := Msg(ids[i], "x", "", 0)
		if err := b.Topic.Publish(e.Ctx, m, Msg(ids[i], "x", "", 0)); err != nil {
			t.Fatal(err)
		}
	}
	settled := make(chan int, 2*n)
	h := in.Wrap(e.Effect())
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
			err := h(ctx, d)
			if !d.Settled() {
				t.Errorf("%s: left unsettled by the inbox", d.Message.ID)
			}
			settled <- 1
			return err
		}, &broker.RunOptions{Concurrency: 16})
	}()
	for got := 0; got < 2*n; {
		got += <-settled
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	e.CheckEffects(ids...)
	s := in.Stats()
	if s.Processed != n || s.Duplicates != n {
		t.Errorf("stats %+v: want %d processed and %d duplicates", s, n, n)
	}
	t.Logf("%d deliveries in %d transactions", 2*n, s.Commits)
}

// Sizes of RunGroupedVersions: competing consumers, each with shared
// transactions of up to GroupedBatch deliveries, on GroupedAggregates
// aggregates of GroupedVersions versions each.
const (
	GroupedConsumers  = 4
	GroupedBatch      = 8
	GroupedAggregates = 6
	GroupedVersions   = 40
)

// RunGroupedVersions: competing consumers, each an inbox of its own
// whose concurrent deliveries share transactions (Options.Batch), with
// version checks holding gaps, apply the events of a few aggregates they
// all share, published in a shuffled order, a quarter of them twice. Each
// event is applied once and in version order, nothing is left held, and no
// delivery is nacked: the transactions of different consumers, each
// holding events of several aggregates, take the aggregates' locks in one
// order, so that none of them is a deadlock's victim (on PostgreSQL they
// were, before: SQLSTATE 40P01, a store error, the batch nacked). RunBroker
// runs it; a store's tests run it on other brokers with b's Topic and
// Subscribe (the subscription's queue must start empty).
func RunGroupedVersions[Tx any](t *testing.T, f Factory[Tx], b Broker) {
	e := Setup(t, f, "")
	var msgs []*broker.Message
	want := map[string]string{}
	for a := range GroupedAggregates {
		agg := fmt.Sprintf("g%d", a)
		var state []string
		for v := 1; v <= GroupedVersions; v++ {
			body := fmt.Sprintf("%s.%d", agg, v)
			m := Msg(fmt.Sprintf("%s-%d", agg, v), body, agg, int64(v))
			msgs = append(msgs, m)
			if v%4 == 0 { // a producer retry the broker does not dedup
				msgs = append(msgs, Msg(m.ID, body, agg, int64(v)))
			}
			state = append(state, body)
		}
		want[agg] = strings.Join(state, ",")
	}
	rng := rand.New(rand.NewPCG(7, uint64(len(msgs))))
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })

	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	settled := make(chan struct{}, len(msgs))
	var inboxes []*idem.Inbox[Tx]
	var wg sync.WaitGroup
	for range GroupedConsumers {
		sub := b.Subscribe(t)
		in, err := idem.NewInbox(e.Store, "rgversions", sub.Capabilities(),
			Quiet(&idem.Options{Batch: GroupedBatch, Versions: AggTable, Gaps: idem.GapsHold}))
		if err != nil {
			t.Fatal(err)
		}
		inboxes = append(inboxes, in)
		h := in.Wrap(e.ApplyAgg())
		wg.Go(func() {
			err := sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
				err := h(ctx, d)
				if err != nil {
					t.Errorf("%s: %v", d.Message.ID, err)
				}
				select {
				case settled <- struct{}{}:
				default: // more settlements than deliveries published: some were nacked
				}
				return err
			}, &broker.RunOptions{Concurrency: 2 * GroupedBatch})
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	for _, m := range msgs {
		if err := b.Topic.Publish(e.Ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Every delivery is settled once when none is nacked; a nacked one
	// counts too, so this ends either way.
	for range msgs {
		select {
		case <-settled:
		case <-e.Ctx.Done():
			t.Fatal("deliveries left unsettled")
		}
	}
	cancel()
	wg.Wait()

	var s idem.Stats
	for _, in := range inboxes {
		x := in.Stats()
		s.Processed += x.Processed
		s.Duplicates += x.Duplicates
		s.Failed += x.Failed
		s.Retried += x.Retried
		s.Parked += x.Parked
		s.StoreErrors += x.StoreErrors
		s.Conflicts += x.Conflicts
		s.Applied += x.Applied
		s.Early += x.Early
		s.EarlyApplied += x.EarlyApplied
		s.Commits += x.Commits
	}
	if s.StoreErrors != 0 || s.Failed != 0 || s.Retried != 0 || s.Parked != 0 {
		t.Errorf("%d store errors, %d failed, %d retried, %d parked; want none (a nack counts toward the delivery limit)",
			s.StoreErrors, s.Failed, s.Retried, s.Parked)
	}
	if s.Conflicts != 0 {
		t.Errorf("%d transactions were a deadlock's victim (tried again in the inbox); want none", s.Conflicts)
	}
	if s.Applied != GroupedAggregates*GroupedVersions {
		t.Errorf("applied %d events, want %d", s.Applied, GroupedAggregates*GroupedVersions)
	}
	for agg, w := range want {
		if got := e.String(`SELECT coalesce((SELECT state FROM aggs WHERE id = $1), '')`, agg); got != w {
			t.Errorf("%s: %q, want %q", agg, got, w)
		}
	}
	if n := e.earlyCount("rgversions"); n != 0 {
		t.Errorf("early events left: %d", n)
	}
	t.Logf("%d deliveries in %d transactions; %d held early, %d of them applied", len(msgs), s.Commits, s.Early, s.EarlyApplied)
}

// poll receives what is deliverable now.
func poll(sub *broker.Subscription, n int) ([]*broker.Delivery, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ds, err := sub.Receive(ctx, n)
	if errors.Is(err, context.Canceled) {
		return nil, nil
	}
	return ds, err
}

func testCrash[Tx any](t *testing.T, f Factory[Tx], b Broker) {
	e := Setup(t, f, "")
	sub1 := b.Subscribe(t)
	in, err := idem.NewInbox(e.Store, "crash", sub1.Capabilities(), Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("m%d", i))
		if err := b.Topic.Publish(e.Ctx, Msg(ids[i], "x", "", 0)); err != nil {
			t.Fatal(err)
		}
	}
	runs := map[string]int{}
	crashed := false
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		runs[d.Message.ID]++
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		if d.Message.ID == "m5" && !crashed {
			crashed = true
			// The process dies after the commit and before the ack:
			// its connection to the broker goes away.
			sub1.Close()
		}
		return nil
	}
	for done := false; !done; {
		ds, err := poll(sub1, 1)
		if err != nil {
			if !errors.Is(err, broker.ErrClosed) {
				t.Fatal(err)
			}
			break
		}
		for _, d := range ds {
			_, err := in.Handle(e.Ctx, d, h)
			if d.Message.ID == "m5" {
				if !errors.Is(err, idem.ErrAckAfterCommit) {
					t.Fatalf("m5: err %v, want ErrAckAfterCommit", err)
				}
				done = true
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	b.Advance(b.LockTimeout + time.Second)
	sub2 := b.Subscribe(t)
	for {
		ds, err := poll(sub2, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if _, err := in.Handle(e.Ctx, d, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	if runs["m5"] != 1 {
		t.Errorf("m5: handler ran %d times, want 1", runs["m5"])
	}
	s := in.Stats()
	if s.AckFailures != 1 || s.Duplicates != 1 || s.Processed != 10 {
		t.Errorf("stats %+v; want 10 processed, 1 ack failure, 1 duplicate (the redelivered m5)", s)
	}
	e.CheckEffects(ids...)
}

func testRunLoop[Tx any](t *testing.T, f Factory[Tx], b Broker) {
	e := Setup(t, f, "")
	const n = 200
	subs := []*broker.Subscription{b.Subscribe(t), b.Subscribe(t)}
	in, err := idem.NewInbox(e.Store, "run", subs[0].Capabilities(), Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		mu.Lock()
		attempts[d.Message.ID]++
		a := attempts[d.Message.ID]
		mu.Unlock()
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		if d.Message.Body[0] == 'f' && a == 1 {
			return errors.New("first attempt fails, after writing")
		}
		return nil
	}
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("m%03d", i))
		body := "ok"
		if i%5 == 0 {
			body = "fail once"
		}
		m := Msg(ids[i], body, "", 0)
		// Published twice: a producer retry the broker does not dedup.
		if err := b.Topic.Publish(e.Ctx, m, Msg(ids[i], body, "", 0)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(func() {
			if err := sub.Run(ctx, in.Wrap(h), &broker.RunOptions{Concurrency: 4}); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	// Time passes: nack delays run out, and slow deliveries' locks expire
	// while they are processed, so copies are handled concurrently.
	deadline := time.Now().Add(60 * time.Second)
	for e.Int(`SELECT count(*) FROM effects`) < n && time.Now().Before(deadline) {
		b.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	// Drain what the broker still holds: every copy is a duplicate.
	b.Advance(b.LockTimeout + time.Minute)
	for {
		ds, err := poll(subs[0], 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if _, err := in.Handle(e.Ctx, d, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.CheckEffects(ids...)
	s := in.Stats()
	t.Logf("stats: %+v", s)
	if s.Processed != n || s.Duplicates < n || s.Failed < n/5 {
		t.Errorf("stats %+v: want %d processed, at least %d duplicates and %d failures", s, n, n, n/5)
	}
}

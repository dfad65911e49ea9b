package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// InGroup handles ds through in (built with Options.Batch of at least
// len(ds)) so that they share one transaction, in the order of ds, and
// returns each one's result and error. It holds the inbox's transaction
// busy with a gate delivery of its own (a detached delivery, claimed under
// a fresh ID, whose handler applies nothing) while it starts one Handle
// call per delivery, each only once the one before waits in the group
// (Stats.Waiting), then lets the gate commit: the calls waiting behind it
// form the next transaction.
func InGroup[Tx any](t testing.TB, in *idem.Inbox[Tx], ds []*broker.Delivery, h idem.Handler[Tx]) ([]idem.Result, []error) {
	t.Helper()
	ctx := t.Context()
	gateID := "gate-" + broker.NewID()
	entered, release := make(chan struct{}), make(chan struct{})
	gated := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if d.Message.ID == gateID {
			close(entered)
			<-release
			return nil
		}
		return h(ctx, tx, d)
	}
	// Under version checks the gate is version 1 of an aggregate of its own,
	// which the check lets through to the handler.
	gate := broker.NewDetachedDelivery(Msg(gateID, "", gateID, 1), 1)
	gateDone := make(chan error, 1)
	go func() {
		_, err := in.Handle(ctx, gate, gated)
		gateDone <- err
	}()
	select {
	case <-entered:
	case err := <-gateDone:
		t.Fatalf("gate: returned before its handler ran: %v", err)
	}
	res, errs := make([]idem.Result, len(ds)), make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { res[i], errs[i] = in.Handle(ctx, d, gated) })
		waitUntil(t, func() bool { return in.Stats().Waiting == int64(i+1) }, "call %d waiting in the group", i)
	}
	close(release)
	if err := <-gateDone; err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()
	return res, errs
}

// waitUntil polls cond (there is no event to wait on: the calls block
// inside the inbox) until it holds, failing t after 10 seconds.
func waitUntil(t testing.TB, cond func() bool, what string, args ...any) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out: "+what, args...)
		}
	}
}

func receiveN(t testing.TB, sub *broker.Subscription, n int) []*broker.Delivery {
	t.Helper()
	ds, err := sub.Receive(t.Context(), n)
	if err != nil || len(ds) != n {
		t.Fatalf("receive: %d of %d, %v", len(ds), n, err)
	}
	return ds
}

// testGroup: deliveries of concurrent calls share one transaction
// (Options.Batch) and keep Handle's results: duplicates (claimed before,
// or earlier in the same transaction) are acked without running, a stale
// one's claim commits.
func testGroup[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("group", &idem.Options{Batch: 10})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("m0", "x", "", 0))
	if _, err := in.Handle(e.Ctx, receive(t, q, sub), e.Effect()); err != nil {
		t.Fatal(err)
	}
	// m0 was processed before, m1 comes twice, s is stale by the state.
	for _, id := range []string{"m1", "m2", "m0", "m1", "s", "m3"} {
		q.Push(Msg(id, "x", "", 0))
	}
	var mu sync.Mutex
	var ran []string
	txs := map[any]bool{}
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		mu.Lock()
		ran = append(ran, d.Message.ID)
		txs[any(tx)] = true
		mu.Unlock()
		if d.Message.ID == "s" {
			return idem.SkipStale
		}
		return e.Effect()(ctx, tx, d)
	}
	before := in.Stats().Commits
	res, errs := InGroup(t, in, receiveN(t, sub, 6), h)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("group: %v", err)
	}
	want := []idem.Result{idem.ResultApplied, idem.ResultApplied, idem.ResultDuplicate, idem.ResultDuplicate, idem.ResultStale, idem.ResultApplied}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
	if fmt.Sprint(ran) != "[m1 m2 s m3]" || len(txs) != 1 {
		t.Errorf("handler ran for %v in %d transactions, want [m1 m2 s m3] in one", ran, len(txs))
	}
	if n := in.Stats().Commits - before; n != 2 { // the gate's and the group's
		t.Errorf("%d commits, want 2 (the gate, then the group)", n)
	}
	for id, n := range map[string]int{"m0": 2, "m1": 2, "m2": 1, "s": 1, "m3": 1} {
		if q.Acks(id) != n {
			t.Errorf("acks %s: %d, want %d", id, q.Acks(id), n)
		}
	}
	e.CheckEffects("m0", "m1", "m2", "m3")
	// The stale one's claim committed: its copy is a duplicate.
	q.Push(Msg("s", "x", "", 0))
	if res, err := in.Handle(e.Ctx, receive(t, q, sub), e.Effect()); err != nil || res != idem.ResultDuplicate {
		t.Errorf("stale copy: %v, %v; want duplicate", res, err)
	}
	if s := in.Stats(); s.Processed != 6 || s.Stale != 1 || s.Duplicates != 3 || s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
}

// testGroupErrors: a handler's error rolls back every write and claim of
// the transaction; the failing delivery is settled alone (nacked, or
// dead-lettered when permanent, a panic as an error) and the rest is tried
// again without it; an ack that fails after the commit is reported by
// every delivery of the transaction, and their copies are duplicates.
func testGroupErrors[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("grouperr", &idem.Options{Batch: 10})
	boom := errors.New("boom")

	// Failing for every message: nothing is applied, claimed or acked.
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("a1", "x", "", 0), Msg("a2", "x", "", 0), Msg("a3", "x", "", 0))
	fails := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		return boom
	}
	res, errs := InGroup(t, in, receiveN(t, sub, 3), fails)
	if err := errors.Join(errs...); !errors.Is(err, boom) || fmt.Sprint(res) != "[failed failed failed]" {
		t.Errorf("all failing: %v, %v", res, err)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if q.Acks(id) != 0 || q.Nacks(id) != 1 {
			t.Errorf("%s: acks %d nacks %d, want 0 and 1", id, q.Acks(id), q.Nacks(id))
		}
	}
	e.CheckEffects()
	q.Expire()
	// Nothing was claimed: the copies apply.
	if res, errs := InGroup(t, in, receiveN(t, sub, 3), e.Effect()); errors.Join(errs...) != nil || fmt.Sprint(res) != "[applied applied applied]" {
		t.Fatalf("after rollback: %v, %v", res, errs)
	}
	e.CheckEffects("a1", "a2", "a3")

	// One failing, one permanent, one panicking: each settled alone, the
	// rest applied.
	q = NewQueue(Caps)
	sub = q.Subscription(nil)
	q.Push(Msg("b1", "x", "", 0), Msg("b2", "bad", "", 0), Msg("b3", "perm", "", 0), Msg("b4", "panic", "", 0), Msg("b5", "x", "", 0))
	mixed := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		switch string(d.Message.Body) {
		case "bad":
			return boom
		case "perm":
			return broker.Permanent(boom)
		case "panic":
			panic("handler panic")
		}
		return nil
	}
	res, errs = InGroup(t, in, receiveN(t, sub, 5), mixed)
	if fmt.Sprint(res) != "[applied failed dead-lettered failed applied]" {
		t.Errorf("mixed: %v", res)
	}
	if errs[0] != nil || !errors.Is(errs[1], boom) || !errors.Is(errs[2], boom) || errs[3] == nil || errs[4] != nil {
		t.Errorf("mixed: errors %v", errs)
	}
	if q.Nacks("b2") != 1 || q.DeadLetters("b3") != 1 || q.Nacks("b4") != 1 || q.Acks("b1") != 1 || q.Acks("b5") != 1 {
		t.Errorf("mixed: b2 nacks %d, b3 dead %d, b4 nacks %d, b1 acks %d, b5 acks %d", q.Nacks("b2"), q.DeadLetters("b3"), q.Nacks("b4"), q.Acks("b1"), q.Acks("b5"))
	}
	e.CheckEffects("a1", "a2", "a3", "b1", "b5")

	// Committed, then the transaction's ack (one call) failed: every
	// delivery reports it, and the copies are duplicates.
	q = NewQueue(Caps)
	sub = q.Subscription(nil)
	q.Push(Msg("c1", "x", "", 0), Msg("c2", "x", "", 0))
	ds := receiveN(t, sub, 2)
	q.FailAcks(1)
	res, errs = InGroup(t, in, ds, e.Effect())
	if fmt.Sprint(res) != "[applied applied]" || !errors.Is(errs[0], idem.ErrAckAfterCommit) || !errors.Is(errs[1], idem.ErrAckAfterCommit) {
		t.Errorf("ack after commit: %v, %v", res, errs)
	}
	q.Expire()
	if res, errs := InGroup(t, in, receiveN(t, sub, 2), e.Effect()); errors.Join(errs...) != nil || fmt.Sprint(res) != "[duplicate duplicate]" {
		t.Errorf("copies after the failed ack: %v, %v", res, errs)
	}
	e.CheckEffects("a1", "a2", "a3", "b1", "b5", "c1", "c2")
}

// testGroupVersioned: version checks in a shared transaction see the
// writes of the deliveries before them in it.
func testGroupVersioned[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("vgroup", &idem.Options{Batch: 10, Versions: AggTable, Gaps: idem.GapsRetry})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	var mu sync.Mutex
	var applied []string
	apply := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		mu.Lock()
		applied = append(applied, d.Message.ID)
		mu.Unlock()
		return e.ApplyAgg()(ctx, tx, d)
	}
	q.Push(Msg("a1", "a1", "a", 1))
	if res, err := in.Handle(e.Ctx, receive(t, q, sub), apply); err != nil || res != idem.ResultApplied {
		t.Fatalf("a1: %v, %v", res, err)
	}
	// a2 and a3 in order, a stale copy of version 2 under another ID, a
	// new aggregate b, and c at version 3 with no row (a gap).
	q.Push(Msg("a2", "a2", "a", 2), Msg("a3", "a3", "a", 3), Msg("a2-again", "a2x", "a", 2), Msg("b1", "b1", "b", 1), Msg("c3", "c3", "c", 3))
	applied = nil
	res, errs := InGroup(t, in, receiveN(t, sub, 5), apply)
	var pe *idem.ParkError
	if !errors.As(errs[4], &pe) || errors.Join(errs[:4]...) != nil {
		t.Errorf("errors %v, want the gap's *ParkError for c3 alone", errs)
	}
	want := []idem.Result{idem.ResultApplied, idem.ResultApplied, idem.ResultStale, idem.ResultApplied, idem.ResultGapRetried}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
	// The first attempt rolled back at c3; the second applied the rest.
	if fmt.Sprint(applied) != "[a2 a3 b1 a2 a3 b1]" {
		t.Errorf("handler ran for %v, want [a2 a3 b1] twice (rolled back at c3, then again without it)", applied)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'a'`); s != "a1,a2,a3" {
		t.Errorf("a: %q", s)
	}
	if n := e.Int(`SELECT version FROM aggs WHERE id = 'a'`); n != 3 {
		t.Errorf("a at version %d", n)
	}
	if q.Nacks("c3") != 1 || q.Acks("c3") != 0 || q.Acks("a2-again") != 1 {
		t.Errorf("c3 nacks %d acks %d; a2-again acks %d", q.Nacks("c3"), q.Acks("c3"), q.Acks("a2-again"))
	}
	if n := e.Int(`SELECT count(*) FROM aggs WHERE id = 'c'`); n != 0 {
		t.Errorf("c has a row")
	}
}

// testGroupConcurrent: inboxes of one consumer (processes) with shared
// transactions claim overlapping sets of IDs at once, in both orders:
// claims in ID order must not deadlock, and each effect is applied once.
func testGroupConcurrent[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	q := NewQueue(Caps)
	n := ConcurrentMessages / 2
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%05d", i)
	}
	// Copies in opposite orders, so that transactions overlap in both
	// directions.
	for c := range ConcurrentCopies {
		for i := range ids {
			if c%2 == 1 {
				i = n - 1 - i
			}
			q.Push(Msg(ids[i], "x", "", 0))
		}
	}
	var inboxes []*idem.Inbox[Tx]
	var wg sync.WaitGroup
	for range ConcurrentCopies {
		in := e.Inbox("gconc", &idem.Options{Batch: 10})
		inboxes = append(inboxes, in)
		for range 10 { // ten callers per inbox fill its transactions
			wg.Go(func() {
				err := q.Drain(e.Ctx, func(d *broker.Delivery) {
					if _, err := in.Handle(e.Ctx, d, e.Effect()); err != nil {
						t.Errorf("Handle: %v", err)
					}
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	// Store errors (say, a deadlock victim) nack; process what came back.
	sub := q.Subscription(nil)
	for q.Len() > 0 {
		if _, err := inboxes[0].Handle(e.Ctx, receive(t, q, sub), e.Effect()); err != nil {
			t.Errorf("Handle: %v", err)
		}
	}
	e.CheckEffects(ids...)
	var commits, handled int64
	for _, in := range inboxes {
		s := in.Stats()
		if s.StoreErrors != 0 {
			t.Errorf("store errors: %d (claims in ID order must not deadlock)", s.StoreErrors)
		}
		commits += s.Commits
		handled += s.Processed + s.Duplicates
	}
	t.Logf("%d deliveries in %d transactions", handled, commits)
}

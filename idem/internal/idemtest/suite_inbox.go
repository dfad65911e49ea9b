package idemtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
)

func testInbox[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("inbox", nil)
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("m1", "one", "", 0), Msg("m2", "two", "", 0), Msg("m1", "one again", "", 0))
	runs := 0
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error { runs++; return e.Effect()(ctx, tx, d) }
	for _, want := range []idem.Result{idem.ResultApplied, idem.ResultApplied, idem.ResultDuplicate} {
		r, err := in.Handle(e.Ctx, receive(t, q, sub), h)
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if r != want {
			t.Errorf("result %v, want %v", r, want)
		}
	}
	if runs != 2 {
		t.Errorf("handler ran %d times, want 2 (the duplicate must not run it)", runs)
	}
	if q.Acks("m1") != 2 || q.Acks("m2") != 1 {
		t.Errorf("acks m1=%d m2=%d, want 2 and 1", q.Acks("m1"), q.Acks("m2"))
	}
	e.CheckEffects("m1", "m2")
	if s := in.Stats(); s.Processed != 2 || s.Duplicates != 1 {
		t.Errorf("stats %+v", s)
	}
	// Another consumer has its own inbox: the same message runs once more.
	other := e.Inbox("other", nil)
	q.Push(Msg("m1", "x", "", 0))
	if _, err := other.Handle(e.Ctx, receive(t, q, sub), func(context.Context, Tx, *broker.Delivery) error { runs++; return nil }); err != nil || runs != 3 {
		t.Errorf("other consumer: err %v, runs %d", err, runs)
	}
	// A message without ID cannot be deduplicated: dead-lettered.
	q.Push(&broker.Message{Body: []byte("no id")})
	if _, err := in.Handle(e.Ctx, receive(t, q, sub), h); !errors.Is(err, idem.ErrNoID) || q.DeadLetters("") != 1 {
		t.Errorf("no ID: err %v, dead-lettered %d", err, q.DeadLetters(""))
	}
}

func testHandlerError[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("errs", nil)
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	boom := errors.New("boom")
	calls := 0
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		calls++
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		switch calls {
		case 1:
			return boom // after writing: the writes must roll back
		case 2:
			panic("handler panic")
		}
		return nil
	}
	q.Push(Msg("m1", "x", "", 0))
	for i := 1; i <= 3; i++ {
		_, err := in.Handle(e.Ctx, receive(t, q, sub), h)
		switch i {
		case 1:
			if !errors.Is(err, boom) {
				t.Errorf("attempt 1: err %v, want boom", err)
			}
		case 2:
			if err == nil {
				t.Errorf("attempt 2: panic not reported")
			}
		case 3:
			if err != nil {
				t.Errorf("attempt 3: %v", err)
			}
		}
		if i < 3 {
			if n := e.Int(`SELECT count(*) FROM effects`); n != 0 {
				t.Fatalf("attempt %d failed, yet %d effect rows are visible", i, n)
			}
			if q.Acks("m1") != 0 {
				t.Fatalf("failed attempt was acked")
			}
		}
	}
	if q.Nacks("m1") != 2 {
		t.Errorf("nacks %d, want 2", q.Nacks("m1"))
	}
	// Full jitter, the default policy of a delivery from Receive
	// (broker.Delivery.Retry): each delay is within [0, Ceiling(attempt)]
	// = [0, 100ms], [0, 200ms].
	if d := q.NackDelays(); len(d) != 2 || d[0] < 0 || d[0] > 100*time.Millisecond || d[1] < 0 || d[1] > 200*time.Millisecond {
		t.Errorf("nack delays %v, want within [0, 100ms] and [0, 200ms] from the backoff policy", d)
	}
	e.CheckEffects("m1")
	// A permanent error dead-letters, never acks.
	q.Push(Msg("m2", "x", "", 0))
	_, err := in.Handle(e.Ctx, receive(t, q, sub), func(context.Context, Tx, *broker.Delivery) error { return broker.Permanent(boom) })
	if !errors.Is(err, boom) || q.DeadLetters("m2") != 1 || q.Acks("m2") != 0 {
		t.Errorf("permanent: err %v, dead %d, acks %d", err, q.DeadLetters("m2"), q.Acks("m2"))
	}
	if s := in.Stats(); s.Failed != 3 || s.Processed != 1 {
		t.Errorf("stats %+v", s)
	}
	// A broker without nack delays: the inbox waits the backoff itself
	// (at most half the lock timeout: broker's TestRetryWithoutNackDelay),
	// then nacks without delay.
	caps := Caps
	caps.NackDelay, caps.LockTimeout = false, 100*time.Millisecond
	slow, err := idem.NewInbox(e.Store, "nodelay", caps, Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	q2 := NewQueue(caps)
	q2.Push(Msg("m3", "x", "", 0))
	start := time.Now()
	_, err = slow.Handle(e.Ctx, receive(t, q2, q2.Subscription(nil)), func(context.Context, Tx, *broker.Delivery) error { return boom })
	if took := time.Since(start); !errors.Is(err, boom) || took > 10*time.Second {
		t.Errorf("no nack delay: err %v after %s", err, took)
	}
	if d := q2.NackDelays(); len(d) != 1 || d[0] != 0 {
		t.Errorf("nack delays %v, want [0]", d)
	}
}

func testAckAfterCommit[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("ackfail", nil)
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("m1", "x", "", 0))
	q.FailAcks(1)
	_, err := in.Handle(e.Ctx, receive(t, q, sub), e.Effect())
	if !errors.Is(err, idem.ErrAckAfterCommit) {
		t.Fatalf("err %v, want ErrAckAfterCommit", err)
	}
	if in.Stats().AckFailures != 1 {
		t.Errorf("AckFailures %d, want 1", in.Stats().AckFailures)
	}
	q.Expire() // the lock expires: the broker delivers again
	ran := false
	if _, err := in.Handle(e.Ctx, receive(t, q, sub), func(context.Context, Tx, *broker.Delivery) error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if ran || q.Acks("m1") != 1 || in.Stats().Duplicates != 1 {
		t.Errorf("redelivery: ran %v, acks %d, stats %+v", ran, q.Acks("m1"), in.Stats())
	}
	e.CheckEffects("m1")
}

// ConcurrentMessages and ConcurrentCopies size the concurrency test.
var (
	ConcurrentMessages = 1000
	ConcurrentCopies   = 8
)

func testConcurrent[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("conc", nil)
	q := NewQueue(Caps)
	ids := make([]string, ConcurrentMessages)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%05d", i)
		for range ConcurrentCopies { // adjacent copies go to different workers at once
			q.Push(Msg(ids[i], "x", "", 0))
		}
	}
	var handled atomic.Int64
	var mu sync.Mutex
	results := map[string][]idem.Result{}
	var wg sync.WaitGroup
	for range ConcurrentCopies {
		wg.Go(func() {
			err := q.Drain(e.Ctx, func(d *broker.Delivery) {
				r, err := in.Handle(e.Ctx, d, e.Effect())
				if err != nil {
					t.Errorf("Handle %s: %v", d.Message.ID, err)
				}
				mu.Lock()
				results[d.Message.ID] = append(results[d.Message.ID], r)
				mu.Unlock()
				handled.Add(1)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if q.Len() != 0 {
		t.Errorf("%d copies left unsettled", q.Len())
	}
	e.CheckEffects(ids...)
	// Each message: exactly one copy applied, every other a duplicate.
	for _, id := range ids {
		applied, dups := 0, 0
		for _, r := range results[id] {
			switch r {
			case idem.ResultApplied:
				applied++
			case idem.ResultDuplicate:
				dups++
			}
		}
		if applied != 1 || dups != ConcurrentCopies-1 {
			t.Errorf("%s: results %v, want one applied and %d duplicates", id, results[id], ConcurrentCopies-1)
		}
	}
	s := in.Stats()
	if s.Processed != int64(len(ids)) || s.Duplicates != int64(len(ids)*(ConcurrentCopies-1)) {
		t.Errorf("stats %+v", s)
	}
}

func testRetention[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "ret_")
	e.skipTableExpiry()
	caps := Caps
	caps.RedeliveryHorizon = 24 * time.Hour
	if _, err := idem.NewInbox(e.Store, "r", caps, &idem.Options{Retention: time.Hour}); !errors.Is(err, idem.ErrRetention) {
		t.Errorf("short retention: err %v, want ErrRetention", err)
	}
	if _, err := idem.NewInbox(e.Store, "r", caps, &idem.Options{Retention: time.Hour, AllowShortRetention: true}); err != nil {
		t.Errorf("short retention with override: %v", err)
	}
	if in, err := idem.NewInbox(e.Store, "r", caps, nil); err != nil || in.Retention() != 24*time.Hour {
		t.Errorf("default retention: %v, %v", in, err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	in, err := idem.NewInbox(e.Store, "r", caps, &idem.Options{Retention: 48 * time.Hour, PurgeBatch: 10, Telemetry: broker.Telemetry{Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	other := e.Inbox("other", &idem.Options{Telemetry: broker.Telemetry{Now: clock}})
	q := NewQueue(caps)
	sub := q.Subscription(nil)
	nop := func(context.Context, Tx, *broker.Delivery) error { return nil }
	for i := range 25 {
		q.Push(Msg(fmt.Sprintf("old%d", i), "x", "", 0))
		if _, err := in.Handle(e.Ctx, receive(t, q, sub), nop); err != nil {
			t.Fatal(err)
		}
		q.Push(Msg(fmt.Sprintf("old%d", i), "x", "", 0))
		if _, err := other.Handle(e.Ctx, receive(t, q, sub), nop); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(47 * time.Hour)
	for i := range 5 {
		q.Push(Msg(fmt.Sprintf("new%d", i), "x", "", 0))
		if _, err := in.Handle(e.Ctx, receive(t, q, sub), nop); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := in.Purge(e.Ctx); err != nil || n != 0 {
		t.Errorf("purge before retention: %d, %v", n, err)
	}
	now = now.Add(2 * time.Hour) // old ones are 49h old, new ones 2h
	n, err := in.Purge(e.Ctx)
	if err != nil || n != 25 {
		t.Errorf("purge: %d, %v; want 25", n, err)
	}
	if c := e.Int(`SELECT count(*) FROM ret_inbox WHERE consumer = 'r'`); c != 5 {
		t.Errorf("records left: %d, want 5", c)
	}
	if c := e.Int(`SELECT count(*) FROM ret_inbox WHERE consumer = 'other'`); c != 25 {
		t.Errorf("other consumer's records: %d, want 25 (purge is per consumer)", c)
	}

	// Under an unbounded horizon the default keeps records for ever.
	caps.RedeliveryHorizon = capability.HorizonUnbounded
	forever, err := idem.NewInbox(e.Store, "other", caps, &idem.Options{Telemetry: broker.Telemetry{Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * 365 * 24 * time.Hour)
	if n, err := forever.Purge(e.Ctx); err != nil || n != 0 {
		t.Errorf("purge with unbounded retention: %d, %v; want 0", n, err)
	}
	if c := e.Int(`SELECT count(*) FROM ret_inbox WHERE consumer = 'other'`); c != 25 {
		t.Errorf("records after purge with unbounded retention: %d, want 25", c)
	}
}

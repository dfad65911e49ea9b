package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// EffectAll is Effect for a batch: one multi-row INSERT into effects for
// all of ds, and one UPDATE of the counter.
func (e *Env[Tx]) EffectAll() idem.BatchHandler[Tx] {
	return func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		if err := e.DB.Exec(ctx, tx, InsertEffects(len(ds)), EffectArgs(ds)...); err != nil {
			return err
		}
		return e.DB.Exec(ctx, tx, `UPDATE counter SET n = n + $1 WHERE id = 'c'`, len(ds))
	}
}

// InsertEffects is the statement inserting n rows into effects, with
// EffectArgs as its arguments.
func InsertEffects(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO effects (message_id, note) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "($%d, $%d)", 2*i+1, 2*i+2)
	}
	return b.String()
}

// EffectArgs are the arguments of InsertEffects(len(ds)).
func EffectArgs(ds []*broker.Delivery) []any {
	args := make([]any, 0, 2*len(ds))
	for _, d := range ds {
		args = append(args, d.Message.ID, string(d.Message.Body))
	}
	return args
}

func receiveN(t testing.TB, sub *broker.Subscription, n int) []*broker.Delivery {
	t.Helper()
	ds, err := sub.Receive(t.Context(), n)
	if err != nil || len(ds) != n {
		t.Fatalf("receive: %d of %d, %v", len(ds), n, err)
	}
	return ds
}

func testBatchAll[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("ball", nil)
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
	var calls [][]string
	bh := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		var ids []string
		var apply []*broker.Delivery
		var stale []error
		for _, d := range ds {
			ids = append(ids, d.Message.ID)
			if d.Message.ID == "s" {
				stale = append(stale, &idem.DeliveryError{Delivery: d, Err: idem.SkipStale})
				continue
			}
			apply = append(apply, d)
		}
		calls = append(calls, ids)
		if err := e.EffectAll()(ctx, tx, apply); err != nil {
			return err
		}
		return errors.Join(stale...)
	}
	res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 6), bh)
	if err != nil {
		t.Fatalf("HandleBatchAll: %v", err)
	}
	want := []idem.Result{idem.ResultApplied, idem.ResultApplied, idem.ResultDuplicate, idem.ResultDuplicate, idem.ResultStale, idem.ResultApplied}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
	if fmt.Sprint(calls) != "[[m1 m2 s m3]]" {
		t.Errorf("batch handler calls %v, want one with [m1 m2 s m3]", calls)
	}
	for id, n := range map[string]int{"m0": 2, "m1": 2, "m2": 1, "s": 1, "m3": 1} {
		if q.Acks(id) != n {
			t.Errorf("acks %s: %d, want %d", id, q.Acks(id), n)
		}
	}
	e.CheckEffects("m0", "m1", "m2", "m3")
	// The stale one's claim committed: its copy is a duplicate.
	q.Push(Msg("s", "x", "", 0))
	if res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 1), e.EffectAll()); err != nil || res[0] != idem.ResultDuplicate {
		t.Errorf("stale copy: %v, %v; want duplicate", res, err)
	}
	if s := in.Stats(); s.Processed != 5 || s.Stale != 1 || s.Duplicates != 3 {
		t.Errorf("stats %+v", s)
	}
}

// testBatchAllErrors: a batch handler's error rolls back every write and
// claim of the batch; a named delivery is settled alone and the rest
// retried; an unnamed error falls back to one message per transaction.
func testBatchAllErrors[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("ballerr", nil)
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	boom := errors.New("boom")

	// Failing for every message: nothing is applied, claimed or acked.
	q.Push(Msg("a1", "x", "", 0), Msg("a2", "x", "", 0), Msg("a3", "x", "", 0))
	calls := 0
	fails := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		calls++
		if err := e.EffectAll()(ctx, tx, ds); err != nil {
			return err
		}
		return boom
	}
	res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 3), fails)
	if !errors.Is(err, boom) || fmt.Sprint(res) != "[failed failed failed]" {
		t.Errorf("all failing: %v, %v", res, err)
	}
	if calls != 4 { // the batch, then each alone
		t.Errorf("batch handler called %d times, want 4", calls)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if q.Acks(id) != 0 || q.Nacks(id) != 1 {
			t.Errorf("%s: acks %d nacks %d, want 0 and 1", id, q.Acks(id), q.Nacks(id))
		}
	}
	e.CheckEffects()
	q.Expire()
	// Nothing was marked: the copies apply.
	if res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 3), e.EffectAll()); err != nil || fmt.Sprint(res) != "[applied applied applied]" {
		t.Fatalf("after rollback: %v, %v", res, err)
	}
	e.CheckEffects("a1", "a2", "a3")

	// A named failure: that one nacked (or dead-lettered), the rest applied.
	q = NewQueue(Caps)
	sub = q.Subscription(nil)
	q.Push(Msg("b1", "x", "", 0), Msg("b2", "bad", "", 0), Msg("b3", "perm", "", 0), Msg("b4", "x", "", 0))
	calls = 0
	named := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		calls++
		if err := e.EffectAll()(ctx, tx, ds); err != nil {
			return err
		}
		var errs []error
		for _, d := range ds {
			switch string(d.Message.Body) {
			case "bad":
				errs = append(errs, &idem.DeliveryError{Delivery: d, Err: boom})
			case "perm":
				errs = append(errs, &idem.DeliveryError{Delivery: d, Err: broker.Permanent(boom)})
			}
		}
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("wrapped: %w", errors.Join(errs...))
	}
	res, err = in.HandleBatchAll(e.Ctx, receiveN(t, sub, 4), named)
	if !errors.Is(err, boom) || fmt.Sprint(res) != "[applied failed dead-lettered applied]" {
		t.Errorf("named: %v, %v", res, err)
	}
	if calls != 2 || q.Nacks("b2") != 1 || q.DeadLetters("b3") != 1 || q.Acks("b1") != 1 || q.Acks("b4") != 1 {
		t.Errorf("named: %d calls (want 2), b2 nacks %d, b3 dead %d", calls, q.Nacks("b2"), q.DeadLetters("b3"))
	}
	e.CheckEffects("a1", "a2", "a3", "b1", "b4")

	// Unnamed, for one message only (a panic here): isolated.
	q = NewQueue(Caps)
	sub = q.Subscription(nil)
	q.Push(Msg("c1", "x", "", 0), Msg("c2", "panic", "", 0), Msg("c3", "x", "", 0))
	panics := func(ctx context.Context, tx Tx, ds []*broker.Delivery) error {
		if err := e.EffectAll()(ctx, tx, ds); err != nil {
			return err
		}
		for _, d := range ds {
			if string(d.Message.Body) == "panic" {
				panic("batch handler panic")
			}
		}
		return nil
	}
	res, err = in.HandleBatchAll(e.Ctx, receiveN(t, sub, 3), panics)
	if err == nil || fmt.Sprint(res) != "[applied failed applied]" {
		t.Errorf("isolated: %v, %v", res, err)
	}
	e.CheckEffects("a1", "a2", "a3", "b1", "b4", "c1", "c3")
}

func testVersionedBatch[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("vbatch", nil)
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	var applied [][]string
	bh, err := in.VersionedBatch(AggTable, func(ctx context.Context, tx Tx, ds []*broker.Delivery, evs []idem.Event) error {
		var ids []string
		for i, d := range ds {
			ids = append(ids, d.Message.ID)
			if err := e.ApplyAgg()(ctx, tx, d, evs[i]); err != nil {
				return err
			}
		}
		applied = append(applied, ids)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	q.Push(Msg("a1", "a1", "a", 1))
	if res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 1), bh); err != nil || res[0] != idem.ResultApplied {
		t.Fatalf("a1: %v, %v", res, err)
	}
	// a2 and a3 in order, a stale copy of version 2 under another ID, a
	// new aggregate b, and c at version 3 with no row (a gap).
	q.Push(Msg("a2", "a2", "a", 2), Msg("a3", "a3", "a", 3), Msg("a2-again", "a2x", "a", 2), Msg("b1", "b1", "b", 1), Msg("c3", "c3", "c", 3))
	applied = nil
	res, err := in.HandleBatchAll(e.Ctx, receiveN(t, sub, 5), bh)
	var pe *idem.ParkError
	if !errors.As(err, &pe) {
		t.Errorf("HandleBatchAll: %v, want the gap's *ParkError", err)
	}
	want := []idem.Result{idem.ResultApplied, idem.ResultApplied, idem.ResultStale, idem.ResultApplied, idem.ResultGapRetried}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
	if fmt.Sprint(applied) != "[[a2 a3 b1]]" {
		t.Errorf("apply calls %v, want one with [a2 a3 b1] (the first attempt fails on c3 before apply)", applied)
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

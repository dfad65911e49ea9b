package idemtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// testReplayAll parks more messages of one aggregate than a replay loads at
// once, and during the replay parks a message of an aggregate the replay
// has already passed: ReplayAll replays all of them, that one included.
func testReplayAll[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("replay", nil)
	const n = 130 // more than one page
	var ids []string
	park := func(tx Tx, id, agg string, version int64) error {
		m := Msg(id, "x", agg, version)
		now := time.Now()
		return e.Driver.Park(e.Ctx, tx, &idem.Parked{Consumer: "replay", MessageID: id, AggregateID: agg, Version: version, Sequence: version,
			Key: agg, Headers: m.Headers, Body: m.Body, Reason: "test", FirstSeen: now, LastSeen: now})
	}
	e.InTx(func(tx Tx) error {
		for i := range n {
			id := fmt.Sprintf("b%03d", i+1)
			ids = append(ids, id)
			if err := park(tx, id, "B", int64(i+1)); err != nil {
				return err
			}
		}
		ids = append(ids, "a1", "c1")
		if err := park(tx, "a1", "A", 1); err != nil {
			return err
		}
		return park(tx, "c1", "C", 1)
	})
	// While B replays, a message of A (already replayed) is parked, as a
	// held delivery would be; and the order within B is checked.
	var last int64
	injected := false
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		ev, err := idem.ParseEvent(d.Message)
		if err != nil {
			return err
		}
		if !d.Detached() || d.Attempt != 1 {
			t.Errorf("%s: replayed as attached %v, attempt %d; want detached, attempt 1", d.Message.ID, !d.Detached(), d.Attempt)
		}
		if ev.AggregateID == "B" {
			if ev.Version != last+1 {
				t.Errorf("B replayed version %d after %d", ev.Version, last)
			}
			last = ev.Version
			if !injected && ev.Version == 50 {
				injected = true
				ids = append(ids, "a2")
				if err := park(tx, "a2", "A", 2); err != nil {
					return err
				}
			}
		}
		return e.Effect()(ctx, tx, d)
	}
	res, err := in.ReplayAll(e.Ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if res["B"].Replayed != n || res["A"].Replayed != 2 || res["C"].Replayed != 1 || res["B"].Remaining != 0 {
		t.Errorf("results %+v", res)
	}
	if left, err := in.Parked(e.Ctx, idem.ParkedFilter{}); err != nil || len(left) != 0 {
		t.Errorf("left in the park: %d, %v", len(left), err)
	}
	e.CheckEffects(ids...)
}

// testPurgeSchedule: Handle purges by itself, one batch per call while
// batches come back full, then not again before the interval.
func testPurgeSchedule[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	e.skipTableExpiry()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	in := e.Inbox("sched", &idem.Options{Retention: time.Hour, PurgeBatch: 10, PurgeInterval: 10 * time.Minute, Telemetry: broker.Telemetry{Now: clock}})
	off := e.Inbox("off", &idem.Options{Retention: time.Hour, PurgeInterval: -1, Telemetry: broker.Telemetry{Now: clock}})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	nop := func(context.Context, Tx, *broker.Delivery) error { return nil }
	handle := func(in *idem.Inbox[Tx], id string) {
		t.Helper()
		q.Push(Msg(id, "x", "", 0))
		if r, err := in.Handle(e.Ctx, receive(t, q, sub), nop); err != nil || r != idem.ResultApplied {
			t.Fatalf("Handle %s: %v, %v", id, r, err)
		}
	}
	for i := range 25 {
		handle(in, fmt.Sprintf("old%d", i))
		handle(off, fmt.Sprintf("old%d", i))
	}
	now = now.Add(2 * time.Hour)
	want := []int64{10, 20, 25, 25} // full, full, the rest, not due
	for i, w := range want {
		handle(in, fmt.Sprintf("new%d", i))
		if got := in.Stats().Purged; got != w {
			t.Errorf("after call %d: purged %d, want %d", i+1, got, w)
		}
	}
	if c := e.Int(`SELECT count(*) FROM wary_inbox WHERE consumer = 'sched'`); c != 4 {
		t.Errorf("records left: %d, want the 4 new ones", c)
	}
	handle(off, "new")
	if got := off.Stats().Purged; got != 0 {
		t.Errorf("PurgeInterval -1 purged %d", got)
	}
	now = now.Add(11 * time.Minute)
	handle(in, "later") // due again; the new ones are younger than an hour
	if c := e.Int(`SELECT count(*) FROM wary_inbox WHERE consumer = 'sched'`); c != 5 {
		t.Errorf("records left: %d, want 5", c)
	}
}

// testGroupResults: deliveries sharing a transaction (Options.Batch) each
// get their own result.
func testGroupResults[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("bres", &idem.Options{MaxAttempts: 2, Batch: 8})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("m1", "x", "", 0))
	if r, err := in.Handle(e.Ctx, receive(t, q, sub), e.Effect()); err != nil || r != idem.ResultApplied {
		t.Fatalf("Handle: %v, %v", r, err)
	}
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		switch string(d.Message.Body) {
		case "stale":
			return fmt.Errorf("checked: %w", idem.SkipStale)
		case "fail":
			return fmt.Errorf("boom")
		case "perm":
			return broker.Permanent(fmt.Errorf("never"))
		case "gap":
			return &idem.ParkError{Reason: "gap"}
		case "park":
			return &idem.ParkError{Reason: "now", Now: true}
		}
		return e.Effect()(ctx, tx, d)
	}
	q.Push(Msg("m1", "x", "", 0), Msg("m2", "x", "", 0), Msg("s", "stale", "", 0), Msg("f", "fail", "", 0),
		Msg("p", "perm", "", 0), Msg("g", "gap", "G", 1), Msg("k", "park", "K", 1), Msg("k2", "x", "K", 2))
	var ds []*broker.Delivery
	for range 8 {
		ds = append(ds, receive(t, q, sub))
	}
	res, errs := InGroup(t, in, ds, h)
	if errs[3] == nil || errs[4] == nil {
		t.Errorf("no error for the failures: %v", errs)
	}
	// k2 is held: k was parked in its own transaction before the one
	// that includes k2 committed.
	want := []idem.Result{idem.ResultDuplicate, idem.ResultApplied, idem.ResultStale, idem.ResultFailed,
		idem.ResultDeadLettered, idem.ResultGapRetried, idem.ResultParked, idem.ResultHeld}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
	e.CheckEffects("m1", "m2")
	if s := in.Stats(); s.Stale != 1 {
		t.Errorf("stats %+v: want 1 stale", s)
	}
}

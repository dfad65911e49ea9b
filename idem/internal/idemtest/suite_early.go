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
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
)

// earlyCount is how many early events consumer holds now.
func (e *Env[Tx]) earlyCount(consumer string) int {
	e.T.Helper()
	es, ok := e.Driver.(Early[Tx])
	if !ok {
		e.T.Fatalf("the store %T cannot hold early events", e.Driver)
	}
	n, err := es.CountEarly(e.Ctx, consumer)
	if err != nil {
		e.T.Fatal(err)
	}
	return n
}

// wantEarlyList checks the Admin listing of consumer's (or every
// consumer's) aggregates holding early events, all but the hold times,
// which must lie within the test's run.
func wantEarlyList[Tx any](e *Env[Tx], consumer string, want []idem.EarlyAggregate) {
	e.T.Helper()
	got, err := e.Driver.ListEarly(e.Ctx, consumer, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := range got {
		if at := got[i].OldestHeldAt; at.IsZero() || time.Since(at) > time.Hour || time.Until(at) > time.Hour {
			e.T.Errorf("early list: %s held at %s", got[i].AggregateID, at)
		}
		got[i].OldestHeldAt = time.Time{}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) && (len(got) != 0 || len(want) != 0) {
		e.T.Errorf("early list of %q:\n got %+v\nwant %+v", consumer, got, want)
	}
}

// testEarly: events ahead of their aggregate are held in the store and
// acked at once; when the predecessor comes they are applied after it, in
// version order, each once; copies of held events are duplicates.
func testEarly[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("early", &idem.Options{Versions: AggTable})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	q.Push(Msg("e1", "a", "A", 1), Msg("e3", "c", "A", 3), Msg("e5", "e", "A", 5), Msg("e3", "c", "A", 3), Msg("e4", "d", "A", 4),
		Msg("e4'", "d'", "A", 4))
	wantResults(t, handleAll(t, in, e.ApplyAgg(), q, sub), "e1 applied", "e3 early", "e5 early", "e3 duplicate", "e4 early", "e4' stale")
	if n := e.earlyCount("early"); n != 3 {
		t.Errorf("early events held: %d, want 3", n)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a" {
		t.Errorf("state while held %q, want a", s)
	}
	wantEarlyList(e, "early", []idem.EarlyAggregate{{Consumer: "early", AggregateID: "A", Awaited: 2, FirstVersion: 3, LastVersion: 5, Held: 3}})
	q.Push(Msg("e2", "b", "A", 2), Msg("e4", "d", "A", 4), Msg("e6", "f", "A", 6))
	wantResults(t, handleAll(t, in, e.ApplyAgg(), q, sub), "e2 applied", "e4 duplicate", "e6 applied")
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b,c,d,e,f" {
		t.Errorf("state %q, want a,b,c,d,e,f", s)
	}
	if n := e.earlyCount("early"); n != 0 {
		t.Errorf("early events left: %d", n)
	}
	wantEarlyList(e, "", nil)
	for _, id := range []string{"e1", "e2", "e3", "e4", "e5", "e6"} {
		if q.Nacks(id) != 0 || q.DeadLetters(id) != 0 {
			t.Errorf("%s: nacks %d, dead letters %d; want none", id, q.Nacks(id), q.DeadLetters(id))
		}
	}
	if s := in.Stats(); s.Early != 3 || s.EarlyApplied != 3 || s.Applied != 6 || s.Retried != 0 || s.Parked != 0 {
		t.Errorf("stats %+v", s)
	}
	// A version above 1 of an aggregate without a row waits too.
	q.Push(Msg("b2", "y", "B", 2), Msg("b1", "x", "B", 1))
	wantResults(t, handleAll(t, in, e.ApplyAgg(), q, sub), "b2 early", "b1 applied")
	if s := e.String(`SELECT state FROM aggs WHERE id = 'B'`); s != "x,y" {
		t.Errorf("B %q, want x,y", s)
	}
	if st := in.Statement(); strings.Contains(st.String(), "retry gaps") || !strings.Contains(st.String(), "hold gaps in the store (acked on the broker, never retried through it) for up to 1h until") {
		t.Errorf("statement of a holding inbox speaks of retries:\n%s", st)
	}
	// A subscription that keeps each aggregate's order: gaps are retried
	// through the broker by default.
	ordered := Caps
	ordered.Ordering = capability.OrderPartition
	oin, err := idem.NewInbox(e.Store, "early-ordered", ordered, Quiet(&idem.Options{Versions: AggTable}))
	if err != nil {
		t.Fatal(err)
	}
	q.Push(Msg("c3", "z", "C", 3))
	wantResults(t, handleAll(t, oin, e.ApplyAgg(), q, sub), "c3 gap retried", "c3 gap retried", "c3 gap retried", "c3 gap retried", "c3 parked")
}

// testEarlyGroup: with shared transactions, a held event whose predecessor
// comes in a batch is applied in it; a delivery that fails in the batch
// rolls back a transaction in which a held event had been applied, and the
// held event is applied, once, when the batch is tried again without it.
func testEarlyGroup[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("egroup", &idem.Options{Batch: 10, Versions: AggTable})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	var mu sync.Mutex
	runs := map[string]int{}
	boom := errors.New("boom")
	apply := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		mu.Lock()
		runs[d.Message.ID]++
		mu.Unlock()
		if string(d.Message.Body) == "boom" {
			return boom
		}
		return e.ApplyAgg()(ctx, tx, d)
	}
	q.Push(Msg("a1", "a1", "a", 1), Msg("a3", "a3", "a", 3))
	wantResults(t, handleAll(t, in, apply, q, sub), "a1 applied", "a3 early")
	// a4 ahead in the batch (held in its transaction), then a2, which
	// brings a3 and a4; x fails after them, so the first attempt rolls
	// back with a3 and a4 applied in it.
	q.Push(Msg("a4", "a4", "a", 4), Msg("a2", "a2", "a", 2), Msg("x1", "boom", "x", 1), Msg("b1", "b1", "b", 1))
	res, errs := InGroup(t, in, receiveN(t, sub, 4), apply)
	if want := "[early applied failed applied]"; fmt.Sprint(res) != want || !errors.Is(errs[2], boom) || errs[0] != nil || errs[1] != nil || errs[3] != nil {
		t.Errorf("results %v, %v; want %s", res, errs, want)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'a'`); s != "a1,a2,a3,a4" {
		t.Errorf("a: %q, want a1,a2,a3,a4", s)
	}
	if runs["a3"] != 2 || runs["a4"] != 2 {
		t.Errorf("a3 ran %d times, a4 %d (want twice: rolled back with x1, then again)", runs["a3"], runs["a4"])
	}
	if n := e.earlyCount("egroup"); n != 0 {
		t.Errorf("early events left: %d", n)
	}
	if s := in.Stats(); s.EarlyApplied < 2 {
		t.Errorf("stats %+v", s)
	}
}

// testEarlyFails: a held event whose handler fails when its predecessor is
// applied is parked, with the aggregate's other held events, and the
// predecessor commits; replay applies them in order.
func testEarlyFails[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("efail", &idem.Options{Versions: AggTable})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	broken := true
	apply := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if broken && string(d.Message.Body) == "c" {
			// Writes first, so that the savepoint must undo them.
			if err := e.ApplyAgg()(ctx, tx, d); err != nil {
				return err
			}
			return errors.New("boom")
		}
		return e.ApplyAgg()(ctx, tx, d)
	}
	q.Push(Msg("e1", "a", "A", 1), Msg("e3", "c", "A", 3), Msg("e4", "d", "A", 4), Msg("e2", "b", "A", 2), Msg("e5", "e", "A", 5))
	wantResults(t, handleAll(t, in, apply, q, sub), "e1 applied", "e3 early", "e4 early", "e2 applied", "e5 held")
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b" {
		t.Errorf("state %q, want a,b", s)
	}
	if n := e.Int(`SELECT version FROM aggs WHERE id = 'A'`); n != 2 {
		t.Errorf("version %d, want 2 (the failed successor's check undone)", n)
	}
	parked, err := in.Parked(e.Ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 3 || parked[0].MessageID != "e3" || parked[1].MessageID != "e4" || parked[2].MessageID != "e5" {
		t.Fatalf("parked %+v, %v; want e3 e4 e5", parked, err)
	}
	if !strings.Contains(parked[0].Reason, "boom") {
		t.Errorf("reason %q", parked[0].Reason)
	}
	broken = false
	if res, err := in.Replay(e.Ctx, "A", apply); err != nil || res.Replayed != 3 {
		t.Errorf("replay: %+v, %v", res, err)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b,c,d,e" {
		t.Errorf("state after replay %q, want a,b,c,d,e", s)
	}
}

// testEarlyExpiry: a hold older than Options.EarlyLimit parks the
// aggregate, found lazily as Handle runs or by ExpireEarly;
// its later events are held behind the park, and replay applies all in
// version order.
func testEarlyExpiry[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	in := e.Inbox("eexp", &idem.Options{Versions: AggTable, EarlyLimit: time.Minute, Telemetry: broker.Telemetry{Now: clock}})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	v := e.ApplyAgg()
	q.Push(Msg("c3", "c3", "C", 3))
	wantResults(t, handleAll(t, in, v, q, sub), "c3 early")
	advance(2 * time.Minute)
	// The next Handle finds c3 held too long and parks it first: c4 is
	// held behind it.
	q.Push(Msg("c4", "c4", "C", 4), Msg("d2", "d2", "D", 2))
	wantResults(t, handleAll(t, in, v, q, sub), "c4 held", "d2 early")
	advance(2 * time.Minute)
	if n, err := in.ExpireEarly(e.Ctx); err != nil || n != 1 {
		t.Errorf("ExpireEarly: %d, %v; want d2 parked", n, err)
	}
	if n := e.earlyCount("eexp"); n != 0 {
		t.Errorf("early events left: %d", n)
	}
	parked, err := in.Parked(e.Ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 3 {
		t.Fatalf("parked %+v, %v", parked, err)
	}
	for _, p := range parked {
		if p.MessageID != "c4" && !strings.Contains(p.Reason, "EarlyLimit") {
			t.Errorf("parked %s: reason %q", p.MessageID, p.Reason)
		}
	}
	// The predecessors come late: held behind the park.
	q.Push(Msg("c2", "c2", "C", 2), Msg("c1", "c1", "C", 1), Msg("d1", "d1", "D", 1))
	wantResults(t, handleAll(t, in, v, q, sub), "c2 held", "c1 held", "d1 held")
	out, err := in.ReplayAll(e.Ctx, v)
	if err != nil || out["C"].Replayed != 4 || out["D"].Replayed != 2 {
		t.Errorf("replay: %+v, %v", out, err)
	}
	// Between two lazy expiries (every EarlyLimit/4), holding another
	// event of the aggregate finds the old hold: both are parked.
	q.Push(Msg("f3", "f3", "F", 3))
	wantResults(t, handleAll(t, in, v, q, sub), "f3 early")
	advance(59 * time.Second)
	q.Push(Msg("g1", "g1", "G", 1)) // the lazy expiry runs: f3 is 59s old
	wantResults(t, handleAll(t, in, v, q, sub), "g1 applied")
	advance(2 * time.Second)
	q.Push(Msg("f4", "f4", "F", 4))
	wantResults(t, handleAll(t, in, v, q, sub), "f4 parked")
	if parked, err := in.Parked(e.Ctx, idem.ParkedFilter{AggregateID: "F", HasAggregate: true}); err != nil || len(parked) != 2 {
		t.Errorf("F parked: %+v, %v; want f3 and f4", parked, err)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'C'`); s != "c1,c2,c3,c4" {
		t.Errorf("C %q", s)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'D'`); s != "d1,d2" {
		t.Errorf("D %q", s)
	}
}

// EarlyAggregates and EarlyVersions size testEarlyShuffled.
const (
	EarlyAggregates = 20
	EarlyVersions   = 15
)

// testEarlyShuffled: events of many aggregates, each delivered twice, in
// random order, to four concurrent callers with a delivery limit of 2:
// every effect is applied once and in order, and no delivery is nacked or
// dead-lettered (with holding, a gap costs no delivery).
func testEarlyShuffled[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	caps := Caps
	caps.DeliveryLimit = 2
	in, err := idem.NewInbox(e.Store, "eshuf", caps, Quiet(&idem.Options{Versions: AggTable}))
	if err != nil {
		t.Fatal(err)
	}
	q := NewQueue(caps)
	rng := rand.New(rand.NewPCG(1, 2))
	q.SetPick(func(n int) int { return rng.IntN(n) })
	var want []string
	for a := range EarlyAggregates {
		agg := fmt.Sprintf("g%02d", a)
		state := []string{}
		for v := 1; v <= EarlyVersions; v++ {
			body := fmt.Sprintf("%s.%d", agg, v)
			m := Msg(fmt.Sprintf("%s-%d", agg, v), body, agg, int64(v))
			q.Push(m, m)
			state = append(state, body)
		}
		want = append(want, strings.Join(state, ","))
	}
	sub := q.Subscription(nil)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				d, err := q.Receive(e.Ctx, sub)
				if errors.Is(err, ErrEmpty) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if _, err := in.Handle(e.Ctx, d, e.ApplyAgg()); err != nil {
					errs <- fmt.Errorf("%s: %w", d.Message.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for a := range EarlyAggregates {
		if s := e.String(`SELECT state FROM aggs WHERE id = $1`, fmt.Sprintf("g%02d", a)); s != want[a] {
			t.Errorf("g%02d: %q, want %q", a, s, want[a])
		}
	}
	if n := e.earlyCount("eshuf"); n != 0 {
		t.Errorf("early events left: %d", n)
	}
	s := in.Stats()
	if s.Retried != 0 || s.Parked != 0 || s.Failed != 0 || s.Applied != EarlyAggregates*EarlyVersions {
		t.Errorf("stats %+v", s)
	}
	for a := range EarlyAggregates {
		for v := 1; v <= EarlyVersions; v++ {
			id := fmt.Sprintf("g%02d-%d", a, v)
			if q.Nacks(id) != 0 || q.DeadLetters(id) != 0 || q.Acks(id) != 2 {
				t.Errorf("%s: acks %d, nacks %d, dead letters %d", id, q.Acks(id), q.Nacks(id), q.DeadLetters(id))
			}
		}
	}
}

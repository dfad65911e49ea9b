package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// AggTable is the version table of the domain table aggs.
var AggTable = idem.VersionTable{Table: "aggs", IDColumn: "id", VersionColumn: "version"}

// ApplyAgg applies an event to aggs: version 1 creates the row with the
// body as state; later versions append ",body".
func (e *Env[Tx]) ApplyAgg() idem.Handler[Tx] {
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		ev, err := idem.ParseEvent(d.Message)
		if err != nil {
			return err
		}
		if ev.Version == 1 {
			return e.DB.Exec(ctx, tx, `INSERT INTO aggs (id, version, state) VALUES ($1, 1, $2)`, ev.AggregateID, string(d.Message.Body))
		}
		return e.DB.Exec(ctx, tx, `UPDATE aggs SET state = state || ',' || $2 WHERE id = $1`, ev.AggregateID, string(d.Message.Body))
	}
}

func testVersionCheck[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	e.Exec(`INSERT INTO aggs (id, version, state) VALUES ('a', 3, '')`)
	for _, c := range []struct {
		id      string
		version int64
		want    idem.VersionResult
		cur     int64
	}{
		{"a", 4, idem.VersionApplied, 4},
		{"a", 4, idem.VersionStale, 4},
		{"a", 2, idem.VersionStale, 4},
		{"a", 7, idem.VersionGap, 4},
		{"a", 5, idem.VersionApplied, 5},
		{"zz", 1, idem.VersionMissing, 0},
		{"zz", 3, idem.VersionMissing, 0},
		{`a' OR '1'='1`, 6, idem.VersionMissing, 0},
	} {
		e.InTx(func(tx Tx) error {
			got, err := e.Driver.CheckVersion(e.Ctx, tx, idem.VersionTable(AggTable), c.id, c.version)
			if err != nil {
				return err
			}
			if idem.VersionResult(got.Result) != c.want || got.Current != c.cur {
				t.Errorf("CheckVersion(%q, %d) = %v/%d, want %v/%d", c.id, c.version, got.Result, got.Current, c.want, c.cur)
			}
			return nil
		})
	}
	if v := e.Int(`SELECT version FROM aggs WHERE id = 'a'`); v != 5 {
		t.Errorf("version %d, want 5", v)
	}
}

func testTransition[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	e.Exec(`INSERT INTO orders (id, status) VALUES ('o1', 'pending'), ('o2', 'shipped')`)
	table := idem.StateTable{Table: "orders", IDColumn: "id", StateColumn: "status"}
	for _, c := range []struct {
		id, to string
		from   []string
		want   idem.TransitionResult
		state  string
	}{
		{"o1", "cancelled", []string{"pending", "cancelled"}, idem.TransitionApplied, "cancelled"},
		{"o1", "cancelled", []string{"pending", "cancelled"}, idem.TransitionAlready, "cancelled"},
		{"o2", "cancelled", []string{"pending", "cancelled"}, idem.TransitionInvalid, "shipped"},
		{"o1", "shipped", []string{"pending"}, idem.TransitionInvalid, "cancelled"},
		{"o9", "cancelled", []string{"pending"}, idem.TransitionMissing, ""},
		{"o2", "shipped", nil, idem.TransitionAlready, "shipped"},
	} {
		e.InTx(func(tx Tx) error {
			got, err := e.Driver.Transition(e.Ctx, tx, idem.StateTable(table), c.id, c.to, c.from...)
			if err != nil {
				return err
			}
			if idem.TransitionResult(got.Result) != c.want || got.State != c.state {
				t.Errorf("Transition(%s -> %s from %v) = %v/%q, want %v/%q", c.id, c.to, c.from, got.Result, got.State, c.want, c.state)
			}
			return nil
		})
	}
	if s := e.String(`SELECT status FROM orders WHERE id = 'o2'`); s != "shipped" {
		t.Errorf("stale cancellation overwrote shipped: %q", s)
	}
}

// handleAll handles every queued delivery with h and returns each one's
// message ID and result, in order ("e1 applied").
func handleAll[Tx any](t testing.TB, in *idem.Inbox[Tx], h idem.Handler[Tx], q *Queue, sub *broker.Subscription) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		d, err := q.Receive(t.Context(), sub)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		r, err := in.Handle(t.Context(), d, h)
		var pe *idem.ParkError
		if err != nil && !errors.As(err, &pe) && !broker.IsPermanent(err) {
			t.Fatalf("Handle %s: %v", d.Message.ID, err)
		}
		got = append(got, d.Message.ID+" "+r.String())
	}
	return got
}

// wantResults compares handleAll's results.
func wantResults(t testing.TB, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("results:\n got  %s\n want %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

func testVersioned[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := e.Inbox("ver", &idem.Options{MaxAttempts: 3, Versions: AggTable, Gaps: idem.GapsRetry, Telemetry: broker.Telemetry{Now: func() time.Time { now = now.Add(time.Second); return now }}})
	v := e.ApplyAgg()
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	// v1, v2, v2 again (same ID), v2 replayed with a new ID, v1 stale.
	q.Push(Msg("e1", "a", "A", 1), Msg("e2", "b", "A", 2), Msg("e2", "b", "A", 2), Msg("e2'", "b", "A", 2), Msg("e1'", "a", "A", 1))
	wantResults(t, handleAll(t, in, v, q, sub), "e1 applied", "e2 applied", "e2 duplicate", "e2' stale", "e1' stale")
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b" {
		t.Errorf("state %q, want a,b", s)
	}
	if s := in.Stats(); s.Applied != 2 || s.Stale != 2 || s.Duplicates != 1 {
		t.Errorf("stats %+v", s)
	}
	// v4 before v3: a gap, retried MaxAttempts times, then parked; v5 is
	// held behind it, v3 too; replay applies them in order.
	q.Push(Msg("e4", "d", "A", 4))
	wantResults(t, handleAll(t, in, v, q, sub), "e4 gap retried", "e4 gap retried", "e4 parked")
	if q.Nacks("e4") != 2 || q.Acks("e4") != 1 {
		t.Errorf("gap: nacks %d, acks %d; want 2 retries, then parked and acked", q.Nacks("e4"), q.Acks("e4"))
	}
	q.Push(Msg("e5", "e", "A", 5), Msg("e3", "c", "A", 3), Msg("e4", "d", "A", 4))
	wantResults(t, handleAll(t, in, v, q, sub), "e5 held", "e3 held", "e4 duplicate")
	parked, err := in.Parked(e.Ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 3 {
		t.Fatalf("parked: %d, %v", len(parked), err)
	}
	if p := parked[0]; p.MessageID != "e3" || parked[1].MessageID != "e4" || parked[2].MessageID != "e5" {
		t.Errorf("parked order: %s %s %s, want e3 e4 e5", parked[0].MessageID, parked[1].MessageID, parked[2].MessageID)
	}
	p4 := parked[1]
	if p4.Attempts != 3 || p4.AggregateID != "A" || p4.Version != 4 || string(p4.Body) != "d" || p4.Headers.Get(idem.HeaderAggregateID) != "A" ||
		p4.Reason == "" || !p4.LastSeen.After(p4.FirstSeen) || p4.Key != "A" {
		t.Errorf("parked e4: %+v", p4)
	}
	if parked[0].Attempts != 0 || parked[0].Reason == "" {
		t.Errorf("held e3: %+v", parked[0])
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b" {
		t.Errorf("state while parked %q, want a,b", s)
	}
	res, err := in.Replay(e.Ctx, "A", v)
	if err != nil || res.Replayed != 3 || res.Remaining != 0 || res.Stopped != nil {
		t.Errorf("replay: %+v, %v", res, err)
	}
	if s := e.String(`SELECT state FROM aggs WHERE id = 'A'`); s != "a,b,c,d,e" {
		t.Errorf("state after replay %q, want a,b,c,d,e", s)
	}
	// A version 2 event for an aggregate that does not exist: missing,
	// retried, parked; a message without a version is rejected.
	q.Push(Msg("b2", "x", "B", 2), &broker.Message{ID: "bad", Headers: broker.Headers{{idem.HeaderAggregateID, "B"}}})
	wantResults(t, handleAll(t, in, v, q, sub), "b2 gap retried", "bad dead-lettered", "b2 gap retried", "b2 parked")
	if q.DeadLetters("bad") != 1 {
		t.Errorf("event without version: dead letters %d", q.DeadLetters("bad"))
	}
	parked, _ = in.Parked(e.Ctx, idem.ParkedFilter{AggregateID: "B", HasAggregate: true})
	if len(parked) != 1 || parked[0].MessageID != "b2" {
		t.Fatalf("parked for B: %+v", parked)
	}
	// Replaying while the gap is open stops and counts the attempt.
	res, err = in.Replay(e.Ctx, "B", v)
	if err != nil || res.Replayed != 0 || res.Remaining != 1 || res.Stopped == nil || res.Stopped.Attempts != 4 {
		t.Errorf("replay with open gap: %+v, %v", res, err)
	}
	parked, _ = in.Parked(e.Ctx, idem.ParkedFilter{ID: parked[0].ID})
	if len(parked) != 1 || parked[0].Attempts != 4 {
		t.Errorf("after failed replay: %+v", parked)
	}
}

func testParking[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	in := e.Inbox("park", &idem.Options{MaxAttempts: 2})
	q := NewQueue(Caps)
	sub := q.Subscription(nil)
	reason := "needs a human"
	h := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if err := e.Effect()(ctx, tx, d); err != nil {
			return err
		}
		if string(d.Message.Body) == "park" {
			return &idem.ParkError{Reason: reason, Now: true}
		}
		return nil
	}
	q.Push(Msg("p1", "park", "X", 1), Msg("p2", "ok", "X", 2), Msg("p3", "ok", "Y", 1), Msg("p4", "park", "", 0))
	for q.Len() > 0 {
		if _, err := in.Handle(e.Ctx, receive(t, q, sub), h); err != nil {
			t.Fatal(err)
		}
	}
	e.CheckEffects("p3") // p1 parked without effect, p2 held behind it
	list, err := in.Parked(e.Ctx, idem.ParkedFilter{})
	if err != nil || len(list) != 3 {
		t.Fatalf("parked: %+v, %v", list, err)
	}
	if list[0].AggregateID != "" || list[1].MessageID != "p1" || list[1].Reason != reason || list[2].MessageID != "p2" {
		t.Errorf("parked: %+v", list)
	}
	// Discard one; replay the rest with a handler that now succeeds.
	if n, err := in.Discard(e.Ctx, idem.ParkedFilter{ID: list[0].ID}); err != nil || n != 1 {
		t.Errorf("discard: %d, %v", n, err)
	}
	res, err := in.ReplayAll(e.Ctx, e.Effect())
	if err != nil || res["X"].Replayed != 2 {
		t.Errorf("replay all: %+v, %v", res, err)
	}
	e.CheckEffects("p1", "p2", "p3")
	if s := in.Stats(); s.Parked != 3 || s.Held != 1 || s.Replayed != 2 {
		t.Errorf("stats %+v", s)
	}
	// Copies of parked or discarded messages are duplicates.
	q.Push(Msg("p1", "park", "X", 1), Msg("p4", "park", "", 0))
	for q.Len() > 0 {
		if _, err := in.Handle(e.Ctx, receive(t, q, sub), h); err != nil {
			t.Fatal(err)
		}
	}
	e.CheckEffects("p1", "p2", "p3")
	// NoHold: a later message of a parked aggregate is processed.
	free := e.Inbox("free", &idem.Options{NoHold: true})
	q.Push(Msg("f1", "park", "Z", 1), Msg("f2", "ok", "Z", 2))
	for q.Len() > 0 {
		if _, err := free.Handle(e.Ctx, receive(t, q, sub), h); err != nil {
			t.Fatal(err)
		}
	}
	e.CheckEffects("p1", "p2", "p3", "f2")
	if n, err := free.Discard(e.Ctx, idem.ParkedFilter{AggregateID: "Z", HasAggregate: true}); n != 1 || err != nil {
		t.Errorf("discard aggregate: %d, %v", n, err)
	}
	// Retry-then-park with a handler error that is not Now.
	q.Push(Msg("r1", "x", "R", 1))
	retry := func(context.Context, Tx, *broker.Delivery) error {
		return fmt.Errorf("wrapped: %w", &idem.ParkError{Reason: "later"})
	}
	for q.Len() > 0 {
		_, _ = in.Handle(e.Ctx, receive(t, q, sub), retry)
	}
	if q.Nacks("r1") != 1 || q.Acks("r1") != 1 {
		t.Errorf("retry then park: nacks %d acks %d", q.Nacks("r1"), q.Acks("r1"))
	}
}

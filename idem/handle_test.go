package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
)

// The tests in this file run the inbox's own logic against the fake
// store (fake_test.go) and the fake broker (harness_test.go).

// TestHandleOnce: a message is applied once, in the transaction that
// claims it, and acknowledged after the commit; a copy is acknowledged
// without running the handler, whether the store begins a transaction
// for a claim of duplicates only or not (lazy, as PostgreSQL's).
func TestHandleOnce(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) {
			e := newEnv(t, testCaps)
			e.db.lazy = lazy
			in := e.inbox(Options{})
			ran := 0
			h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
				ran++
				if !slices.Contains(tx.claimed, d.Message.ID) {
					t.Errorf("the handler's transaction has not claimed %q (claimed %v)", d.Message.ID, tx.claimed)
				}
				return tx.apply(d.Message.ID)
			}
			d, r, err := e.handle(in, msg("m1", "", 0), h)
			if r != ResultApplied || err != nil || e.settled(d) != "ack" {
				t.Fatalf("first: %v, %v, settled %q", r, err, e.settled(d))
			}
			d2 := e.deliver(msg("m1", "", 0), 2)
			if r, err := in.Handle(t.Context(), d2, h); r != ResultDuplicate || err != nil || e.settled(d2) != "ack" {
				t.Fatalf("copy: %v, %v, settled %q", r, err, e.settled(d2))
			}
			st := e.db.view()
			if ran != 1 || st.effects["m1"] != 1 {
				t.Errorf("handler ran %d times, effect applied %d times; want 1", ran, st.effects["m1"])
			}
			if _, ok := st.inbox[fkey{"c", "m1"}]; !ok {
				t.Errorf("no claim committed")
			}
			s := in.Stats()
			if s.Processed != 1 || s.Duplicates != 1 || s.Failed != 0 {
				t.Errorf("stats %+v", s)
			}
			// Without lazy, the duplicate's transaction commits, empty.
			want := [][]string{{"m1"}, nil}
			if lazy {
				want = want[:1]
			}
			if got := e.db.committed(); s.Commits != int64(len(want)) || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("commits: stats %d, store %q; want %q", s.Commits, got, want)
			}
		})
	}
}

// TestHandleFailures: a handler error, a panic or a failed commit rolls
// everything back, the claim with the effect, and nacks the delivery; the
// copy the broker sends again is applied (once), and its failures are
// forgotten.
func TestHandleFailures(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name  string
		setup func(e *env)
		h     Handler[*fakeTx]
		want  func(error) bool
		store bool // counted as a store error
	}{
		{name: "handler error", h: func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
			_ = tx.apply(d.Message.ID)
			return boom
		}, want: func(err error) bool { return errors.Is(err, boom) }},
		{name: "panic", h: func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
			_ = tx.apply(d.Message.ID)
			panic("oops")
		}, want: func(err error) bool { return strings.Contains(err.Error(), "handler panic: oops") }},
		{name: "commit", setup: func(e *env) { e.db.failNext("Commit", errInject) }, h: applyAll,
			want: func(err error) bool { return errors.Is(err, errInject) && strings.Contains(err.Error(), "commit") }, store: true},
		{name: "begin and claim", setup: func(e *env) { e.db.failNext("BeginClaim", errInject) }, h: applyAll,
			want: func(err error) bool {
				return errors.Is(err, errInject) && strings.Contains(err.Error(), "begin and claim")
			}, store: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testCaps)
			in := e.inbox(Options{})
			if c.setup != nil {
				c.setup(e)
			}
			d, r, err := e.handle(in, msg("m1", "", 0), c.h)
			if r != ResultFailed || err == nil || !c.want(err) {
				t.Fatalf("got %v, %v", r, err)
			}
			if e.settled(d) != "nack" {
				t.Errorf("settled %q, want nack", e.settled(d))
			}
			st := e.db.view()
			if _, ok := st.inbox[fkey{"c", "m1"}]; ok || st.effects["m1"] != 0 {
				t.Errorf("after the failure: claim kept %v, effect applied %d times", ok, st.effects["m1"])
			}
			if s := in.Stats(); (s.StoreErrors == 1) != c.store || (s.Failed == 1) == c.store {
				t.Errorf("stats %+v", s)
			}
			clears := e.db.count("ClearFailure")
			d2 := e.deliver(msg("m1", "", 0), 2)
			if r, err := in.Handle(t.Context(), d2, applyAll); r != ResultApplied || err != nil || e.settled(d2) != "ack" {
				t.Fatalf("redelivery: %v, %v, settled %q", r, err, e.settled(d2))
			}
			if n := e.db.view().effects["m1"]; n != 1 {
				t.Errorf("effect applied %d times, want 1", n)
			}
			if e.db.count("ClearFailure") != clears+1 {
				t.Errorf("a redelivery's failures were not cleared in its transaction")
			}
		})
	}
}

// TestHandleCommitDetached: the commit after a successful handler is not
// cut off when the caller's context ends; the work is committed and
// acknowledged.
func TestHandleCommitDetached(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	ctx, cancel := context.WithCancel(t.Context())
	d := e.deliver(msg("m1", "", 0), 1)
	r, err := in.Handle(ctx, d, func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		cancel() // the caller gives up while the handler runs
		return tx.apply(d.Message.ID)
	})
	if r != ResultApplied || err != nil || e.settled(d) != "ack" || e.db.view().effects["m1"] != 1 {
		t.Fatalf("got %v, %v, settled %q, effects %v", r, err, e.settled(d), e.db.view().effects)
	}
}

// TestHandleConflicts: a transaction that failed only because of a
// concurrent one (the store's conflicts) is tried again at once, without
// a nack, a few times; then the delivery is nacked.
func TestHandleConflicts(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	e.db.failNext("Commit", errFakeCon)
	e.db.failNext("BeginClaim", errFakeCon)
	d, r, err := e.handle(in, msg("m1", "", 0), applyAll)
	if r != ResultApplied || err != nil || e.settled(d) != "ack" {
		t.Fatalf("after two conflicts: %v, %v, settled %q", r, err, e.settled(d))
	}
	if s := in.Stats(); s.Conflicts != 2 || s.StoreErrors != 0 || e.db.view().effects["m1"] != 1 {
		t.Errorf("stats %+v, effects %v", s, e.db.view().effects)
	}

	e.db.failNext("Commit", errFakeCon, errFakeCon, errFakeCon, errFakeCon)
	d, r, err = e.handle(in, msg("m2", "", 0), applyAll)
	if r != ResultFailed || !errors.Is(err, errFakeCon) || e.settled(d) != "nack" {
		t.Fatalf("after %d conflicts: %v, %v, settled %q", conflictRetries+1, r, err, e.settled(d))
	}
	if s := in.Stats(); s.Conflicts != 2+conflictRetries || s.StoreErrors != 1 || e.db.count("Commit") != 2+conflictRetries+1 {
		t.Errorf("stats %+v, commits tried %d", s, e.db.count("Commit"))
	}
}

// TestHandleAckAfterCommit: an ack that fails after the commit is
// reported (ErrAckAfterCommit, Stats.AckFailures); the effect stays, and
// the broker's copy is a duplicate.
func TestHandleAckAfterCommit(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	e.sub.failAcks = 1
	_, r, err := e.handle(in, msg("m1", "", 0), applyAll)
	if r != ResultApplied || !errors.Is(err, ErrAckAfterCommit) || !errors.Is(err, errAckFailed) {
		t.Fatalf("got %v, %v", r, err)
	}
	d2 := e.deliver(msg("m1", "", 0), 2)
	if r, err := in.Handle(t.Context(), d2, applyAll); r != ResultDuplicate || err != nil || e.settled(d2) != "ack" {
		t.Fatalf("copy: %v, %v", r, err)
	}
	if s := in.Stats(); s.AckFailures != 1 || s.Processed != 1 || e.db.view().effects["m1"] != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestHandlePermanent: what no retry can fix is settled for good, never
// retried: a handler's error marked broker.Permanent is dead-lettered
// where the broker can; a body that does not decode, a message ID that
// breaks the rules and a value the store refuses (ErrData) are
// dead-lettered, or parked where the broker cannot dead-letter (under a
// stand-in ID for a bad ID), and a copy of a parked one is a duplicate.
func TestHandlePermanent(t *testing.T) {
	type order struct{ N int }
	typed := Typed(nil, func(ctx context.Context, tx *fakeTx, d *broker.Delivery, o order) error {
		return tx.apply(d.Message.ID)
	})
	bad := "bad\x01id"
	cases := []struct {
		name     string
		m        *broker.Message
		setup    func(e *env)
		h        Handler[*fakeTx]
		match    error
		parkedAs string // the parked message's ID, without dead letters
	}{
		{name: "undecodable", m: msg("m1", "agg", 0), h: typed, match: broker.ErrUndecodable, parkedAs: "m1"},
		{name: "no ID", m: msg("", "", 0), h: applyAll, match: ErrNoID, parkedAs: "wary-no-id:"},
		{name: "invalid ID", m: msg(bad, "", 0), h: applyAll, match: ErrInvalidID, parkedAs: standInID(bad)},
		{name: "data", m: msg("m1", "", 0), setup: func(e *env) { e.db.failNext("BeginClaim", seam.DataError(errInject)) },
			h: applyAll, match: ErrData, parkedAs: "m1"},
	}
	for _, c := range cases {
		for _, dlq := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/dlq=%v", c.name, dlq), func(t *testing.T) {
				caps := testCaps
				caps.DeadLetter = dlq
				e := newEnv(t, caps)
				in := e.inbox(Options{})
				if c.setup != nil {
					c.setup(e)
				}
				d, r, err := e.handle(in, c.m, c.h)
				parked, _ := in.Parked(t.Context(), ParkedFilter{})
				if dlq {
					if r != ResultDeadLettered || !errors.Is(err, c.match) || !strings.Contains(e.settled(d), c.match.Error()) || len(parked) != 0 {
						t.Fatalf("got %v, %v, settled %q, parked %v", r, err, e.settled(d), parked)
					}
					return
				}
				if r != ResultParked || err != nil || e.settled(d) != "ack" || len(parked) != 1 || !strings.HasPrefix(parked[0].MessageID, c.parkedAs) {
					t.Fatalf("got %v, %v, settled %q, parked %+v", r, err, e.settled(d), parked)
				}
				if !strings.Contains(parked[0].Reason, c.match.Error()) || string(parked[0].Body) != string(c.m.Body) {
					t.Errorf("parked with reason %q, body %q", parked[0].Reason, parked[0].Body)
				}
				if c.m.ID == "" {
					return // a fresh stand-in each time: copies cannot be told apart
				}
				d2 := e.deliver(c.m, 2)
				if r, err := in.Handle(t.Context(), d2, c.h); r != ResultDuplicate || err != nil || e.settled(d2) != "ack" {
					t.Errorf("copy: %v, %v, settled %q", r, err, e.settled(d2))
				}
				if fx := e.db.view().effects; len(fx) != 0 {
					t.Errorf("effects applied: %v", fx)
				}
			})
		}
	}

	// A handler's error marked permanent: dead-lettered, or retried
	// where the broker cannot dead-letter (as broker.Run does).
	for _, dlq := range []bool{true, false} {
		caps := testCaps
		caps.DeadLetter = dlq
		e := newEnv(t, caps)
		in := e.inbox(Options{})
		perm := broker.Permanent(errors.New("refused"))
		d, r, err := e.handle(in, msg("m1", "", 0), func(context.Context, *fakeTx, *broker.Delivery) error { return perm })
		want, settled := ResultDeadLettered, "dead-letter: "
		if !dlq {
			want, settled = ResultFailed, "nack"
		}
		if r != want || !errors.Is(err, perm) || !strings.HasPrefix(e.settled(d), settled) {
			t.Errorf("dlq=%v: %v, %v, settled %q", dlq, r, err, e.settled(d))
		}
	}
}

// TestHandleParkAfterAttempts: a handler asking to park (a *ParkError) is
// retried through the broker, its failures counted in the store, and
// parked after MaxAttempts with its reason and count; a copy of it is
// then a duplicate. ParkError.Now parks at once; a delivery count above
// the store's (the broker's) counts.
func TestHandleParkAfterAttempts(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{MaxAttempts: 3})
	wait := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "not yet"} }
	first := e.clock.Now()
	for attempt := 1; attempt <= 2; attempt++ {
		d := e.deliver(msg("m1", "agg", 0), attempt)
		r, err := in.Handle(t.Context(), d, wait)
		var pe *ParkError
		if r != ResultGapRetried || !errors.As(err, &pe) || e.settled(d) != "nack" {
			t.Fatalf("attempt %d: %v, %v, settled %q", attempt, r, err, e.settled(d))
		}
		if f := e.db.view().failures[fkey{"c", "m1"}]; f.attempts != attempt || !f.first.Equal(first) {
			t.Fatalf("attempt %d: failure record %+v", attempt, f)
		}
		e.clock.advance(time.Minute)
	}
	d := e.deliver(msg("m1", "agg", 0), 3)
	if r, err := in.Handle(t.Context(), d, wait); r != ResultParked || err != nil || e.settled(d) != "ack" {
		t.Fatalf("attempt 3: %v, %v, settled %q", r, err, e.settled(d))
	}
	parked, err := in.Parked(t.Context(), ParkedFilter{})
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %v, %v", parked, err)
	}
	p := parked[0]
	if p.MessageID != "m1" || p.AggregateID != "agg" || p.Reason != "not yet" || p.Attempts != 3 || !p.FirstSeen.Equal(first) ||
		!p.LastSeen.Equal(e.clock.Now()) || string(p.Body) != "body of m1" {
		t.Errorf("parked %+v", p)
	}
	st := e.db.view()
	if len(st.failures) != 0 {
		t.Errorf("failures kept after parking: %v", st.failures)
	}
	if s := in.Stats(); s.Retried != 2 || s.Parked != 1 {
		t.Errorf("stats %+v", s)
	}
	d = e.deliver(msg("m1", "agg", 0), 4)
	if r, err := in.Handle(t.Context(), d, wait); r != ResultDuplicate || err != nil {
		t.Errorf("copy of a parked message: %v, %v", r, err)
	}

	// Now: parked at once, no failure counted.
	now := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "never", Now: true} }
	if _, r, err := e.handle(in, msg("m2", "", 0), now); r != ResultParked || err != nil {
		t.Errorf("ParkError.Now: %v, %v", r, err)
	}
	// The broker's count: a fifth delivery, first seen by the store.
	d = e.deliver(msg("m3", "", 0), 5)
	if r, err := in.Handle(t.Context(), d, wait); r != ResultParked || err != nil {
		t.Errorf("fifth delivery: %v, %v", r, err)
	}
	if p, _ := in.Parked(t.Context(), ParkedFilter{AggregateID: "", HasAggregate: true}); len(p) != 2 || p[0].Attempts != 1 || p[1].Attempts != 5 {
		t.Errorf("parked %+v", p)
	}

	// A store failure while counting or parking: nacked, nothing parked.
	e.db.failNext("RecordFailure", errInject)
	d, r, err := e.handle(in, msg("m4", "", 0), wait)
	if r != ResultFailed || !errors.Is(err, errInject) || e.settled(d) != "nack" {
		t.Errorf("record failure fails: %v, %v, %q", r, err, e.settled(d))
	}
	e.db.failNext("Commit", errInject) // the park's: the handler's transaction was rolled back
	d, r, err = e.handle(in, msg("m5", "", 0), now)
	if r != ResultFailed || !errors.Is(err, errInject) || e.settled(d) != "nack" {
		t.Errorf("park fails: %v, %v, %q", r, err, e.settled(d))
	}
	if _, ok := e.db.view().inbox[fkey{"c", "m5"}]; ok {
		t.Errorf("a failed park kept its claim")
	}
}

// TestHoldAndReplay: later messages of an aggregate with a parked message
// are parked behind it (held) without running the handler, others flow;
// Replay applies the aggregate's messages in order, each in its own
// transaction with its removal from the park, and stops at one that
// fails, which keeps its place with the new reason.
func TestHoldAndReplay(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	failFor := map[string]error{"a1": &ParkError{Reason: "first", Now: true}}
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		if err := failFor[d.Message.ID]; err != nil {
			return err
		}
		return tx.apply(d.Message.ID)
	}
	want := []Result{ResultParked, ResultHeld, ResultApplied, ResultHeld}
	for i, m := range []*broker.Message{msg("a1", "a", 0), msg("a2", "a", 0), msg("b1", "b", 0), msg("a3", "a", 0)} {
		d, r, err := e.handle(in, m, h)
		if r != want[i] || err != nil || e.settled(d) != "ack" {
			t.Fatalf("%s: %v, %v, settled %q; want %v", m.ID, r, err, e.settled(d), want[i])
		}
	}
	if got := e.db.view().log; !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("applied %v, want b1 alone", got)
	}
	parked, _ := in.Parked(t.Context(), ParkedFilter{AggregateID: "a", HasAggregate: true})
	if len(parked) != 3 || parked[1].Reason != "held behind a parked message of aggregate a" {
		t.Fatalf("parked %+v", parked)
	}
	if s := in.Stats(); s.Held != 2 || s.Parked != 3 {
		t.Errorf("stats %+v", s)
	}

	// The replay stops at a2, whose handler fails now: a1 is applied, a2
	// and a3 stay, a2 with the new reason.
	failFor = map[string]error{"a2": errors.New("still broken")}
	res, err := in.Replay(t.Context(), "a", h)
	if err == nil || !strings.Contains(err.Error(), "still broken") || res.Replayed != 1 || res.Remaining != 2 || res.Stopped == nil ||
		res.Stopped.MessageID != "a2" || res.Stopped.Attempts != 1 || !strings.Contains(res.Stopped.Reason, "still broken") {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	parked, _ = in.Parked(t.Context(), ParkedFilter{AggregateID: "a", HasAggregate: true})
	if len(parked) != 2 || parked[0].MessageID != "a2" || parked[0].Attempts != 1 || parked[0].Reason != res.Stopped.Reason {
		t.Fatalf("parked after the stop: %+v", parked)
	}
	// A gap still open (a *ParkError) stops it too, and is no error.
	failFor = map[string]error{"a2": &ParkError{Reason: "gap"}}
	if res, err = in.Replay(t.Context(), "a", h); err != nil || res.Stopped == nil || res.Stopped.Attempts != 2 || res.Remaining != 2 {
		t.Fatalf("replay stopped by a ParkError: %+v, %v", res, err)
	}
	failFor = nil
	if res, err = in.Replay(t.Context(), "a", h); err != nil || res.Replayed != 2 || res.Remaining != 0 || res.Stopped != nil {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if got := e.db.view().log; !slices.Equal(got, []string{"b1", "a1", "a2", "a3"}) {
		t.Errorf("applied %v, want the aggregate in order after b1", got)
	}
	if s := in.Stats(); s.Replayed != 3 {
		t.Errorf("stats %+v", s)
	}
	// The aggregate flows again; the replayed messages' claims stay.
	if _, r, err := e.handle(in, msg("a4", "a", 0), h); r != ResultApplied || err != nil {
		t.Errorf("a4 after the replay: %v, %v", r, err)
	}
	if _, r, err := e.handle(in, msg("a2", "a", 0), h); r != ResultDuplicate || err != nil {
		t.Errorf("a copy of a2 after the replay: %v, %v", r, err)
	}
}

// TestNoHold: with NoHold, an aggregate's later messages are applied
// while an earlier one is parked.
func TestNoHold(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{NoHold: true})
	park := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "x", Now: true} }
	if _, r, _ := e.handle(in, msg("a1", "a", 0), park); r != ResultParked {
		t.Fatalf("a1: %v", r)
	}
	if _, r, err := e.handle(in, msg("a2", "a", 0), applyAll); r != ResultApplied || err != nil {
		t.Errorf("a2: %v, %v", r, err)
	}
}

// TestReplayAllAndDiscard: ReplayAll replays every aggregate (and the
// messages without one), continues past one that stops, and reports
// each; Discard deletes what it selects, and the claims stay.
func TestReplayAllAndDiscard(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	park := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "x", Now: true} }
	for _, m := range []*broker.Message{msg("a1", "a", 0), msg("a2", "a", 0), msg("b1", "b", 0), msg("n1", "", 0), msg("c1", "c", 0)} {
		if _, _, err := e.handle(in, m, park); err != nil {
			t.Fatal(err)
		}
	}
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		if d.Message.ID == "b1" {
			return errors.New("b is broken")
		}
		return tx.apply(d.Message.ID)
	}
	out, err := in.ReplayAll(t.Context(), h)
	if err == nil || !strings.Contains(err.Error(), "b is broken") {
		t.Errorf("ReplayAll error %v", err)
	}
	if out["a"].Replayed != 2 || out[""].Replayed != 1 || out["c"].Replayed != 1 || out["b"].Stopped == nil || out["b"].Remaining != 1 {
		t.Errorf("ReplayAll: %+v", out)
	}
	if got := e.db.view().log; !slices.Equal(got, []string{"n1", "a1", "a2", "c1"}) {
		t.Errorf("applied %v", got)
	}
	if n, err := in.Discard(t.Context(), ParkedFilter{}); n != 1 || err != nil {
		t.Errorf("discard: %d, %v", n, err)
	}
	if p, _ := in.Parked(t.Context(), ParkedFilter{}); len(p) != 0 {
		t.Errorf("parked after discard: %v", p)
	}
	if _, r, _ := e.handle(in, msg("b1", "b", 0), applyAll); r != ResultDuplicate {
		t.Errorf("a discarded message's copy: %v, want duplicate", r)
	}
}

// TestReplayStoreFailure: a store failure during a replay stops it,
// leaves the message parked and is returned.
func TestReplayStoreFailure(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	park := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "x", Now: true} }
	e.handle(in, msg("a1", "a", 0), park)
	e.db.failNext("Commit", errInject)
	res, err := in.Replay(t.Context(), "a", applyAll)
	if !errors.Is(err, errInject) || res.Remaining != 1 || res.Replayed != 0 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	e.db.failNext("ListParked", errInject)
	if _, err := in.Replay(t.Context(), "a", applyAll); !errors.Is(err, errInject) {
		t.Errorf("listing fails: %v", err)
	}
	if res, err := in.Replay(t.Context(), "a", applyAll); err != nil || res.Replayed != 1 {
		t.Errorf("replay: %+v, %v", res, err)
	}
}

// TestPurge: Purge deletes the claims older than the retention in
// batches of PurgeBatch (or has an expiring store drop them); the lazy
// purge deletes one batch on the first Handle after the interval, and
// goes on while batches come back full.
func TestPurge(t *testing.T) {
	for _, expires := range []bool{false, true} {
		t.Run(fmt.Sprintf("expirer=%v", expires), func(t *testing.T) {
			e := newEnv(t, testCaps)
			e.db.expires = expires
			in := e.inbox(Options{Retention: time.Hour, AllowShortRetention: true, PurgeBatch: 2, PurgeInterval: -1})
			for i := range 5 {
				e.handle(in, msg(fmt.Sprint("old", i), "", 0), applyAll)
			}
			e.clock.advance(2 * time.Hour)
			e.handle(in, msg("new", "", 0), applyAll)
			n, err := in.Purge(t.Context())
			if n != 5 || err != nil {
				t.Fatalf("purge: %d, %v", n, err)
			}
			if st := e.db.view(); len(st.inbox) != 1 {
				t.Errorf("claims left %v", st.inbox)
			}
			op := map[bool]string{false: "Purge", true: "Expire"}[expires]
			if e.db.count(op) != 3 || in.Stats().Purged != 5 {
				t.Errorf("%s called %d times, purged %d", op, e.db.count(op), in.Stats().Purged)
			}
		})
	}

	e := newEnv(t, testCaps)
	in := e.inbox(Options{Retention: time.Hour, AllowShortRetention: true, PurgeBatch: 2, PurgeInterval: 10 * time.Minute})
	for i := range 3 {
		e.handle(in, msg(fmt.Sprint("old", i), "", 0), applyAll) // the first purges nothing
	}
	e.clock.advance(2 * time.Hour)
	e.handle(in, msg("n1", "", 0), applyAll) // a full batch: the next call goes on
	e.handle(in, msg("n2", "", 0), applyAll) // the rest
	e.handle(in, msg("n3", "", 0), applyAll) // not due
	if n := len(e.db.view().inbox); n != 3 || e.db.count("Purge") != 3 || in.Stats().Purged != 3 {
		t.Errorf("claims left %d, purges %d, purged %d", n, e.db.count("Purge"), in.Stats().Purged)
	}
	e.db.failNext("Purge", errInject)
	e.clock.advance(time.Hour)
	if _, r, err := e.handle(in, msg("n4", "", 0), applyAll); r != ResultApplied || err != nil {
		t.Errorf("a failed lazy purge failed the delivery: %v, %v", r, err)
	}
	e.db.failNext("Purge", errInject)
	if _, err := in.Purge(t.Context()); !errors.Is(err, errInject) {
		t.Errorf("purge: %v", err)
	}
}

// TestNewInboxOptions: options out of range are refused with
// broker.ErrInvalid, naming each; the defaults are applied.
func TestNewInboxOptions(t *testing.T) {
	e := newEnv(t, testCaps)
	_, err := NewInbox[*fakeTx](e.db, "c", testCaps, &Options{MaxAttempts: -1, Batch: -1, PurgeBatch: -1, CommitTimeout: -1, EarlyLimit: -1})
	if !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("negative options: %v", err)
	}
	for _, f := range []string{"MaxAttempts", "Batch", "PurgeBatch", "CommitTimeout", "EarlyLimit"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	if _, err := NewInbox[*fakeTx](e.db, "c", testCaps, &Options{PurgeInterval: -1}); err != nil {
		t.Errorf("negative PurgeInterval (never): %v", err)
	}
	if _, err := NewInbox[*fakeTx](e.db, "bad name", testCaps, nil); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad consumer: %v", err)
	}
	if _, err := NewInbox[*fakeTx](e.db, "c", testCaps, &Options{Versions: VersionTable{Table: "t;", IDColumn: "id", VersionColumn: "v"}}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad version table: %v", err)
	}
	if _, err := NewInbox[*fakeTx](e.db, "c", testCaps, &Options{Versions: testTable, Gaps: GapsHold}); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("GapsHold on a store that cannot hold: %v", err)
	}
	if _, err := NewInbox[*fakeTx](e.db, "c", testCaps, &Options{Gaps: GapMode(9)}); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("unknown gap mode: %v", err)
	}
	in := e.inbox(Options{})
	if in.o.MaxAttempts != 5 || in.o.PurgeBatch != 1000 || in.o.PurgeInterval != 10*time.Minute || in.o.EarlyLimit != DefaultEarlyLimit ||
		in.o.CommitTimeout != 30*time.Second || in.Consumer() != "c" || in.Retention() != testCaps.RedeliveryHorizon {
		t.Errorf("defaults: %+v", in.o)
	}
	st := in.Statement()
	if len(st.Findings) != 0 {
		t.Errorf("statement findings: %+v", st.Findings)
	}
	// A MaxAttempts above the broker's delivery limit is a finding.
	caps := testCaps
	caps.DeliveryLimit = 3
	in, err = NewInbox[*fakeTx](e.db, "c", caps, &Options{MaxAttempts: 10, Versions: testTable, Gaps: GapsRetry})
	if err != nil || len(in.Statement().Findings) == 0 {
		t.Errorf("MaxAttempts over the delivery limit: %v, findings %+v", err, in.Statement().Findings)
	}
}

// TestHandleConcurrentCopies: copies of one message handled at once
// through Wrap (redeliveries racing, competing consumers of one inbox)
// are applied once; the others are duplicates, all acknowledged.
func TestHandleConcurrentCopies(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{})
	h := in.Wrap(applyAll)
	const copies = 8
	ds := make([]*broker.Delivery, copies)
	for i := range ds {
		ds[i] = e.deliver(msg("m1", "", 0), i+1)
	}
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			if err := h(t.Context(), d); err != nil {
				t.Errorf("copy %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, d := range ds {
		if e.settled(d) != "ack" {
			t.Errorf("settled %q", e.settled(d))
		}
	}
	if s := in.Stats(); s.Processed != 1 || s.Duplicates != copies-1 || e.db.view().effects["m1"] != 1 {
		t.Errorf("stats %+v, effects %v", s, e.db.view().effects)
	}
}

// TestHandleCommitTimeout: a commit that does not return is cut off at
// Options.CommitTimeout, and the delivery nacked, even with the caller's
// context alive for ever.
func TestHandleCommitTimeout(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{CommitTimeout: 50 * time.Millisecond})
	e.db.before("Commit", func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("a commit without a deadline")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	d, r, err := e.handle(in, msg("m1", "", 0), applyAll)
	if r != ResultFailed || !errors.Is(err, context.DeadlineExceeded) || e.settled(d) != "nack" {
		t.Fatalf("got %v, %v, settled %q", r, err, e.settled(d))
	}
	if _, ok := e.db.view().inbox[fkey{"c", "m1"}]; ok {
		t.Errorf("a commit cut off kept its claim")
	}
}

// TestParkCopyMeanwhile: when a copy of a message is applied while the
// inbox counts its failure, parking finds its claim taken and reports
// a duplicate instead of parking it.
func TestParkCopyMeanwhile(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{MaxAttempts: 1})
	e.db.before("RecordFailure", func(context.Context) error {
		e.db.seed(func(s *fakeState) { s.inbox[fkey{"c", "m1"}] = e.clock.Now() }) // the copy's claim, committed
		return nil
	})
	wait := func(context.Context, *fakeTx, *broker.Delivery) error { return &ParkError{Reason: "gap"} }
	d, r, err := e.handle(in, msg("m1", "", 0), wait)
	if r != ResultDuplicate || err != nil || e.settled(d) != "ack" {
		t.Fatalf("got %v, %v, settled %q", r, err, e.settled(d))
	}
	if p, _ := in.Parked(t.Context(), ParkedFilter{}); len(p) != 0 {
		t.Errorf("parked %v", p)
	}
}

// TestPoisonParkFails: where a poison message cannot be dead-lettered and
// parking it fails, it is nacked, to be parked on its next delivery.
func TestPoisonParkFails(t *testing.T) {
	caps := testCaps
	caps.DeadLetter = false
	e := newEnv(t, caps)
	in := e.inbox(Options{})
	e.db.failNext("Commit", errInject) // the park's
	d, r, err := e.handle(in, msg("", "", 0), applyAll)
	if r != ResultFailed || !errors.Is(err, errInject) || !errors.Is(err, ErrNoID) || e.settled(d) != "nack" {
		t.Fatalf("got %v, %v, settled %q", r, err, e.settled(d))
	}
	e.db.failNext("Begin", errInject)
	if _, r, err := e.handle(in, msg("", "", 0), applyAll); r != ResultFailed || !errors.Is(err, errInject) {
		t.Fatalf("begin fails: %v, %v", r, err)
	}
	if _, r, err := e.handle(in, msg("", "", 0), applyAll); r != ResultParked || err != nil {
		t.Fatalf("next delivery: %v, %v", r, err)
	}
}

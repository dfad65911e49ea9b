package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

// wantResult handles m and checks its result and settlement.
func (e *env) wantResult(in *Inbox[*fakeTx], m *broker.Message, h Handler[*fakeTx], want Result, settled string) error {
	e.t.Helper()
	d, r, err := e.handle(in, m, h)
	if r != want || e.settled(d) != settled {
		e.t.Fatalf("%s: %v (%v), settled %q; want %v, %q", m.ID, r, err, e.settled(d), want, settled)
	}
	return err
}

// TestVersionsRetried: behind version checks, with gaps retried through
// the broker: the next version is applied, an older one skipped (its
// claim committed), a gap retried and then parked, the aggregate's later
// events held behind it, and a replay applies them in version order
// through the same checks.
func TestVersionsRetried(t *testing.T) {
	e := newEnv(t, testCaps) // a store that cannot hold gaps
	in := e.inbox(Options{Versions: testTable, MaxAttempts: 2})
	ran := 0
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		ran++
		return applyVersioned(ctx, tx, d)
	}
	e.wantResult(in, event("a", 1), h, ResultApplied, "ack")
	e.wantResult(in, msg("a-v1-again", "a", 1), h, ResultStale, "ack")
	if ran != 1 {
		t.Errorf("the handler ran %d times for a stale event", ran)
	}
	if _, ok := e.db.view().inbox[fkey{"c", "a-v1-again"}]; !ok {
		t.Errorf("a stale event's claim was not committed")
	}
	err := e.wantResult(in, event("a", 3), h, ResultGapRetried, "nack")
	var pe *ParkError
	if !errors.As(err, &pe) || pe.Reason != `gap: aggregate "a" at version 1, event version 3` {
		t.Errorf("gap: %v", err)
	}
	d := e.deliver(event("a", 3), 2)
	if r, err := in.Handle(t.Context(), d, h); r != ResultParked || err != nil {
		t.Fatalf("gap, attempt 2: %v, %v", r, err)
	}
	e.wantResult(in, event("a", 4), h, ResultHeld, "ack")
	e.wantResult(in, event("a", 2), h, ResultHeld, "ack")
	if got := e.db.view().versions["accounts"]["a"]; got != 1 {
		t.Errorf("version %d after the gap, want 1", got)
	}
	res, err := in.Replay(t.Context(), "a", h)
	if err != nil || res.Replayed != 3 || res.Remaining != 0 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	st := e.db.view()
	if !slices.Equal(st.log, []string{"a-v1", "a-v2", "a-v3", "a-v4"}) || st.versions["accounts"]["a"] != 4 {
		t.Errorf("applied %v, version %d", st.log, st.versions["accounts"]["a"])
	}
	if s := in.Stats(); s.Applied != 4 || s.Stale != 1 || s.Gaps != 2 || s.Retried != 1 {
		t.Errorf("stats %+v", s)
	}

	// A version above 1 of an aggregate without a row.
	err = e.wantResult(in, event("b", 2), h, ResultGapRetried, "nack")
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, `missing aggregate: "b" has no row`) {
		t.Errorf("missing aggregate: %v", err)
	}
}

// TestVersionsReplayGapOpen: a replay whose first event's gap is still
// open stops there, with no error, and leaves the aggregate parked.
func TestVersionsReplayGapOpen(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{Versions: testTable, MaxAttempts: 1})
	e.wantResult(in, event("a", 1), applyVersioned, ResultApplied, "ack")
	e.wantResult(in, event("a", 3), applyVersioned, ResultParked, "ack")
	res, err := in.Replay(t.Context(), "a", applyVersioned)
	if err != nil || res.Replayed != 0 || res.Remaining != 1 || res.Stopped == nil || !strings.Contains(res.Stopped.Reason, "gap") {
		t.Fatalf("replay: %+v, %v", res, err)
	}
}

// TestVersionsNoEvent: behind version checks, a message without a valid
// event identity can never pass them: it is dead-lettered where the
// broker can, and parked where it cannot, never retried (Options.Versions).
func TestVersionsNoEvent(t *testing.T) {
	for _, dlq := range []bool{true, false} {
		for _, m := range []*broker.Message{msg("plain", "", 0), msg("unversioned", "a", 0),
			{ID: "bad-version", Headers: broker.Headers{{HeaderAggregateID, "a"}, {HeaderAggregateVersion, "x"}}}} {
			t.Run(fmt.Sprintf("%s/dlq=%v", m.ID, dlq), func(t *testing.T) {
				caps := testCaps
				caps.DeadLetter = dlq
				e := newEnv(t, caps)
				in := e.inbox(Options{Versions: testTable})
				d, r, err := e.handle(in, m, applyVersioned)
				if dlq {
					if r != ResultDeadLettered || !errors.Is(err, ErrNoEvent) || !strings.HasPrefix(e.settled(d), "dead-letter: ") {
						t.Fatalf("got %v, %v, settled %q", r, err, e.settled(d))
					}
					return
				}
				if r != ResultParked || err != nil || e.settled(d) != "ack" {
					t.Fatalf("got %v, %v, settled %q; want parked", r, err, e.settled(d))
				}
				p, _ := in.Parked(t.Context(), ParkedFilter{})
				if len(p) != 1 || p[0].MessageID != m.ID || !strings.Contains(p[0].Reason, ErrNoEvent.Error()) {
					t.Errorf("parked %+v", p)
				}
			})
		}
	}
}

// TestGapsMode: GapsAuto holds gaps where the subscription keeps no order
// per aggregate and the store can hold them, and retries them elsewhere;
// GapsRetry always retries.
func TestGapsMode(t *testing.T) {
	keyed := testCaps
	keyed.Ordering = capability.OrderPartition
	for _, c := range []struct {
		caps  capability.Subscription
		gaps  GapMode
		early bool
		want  Result
	}{
		{testCaps, GapsAuto, true, ResultEarly},
		{keyed, GapsAuto, true, ResultGapRetried},
		{testCaps, GapsAuto, false, ResultGapRetried},
		{testCaps, GapsRetry, true, ResultGapRetried},
		{keyed, GapsHold, true, ResultEarly},
	} {
		e := newEnv(t, c.caps)
		e.db.early = c.early
		in := e.inbox(Options{Versions: testTable, Gaps: c.gaps})
		e.wantResult(in, event("a", 1), applyVersioned, ResultApplied, "ack")
		if _, r, _ := e.handle(in, event("a", 3), applyVersioned); r != c.want {
			t.Errorf("%v, %v, early store %v: %v, want %v", c.caps.Ordering, c.gaps, c.early, r, c.want)
		}
	}
}

// earlyEnv is an env whose store holds gaps, and an inbox that does.
func earlyEnv(t *testing.T, o Options) (*env, *Inbox[*fakeTx]) {
	e := newEnv(t, testCaps)
	e.db.early = true
	o.Versions = testTable
	return e, e.inbox(o)
}

// TestEarlyHeld: an event ahead of its aggregate is held in the store,
// with its claim, and acknowledged; when its predecessor is applied, the
// held events that follow are applied in the same transaction, in version
// order, by the same handler, behind the aggregate's lock.
func TestEarlyHeld(t *testing.T) {
	e, in := earlyEnv(t, Options{})
	e.wantResult(in, event("a", 1), applyVersioned, ResultApplied, "ack")
	e.wantResult(in, event("a", 4), applyVersioned, ResultEarly, "ack")
	e.wantResult(in, event("a", 3), applyVersioned, ResultEarly, "ack")
	e.wantResult(in, msg("a-v3-again", "a", 3), applyVersioned, ResultStale, "ack") // that version waits already
	st := e.db.view()
	if len(st.early) != 2 || len(st.log) != 1 {
		t.Fatalf("held %v, applied %v", st.early, st.log)
	}
	if ev := st.early[ekey{"c", "a", 3}]; ev.MessageID != "a-v3" || ev.Awaited != 2 || string(ev.Body) != "body of a-v3" ||
		!ev.HeldAt.Equal(e.clock.Now()) {
		t.Errorf("held %+v", ev)
	}
	e.wantResult(in, event("a", 2), applyVersioned, ResultApplied, "ack")
	st = e.db.view()
	if !slices.Equal(st.log, []string{"a-v1", "a-v2", "a-v3", "a-v4"}) || st.versions["accounts"]["a"] != 4 || len(st.early) != 0 {
		t.Errorf("applied %v, version %d, held %v", st.log, st.versions["accounts"]["a"], st.early)
	}
	if ops := e.db.lastOps; slices.Index(ops, "Lock a") < 0 || slices.Index(ops, "Lock a") > slices.Index(ops, "CheckVersion a") {
		t.Errorf("the aggregate's lock was not taken before its version check: %v", ops)
	}
	if s := in.Stats(); s.Early != 2 || s.EarlyApplied != 2 || s.Applied != 4 || s.Processed != 3 {
		t.Errorf("stats %+v", s)
	}
	if c := e.db.committed(); len(c) != 5 || !slices.Equal(c[4], []string{"a-v2"}) {
		t.Errorf("transactions %v", c)
	}
}

// TestEarlyLimit: a held gap that does not close is parked with its
// aggregate's early events: when another event of the aggregate is held
// after EarlyLimit, or by ExpireEarly (lazily, as Handle runs, or
// called); the aggregate is then held behind them, and a replay applies
// it in order once its predecessor came.
func TestEarlyLimit(t *testing.T) {
	e, in := earlyEnv(t, Options{EarlyLimit: time.Hour})
	e.wantResult(in, event("a", 1), applyVersioned, ResultApplied, "ack")
	e.wantResult(in, event("a", 3), applyVersioned, ResultEarly, "ack")
	e.clock.advance(59 * time.Minute)
	e.wantResult(in, event("o", 1), applyVersioned, ResultApplied, "ack") // expires nothing yet
	e.clock.advance(2 * time.Minute)
	e.wantResult(in, event("a", 4), applyVersioned, ResultParked, "ack") // before the next lazy expiry
	parked, _ := in.Parked(t.Context(), ParkedFilter{})
	if len(parked) != 2 || parked[0].MessageID != "a-v3" || parked[1].MessageID != "a-v4" ||
		!strings.HasPrefix(parked[0].Reason, `gap: aggregate "a" at version 1, early events held since`) {
		t.Fatalf("parked %+v", parked)
	}
	e.wantResult(in, event("a", 2), applyVersioned, ResultHeld, "ack")
	if res, err := in.Replay(t.Context(), "a", applyVersioned); err != nil || res.Replayed != 3 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if st := e.db.view(); !slices.Equal(st.log, []string{"a-v1", "o-v1", "a-v2", "a-v3", "a-v4"}) {
		t.Errorf("applied %v", st.log)
	}

	// A gap that never closes: parked lazily, by the first Handle after
	// the limit (and its quarter) passed.
	e.wantResult(in, event("b", 1), applyVersioned, ResultApplied, "ack")
	e.wantResult(in, event("b", 3), applyVersioned, ResultEarly, "ack")
	e.clock.advance(61 * time.Minute)
	e.wantResult(in, event("o", 2), applyVersioned, ResultApplied, "ack")
	parked, _ = in.Parked(t.Context(), ParkedFilter{AggregateID: "b", HasAggregate: true})
	if len(parked) != 1 || !strings.Contains(parked[0].Reason, "their predecessor never came") {
		t.Fatalf("parked %+v", parked)
	}
	// And by ExpireEarly, called.
	e.wantResult(in, event("c", 1), applyVersioned, ResultApplied, "ack")
	e.wantResult(in, event("c", 3), applyVersioned, ResultEarly, "ack")
	e.wantResult(in, event("c", 4), applyVersioned, ResultEarly, "ack")
	if n, err := in.ExpireEarly(t.Context()); n != 0 || err != nil {
		t.Errorf("ExpireEarly before the limit: %d, %v", n, err)
	}
	e.clock.advance(time.Hour + time.Second)
	if n, err := in.ExpireEarly(t.Context()); n != 2 || err != nil {
		t.Errorf("ExpireEarly: %d, %v", n, err)
	}
	if st := e.db.view(); len(st.early) != 0 {
		t.Errorf("held after expiry: %v", st.early)
	}
	e.db.failNext("ExpiredEarly", errInject)
	if _, err := in.ExpireEarly(t.Context()); !errors.Is(err, errInject) {
		t.Errorf("ExpireEarly, store failure: %v", err)
	}
}

// TestEarlySuccessorFails: a held successor whose handler fails when its
// predecessor is applied does not sink the predecessor: its work is
// undone to a savepoint, it is tried again after the commit, each time in
// a transaction of its own, and after three failures its aggregate's
// early events are parked with the reason.
func TestEarlySuccessorFails(t *testing.T) {
	for _, fails := range []int{1, 3} {
		t.Run(fmt.Sprintf("fails=%d", fails), func(t *testing.T) {
			e, in := earlyEnv(t, Options{})
			failed := 0
			h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
				if err := applyVersioned(ctx, tx, d); err != nil {
					return err
				}
				if d.Message.ID == "a-v3" && failed < fails {
					failed++
					return errors.New("v3 broken")
				}
				return nil
			}
			e.wantResult(in, event("a", 1), h, ResultApplied, "ack")
			e.wantResult(in, event("a", 3), h, ResultEarly, "ack")
			e.wantResult(in, event("a", 2), h, ResultApplied, "ack")
			st := e.db.view()
			if fails < earlyAttempts {
				if !slices.Equal(st.log, []string{"a-v1", "a-v2", "a-v3"}) || st.versions["accounts"]["a"] != 3 || in.Stats().EarlyApplied != 1 {
					t.Errorf("applied %v, version %d, stats %+v", st.log, st.versions["accounts"]["a"], in.Stats())
				}
				return
			}
			if !slices.Equal(st.log, []string{"a-v1", "a-v2"}) || st.versions["accounts"]["a"] != 2 || len(st.early) != 0 {
				t.Errorf("applied %v, version %d, held %v", st.log, st.versions["accounts"]["a"], st.early)
			}
			parked, _ := in.Parked(t.Context(), ParkedFilter{})
			if len(parked) != 1 || parked[0].MessageID != "a-v3" || !strings.Contains(parked[0].Reason, "failed 3 times") ||
				!strings.Contains(parked[0].Reason, "v3 broken") {
				t.Errorf("parked %+v", parked)
			}
		})
	}
}

// TestEarlyReplayHeals: a replay that applies a parked predecessor applies
// the successors held behind it too; one that fails there is parked with
// the reason, and the replay stops at it.
func TestEarlyReplayHeals(t *testing.T) {
	e, in := earlyEnv(t, Options{})
	var fail map[string]error
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		if err := fail[d.Message.ID]; err != nil {
			return err
		}
		return applyVersioned(ctx, tx, d)
	}
	e.wantResult(in, event("a", 1), h, ResultApplied, "ack")
	e.wantResult(in, event("a", 3), h, ResultEarly, "ack")
	e.wantResult(in, event("a", 4), h, ResultEarly, "ack")
	fail = map[string]error{"a-v2": &ParkError{Reason: "not now", Now: true}}
	e.wantResult(in, event("a", 2), h, ResultParked, "ack")

	fail = map[string]error{"a-v4": errors.New("v4 broken")}
	res, err := in.Replay(t.Context(), "a", h)
	if err == nil || !strings.Contains(err.Error(), "v4 broken") || res.Replayed != 1 || res.Stopped == nil || res.Stopped.MessageID != "a-v4" {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if st := e.db.view(); !slices.Equal(st.log, []string{"a-v1", "a-v2", "a-v3"}) || len(st.early) != 0 {
		t.Errorf("applied %v, held %v", st.log, st.early)
	}
	fail = nil
	if res, err := in.Replay(t.Context(), "a", h); err != nil || res.Replayed != 1 || res.Remaining != 0 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if st := e.db.view(); st.versions["accounts"]["a"] != 4 {
		t.Errorf("version %d, want 4", st.versions["accounts"]["a"])
	}
}

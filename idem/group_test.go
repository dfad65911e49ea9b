package idem

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
)

// inGroup handles ds through in (Options.Batch at least len(ds)) so that
// they share one transaction, in the order of ds, and returns each one's
// result and error. A gate delivery of its own holds the inbox's
// transaction busy, its handler blocked, while one Handle call per
// delivery starts, each once the one before waits in the group; then the
// gate commits, and the calls waiting behind it form the next
// transaction. (The calls wait inside the inbox, with no event to wait
// on: Stats.Waiting is polled, yielding.)
func (e *env) inGroup(in *Inbox[*fakeTx], ms []*broker.Message, h Handler[*fakeTx]) ([]*broker.Delivery, []Result, []error) {
	e.t.Helper()
	ctx := e.t.Context()
	entered, release := make(chan struct{}), make(chan struct{})
	gated := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		if d.Message.ID == "gate-v1" {
			close(entered)
			<-release
			return nil
		}
		return h(ctx, tx, d)
	}
	gateDone := make(chan error, 1)
	go func() {
		_, err := in.Handle(ctx, broker.NewDetachedDelivery(event("gate", 1), 1), gated)
		gateDone <- err
	}()
	select {
	case <-entered:
	case err := <-gateDone:
		e.t.Fatalf("gate: returned before its handler ran: %v", err)
	}
	ds := make([]*broker.Delivery, len(ms))
	for i, m := range ms {
		ds[i] = e.deliver(m, 1)
	}
	res, errs := make([]Result, len(ds)), make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { res[i], errs[i] = in.Handle(ctx, d, gated) })
		for in.Stats().Waiting != int64(i+1) {
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-gateDone; err != nil {
		e.t.Fatalf("gate: %v", err)
	}
	wg.Wait()
	return ds, res, errs
}

// TestGroupShares: concurrent calls share one transaction (Options.Batch),
// claimed in message-ID order, and keep Handle's results: a message
// claimed before, or earlier in the same transaction, is a duplicate.
func TestGroupShares(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{Batch: 10})
	e.wantResult(in, msg("m0", "", 0), applyAll, ResultApplied, "ack")
	ms := []*broker.Message{msg("m3", "", 0), msg("m1", "", 0), msg("m0", "", 0), msg("m2", "", 0), msg("m1", "", 0)}
	ds, res, errs := e.inGroup(in, ms, applyAll)
	want := []Result{ResultApplied, ResultApplied, ResultDuplicate, ResultApplied, ResultDuplicate}
	for i := range ds {
		if res[i] != want[i] || errs[i] != nil || e.settled(ds[i]) != "ack" {
			t.Errorf("%s: %v, %v, settled %q; want %v", ms[i].ID, res[i], errs[i], e.settled(ds[i]), want[i])
		}
	}
	c := e.db.committed()
	if last := c[len(c)-1]; !slices.Equal(last, []string{"m1", "m2", "m3"}) {
		t.Errorf("transactions %q: want the last to claim m1, m2 and m3, in ID order", c)
	}
	if st := e.db.view(); st.effects["m1"] != 1 || st.effects["m0"] != 1 {
		t.Errorf("effects %v", st.effects)
	}
	if s := in.Stats(); s.Commits != 3 || s.Processed != 5 || s.Duplicates != 2 || s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestGroupOneBad: a delivery whose handler fails is rolled back and
// settled alone, as Handle settles it, and the others are tried again
// without it: each applied once.
func TestGroupOneBad(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{Batch: 10})
	boom := errors.New("boom")
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		if err := tx.apply(d.Message.ID); err != nil {
			return err
		}
		switch d.Message.ID {
		case "m2":
			return boom
		case "m3":
			return broker.Permanent(boom)
		case "m4":
			return &ParkError{Reason: "later", Now: true}
		}
		return nil
	}
	ms := []*broker.Message{msg("m1", "", 0), msg("m2", "", 0), msg("m3", "", 0), msg("m4", "", 0), msg("m5", "", 0), msg("bad\x00", "", 0)}
	ds, res, errs := e.inGroup(in, ms, h)
	want := []Result{ResultApplied, ResultFailed, ResultDeadLettered, ResultParked, ResultApplied, ResultDeadLettered}
	settled := []string{"ack", "nack", "dead-letter: ", "ack", "ack", "dead-letter: "}
	for i := range ds {
		if res[i] != want[i] || !strings.HasPrefix(e.settled(ds[i]), settled[i]) {
			t.Errorf("%q: %v, %v, settled %q; want %v", ms[i].ID, res[i], errs[i], e.settled(ds[i]), want[i])
		}
	}
	if !errors.Is(errs[1], boom) || !errors.Is(errs[2], boom) || !errors.Is(errs[5], ErrInvalidID) {
		t.Errorf("errors %v", errs)
	}
	st := e.db.view()
	if !slices.Equal(slices.Sorted(maps.Keys(st.effects)), []string{"m1", "m5"}) || st.effects["m1"] != 1 || st.effects["m5"] != 1 {
		t.Errorf("effects %v: want m1 and m5, once each", st.effects)
	}
	c := e.db.committed()
	if last := c[len(c)-1]; !slices.Equal(last, []string{"m1", "m5"}) {
		t.Errorf("transactions %q", c)
	}
}

// TestGroupStoreFailures: a shared transaction whose store fails nacks
// all its deliveries; one that conflicts is tried again at once, whole;
// one whose claim the store refuses for a value of one message
// (ErrData) is handled one delivery at a time, which settles that one
// for good and applies the others.
func TestGroupStoreFailures(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{Batch: 10})
	e.db.failNext("Commit", nil, errInject) // the gate's commits, the group's fails
	ms := []*broker.Message{msg("a1", "", 0), msg("a2", "", 0)}
	ds, res, errs := e.inGroup(in, ms, applyAll)
	for i := range ds {
		if res[i] != ResultFailed || !errors.Is(errs[i], errInject) || e.settled(ds[i]) != "nack" {
			t.Errorf("%s: %v, %v, settled %q", ms[i].ID, res[i], errs[i], e.settled(ds[i]))
		}
	}
	if s := in.Stats(); s.StoreErrors != 1 || len(e.db.view().effects) != 0 {
		t.Errorf("stats %+v, effects %v", s, e.db.view().effects)
	}

	e = newEnv(t, testCaps)
	in = e.inbox(Options{Batch: 10})
	e.db.failNext("Commit", nil, errFakeCon)
	ds, res, errs = e.inGroup(in, ms, applyAll)
	for i := range ds {
		if res[i] != ResultApplied || errs[i] != nil || e.settled(ds[i]) != "ack" {
			t.Errorf("conflict, %s: %v, %v, settled %q", ms[i].ID, res[i], errs[i], e.settled(ds[i]))
		}
	}
	if s := in.Stats(); s.Conflicts != 1 || e.db.view().effects["a1"] != 1 {
		t.Errorf("stats %+v, effects %v", s, e.db.view().effects)
	}

	e = newEnv(t, testCaps)
	in = e.inbox(Options{Batch: 10})
	data := seam.DataError(errInject)
	// The gate's claim, the group's (refused), then one by one: a1's,
	// a2's (refused), a3's.
	e.db.failNext("BeginClaim", nil, data, nil, data)
	ms = []*broker.Message{msg("a1", "", 0), msg("a2", "", 0), msg("a3", "", 0)}
	ds, res, errs = e.inGroup(in, ms, applyAll)
	want := []Result{ResultApplied, ResultDeadLettered, ResultApplied}
	for i := range ds {
		if res[i] != want[i] {
			t.Errorf("data error, %s: %v, %v, settled %q; want %v", ms[i].ID, res[i], errs[i], e.settled(ds[i]), want[i])
		}
	}
	if !errors.Is(errs[1], ErrData) {
		t.Errorf("a2: %v, want ErrData", errs[1])
	}
}

// TestGroupVersioned: a shared transaction behind version checks takes
// the locks of all its aggregates at once, before its first version
// check, and not again; an early event held in it is applied by its
// predecessor in the same transaction.
func TestGroupVersioned(t *testing.T) {
	e, in := earlyEnv(t, Options{Batch: 10})
	ms := []*broker.Message{event("b", 1), event("a", 1), event("a", 3), event("a", 2)}
	ds, res, errs := e.inGroup(in, ms, applyVersioned)
	want := []Result{ResultApplied, ResultApplied, ResultEarly, ResultApplied}
	for i := range ds {
		if res[i] != want[i] || errs[i] != nil || e.settled(ds[i]) != "ack" {
			t.Errorf("%s: %v, %v, settled %q; want %v", ms[i].ID, res[i], errs[i], e.settled(ds[i]), want[i])
		}
	}
	ops := e.db.lastOps
	lock := slices.Index(ops, "Lock a,b")
	if lock < 0 || lock > slices.IndexFunc(ops, func(op string) bool { return strings.HasPrefix(op, "CheckVersion") }) ||
		slices.Contains(ops, "Lock a") || slices.Contains(ops, "Lock b") {
		t.Errorf("store calls %q: want the aggregates locked once, first", ops)
	}
	st := e.db.view()
	if !slices.Equal(st.log, []string{"b-v1", "a-v1", "a-v2", "a-v3"}) || st.versions["accounts"]["a"] != 3 || len(st.early) != 0 {
		t.Errorf("applied %v, versions %v, held %v", st.log, st.versions["accounts"], st.early)
	}
	if s := in.Stats(); s.Early != 1 || s.EarlyApplied != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestGroupAckAfterCommit: a shared transaction's deliveries are
// acknowledged with one driver call after its commit; when it fails,
// each reports ErrAckAfterCommit, and their copies are duplicates.
func TestGroupAckAfterCommit(t *testing.T) {
	e := newEnv(t, testCaps)
	in := e.inbox(Options{Batch: 10})
	e.sub.failAcks = 1 // the gate's delivery is detached: the group's ack
	ms := []*broker.Message{msg("m1", "", 0), msg("m2", "", 0)}
	_, res, errs := e.inGroup(in, ms, applyAll)
	for i := range ms {
		if res[i] != ResultApplied || !errors.Is(errs[i], ErrAckAfterCommit) {
			t.Errorf("%s: %v, %v", ms[i].ID, res[i], errs[i])
		}
	}
	if s := in.Stats(); s.AckFailures != 2 {
		t.Errorf("stats %+v", s)
	}
	if _, r, err := e.handle(in, msg("m2", "", 0), applyAll); r != ResultDuplicate || err != nil {
		t.Errorf("copy: %v, %v", r, err)
	}
}

// TestGroupHeldAndStalled: in a shared transaction, a message of an
// aggregate with a parked message is held (and its aggregate not
// locked), and a held successor whose handler fails when its predecessor
// is applied is tried again after the commit.
func TestGroupHeldAndStalled(t *testing.T) {
	e, in := earlyEnv(t, Options{Batch: 10})
	failed := false
	h := func(ctx context.Context, tx *fakeTx, d *broker.Delivery) error {
		switch {
		case d.Message.ID == "a-v1":
			return &ParkError{Reason: "not now", Now: true}
		case d.Message.ID == "b-v3" && !failed:
			failed = true
			return errors.New("b-v3 broken once")
		}
		return applyVersioned(ctx, tx, d)
	}
	e.wantResult(in, event("a", 1), h, ResultParked, "ack")
	e.wantResult(in, event("b", 1), h, ResultApplied, "ack")
	e.wantResult(in, event("b", 3), h, ResultEarly, "ack")
	ms := []*broker.Message{event("a", 2), event("b", 2)}
	ds, res, errs := e.inGroup(in, ms, h)
	want := []Result{ResultHeld, ResultApplied}
	for i := range ds {
		if res[i] != want[i] || errs[i] != nil || e.settled(ds[i]) != "ack" {
			t.Errorf("%s: %v, %v, settled %q; want %v", ms[i].ID, res[i], errs[i], e.settled(ds[i]), want[i])
		}
	}
	st := e.db.view()
	if !failed || !slices.Equal(st.log, []string{"b-v1", "b-v2", "b-v3"}) || st.versions["accounts"]["b"] != 3 || len(st.early) != 0 {
		t.Errorf("applied %v, versions %v, held %v", st.log, st.versions["accounts"], st.early)
	}
	if p, _ := in.Parked(t.Context(), ParkedFilter{}); len(p) != 2 || p[1].MessageID != "a-v2" {
		t.Errorf("parked %+v", p)
	}
	if s := in.Stats(); s.EarlyApplied != 1 || s.Held != 1 {
		t.Errorf("stats %+v", s)
	}
}

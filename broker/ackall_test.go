package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// batchSub is a stubSub whose SendAcks records each call's IDs and fails
// the IDs listed in fail, per ID (a *driver.BatchError).
type batchSub struct {
	stubSub
	calls [][]driver.AckID
	fail  map[driver.AckID]error
}

var errGone = errors.New("receipt handle expired")

func (s *batchSub) SendAcks(_ context.Context, ids []driver.AckID) error {
	s.calls = append(s.calls, append([]driver.AckID(nil), ids...))
	errs := make([]error, len(ids))
	for i, id := range ids {
		errs[i] = s.fail[id]
		delete(s.fail, id) // fails once
	}
	return driver.BatchErrors(errs)
}

func (s *batchSub) Classify(err error) driver.ErrorInfo {
	if errors.Is(err, errGone) {
		return driver.ErrorInfo{Code: driver.LockLost}
	}
	return s.stubSub.Classify(err)
}

func TestAckAll(t *testing.T) {
	ctx := context.Background()
	var msgs []*driver.Message
	for i := range 6 {
		msgs = append(msgs, &driver.Message{ID: fmt.Sprint("m", i), AckID: i})
	}
	d := &batchSub{stubSub: stubSub{msgs: msgs}, fail: map[driver.AckID]error{2: errGone, 4: errTransient}}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ds, err := sub.Receive(ctx, 6)
	if err != nil || len(ds) != 6 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	if err := ds[1].Ack(ctx); err != nil { // settled before: left out
		t.Fatal(err)
	}
	detached := NewDetachedDelivery(&Message{ID: "x"}, 1)
	errs := AckAll(ctx, append(ds, ds[0], detached)) // ds[0] twice
	if len(d.calls) != 2 || fmt.Sprint(d.calls[1]) != "[0 2 3 4 5]" {
		t.Fatalf("SendAcks calls %v, want [1] then one with [0 2 3 4 5]", d.calls)
	}
	if len(errs) != 8 {
		t.Fatalf("%d errors for 8 deliveries", len(errs))
	}
	for i, err := range errs {
		switch i {
		case 2:
			if !errors.Is(err, ErrLockLost) || !ds[2].Settled() {
				t.Errorf("ds[2]: %v, settled %v; want ErrLockLost, settled", err, ds[2].Settled())
			}
		case 4:
			if !errors.Is(err, ErrRetryable) || ds[4].Settled() {
				t.Errorf("ds[4]: %v, settled %v; want ErrRetryable, unsettled", err, ds[4].Settled())
			}
		default:
			if err != nil {
				t.Errorf("delivery %d: %v", i, err)
			}
		}
	}
	if !detached.Settled() || !ds[5].Settled() || !ds[0].Settled() {
		t.Errorf("acknowledged deliveries not settled")
	}
	// The failed one again, alone; then nothing left to send.
	if errs := AckAll(ctx, ds); errs != nil || fmt.Sprint(d.calls[2]) != "[4]" {
		t.Errorf("again: %v, calls %v", errs, d.calls)
	}
	if errs := AckAll(ctx, ds); errs != nil || len(d.calls) != 3 {
		t.Errorf("all settled: %v, calls %v", errs, d.calls)
	}
	sub.Close()
	d.msgs = []*driver.Message{{ID: "late", AckID: 9}}
	if errs := AckAll(ctx, []*Delivery{{Message: &Message{ID: "y"}, sub: sub}}); !errors.Is(errs[0], ErrClosed) {
		t.Errorf("closed: %v", errs)
	}
}

// TestAckAllOneSubscription: deliveries all of one subscription (AckAll's
// path without a map), copies among them: one SendAcks with each delivery
// once, copies sharing the outcome of their first, and AckAll's marks
// cleared for the next call.
func TestAckAllOneSubscription(t *testing.T) {
	ctx := context.Background()
	var msgs []*driver.Message
	for i := range 3 {
		msgs = append(msgs, &driver.Message{ID: fmt.Sprint("m", i), AckID: i})
	}
	d := &batchSub{stubSub: stubSub{msgs: msgs}, fail: map[driver.AckID]error{2: errTransient}}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ds, err := sub.Receive(ctx, 3)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	errs := AckAll(ctx, []*Delivery{ds[2], ds[0], ds[2], ds[1], ds[0]})
	if len(d.calls) != 1 || fmt.Sprint(d.calls[0]) != "[2 0 1]" {
		t.Fatalf("SendAcks calls %v, want one with [2 0 1]", d.calls)
	}
	for i, err := range errs {
		if want := i == 0 || i == 2; want != errors.Is(err, ErrRetryable) || !want && err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	if ds[2].Settled() || !ds[0].Settled() || !ds[1].Settled() {
		t.Errorf("settled: %v %v %v, want true true false", ds[0].Settled(), ds[1].Settled(), ds[2].Settled())
	}
	if errs := AckAll(ctx, []*Delivery{ds[2], ds[2]}); errs != nil || fmt.Sprint(d.calls[1:]) != "[[2]]" {
		t.Errorf("again: %v, calls %v", errs, d.calls)
	}
	for _, dl := range ds {
		if dl.ackAllAt != 0 {
			t.Errorf("%s: AckAll's mark left set", dl.Message.ID)
		}
	}
}

// gateSub is a stubSub whose first SendAcks waits for gate, recording the
// IDs of each call.
type gateSub struct {
	stubSub
	entered chan struct{}
	gate    chan struct{}
	calls   chan []driver.AckID
}

func (s *gateSub) SendAcks(_ context.Context, ids []driver.AckID) error {
	s.calls <- append([]driver.AckID(nil), ids...)
	if ids[0] == 0 {
		close(s.entered)
		<-s.gate
	}
	return nil
}

// TestRunGroupsConcurrentAcks: acks of handlers that finish while another
// ack is in flight go out together, in one driver call, after it.
func TestRunGroupsConcurrentAcks(t *testing.T) {
	var msgs []*driver.Message
	for i := range 4 {
		msgs = append(msgs, &driver.Message{ID: fmt.Sprint("m", i), AckID: i})
	}
	d := &gateSub{stubSub: stubSub{msgs: msgs}, entered: make(chan struct{}), gate: make(chan struct{}), calls: make(chan []driver.AckID, 4)}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	queued := make(chan struct{}, 4)
	sub.ackQueued = func() { queued <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	var open sync.Once
	openGate := func() { open.Do(func() { close(d.gate) }) }
	defer func() { openGate(); cancel() }() // before Close, also on failure
	started := make(chan struct{}, 4)
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(ctx context.Context, dl *Delivery) error {
			started <- struct{}{}
			if dl.Message.ID != "m0" {
				<-first // the others finish once m0's ack is in flight
			}
			return nil
		}, &RunOptions{Concurrency: 4})
	}()
	for range 4 {
		<-started
	}
	// m0 first: its ack goes alone and waits at the gate.
	// (The other three wait for first.)
	<-d.entered
	close(first)
	for i := range 3 {
		select {
		case <-queued:
		case <-time.After(10 * time.Second): // a bound on failure, not a wait
			t.Fatalf("%d of 3 acks waited to join a group", i)
		}
	}
	openGate()
	if got := fmt.Sprint(<-d.calls); got != "[0]" {
		t.Errorf("first call %s, want [0]", got)
	}
	second := <-d.calls
	slices.SortFunc(second, func(a, b driver.AckID) int { return a.(int) - b.(int) })
	if got := fmt.Sprint(second); got != "[1 2 3]" {
		t.Errorf("second call %s, want the three acks issued meanwhile, [1 2 3]", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-d.calls:
		t.Errorf("a third call: %v", c)
	default:
	}
}

// ackNilSub is a repeatSub whose acks all succeed.
type ackNilSub struct{ repeatSub }

func (s *ackNilSub) SendAcks(context.Context, []driver.AckID) error { return nil }

// TestAckAllAllocatesPerBatch: an AckAll of one subscription's deliveries
// that all succeed allocates no slice of its own but the driver's IDs (and
// the settle timeout's context), however many deliveries it acks.
func TestAckAllAllocatesPerBatch(t *testing.T) {
	const n = 100
	d := &ackNilSub{}
	for i := range n {
		d.batch = append(d.batch, &driver.Message{ID: "m", AckID: i, Attempt: 1})
	}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx := context.Background()
	receive := testing.AllocsPerRun(20, func() {
		if _, err := sub.Receive(ctx, n); err != nil {
			t.Fatal(err)
		}
	})
	both := testing.AllocsPerRun(20, func() {
		ds, err := sub.Receive(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if errs := AckAll(ctx, ds); errs != nil {
			t.Fatal(errs)
		}
		if !ds[n-1].Settled() {
			t.Fatal("not settled")
		}
	})
	// The IDs, and SettleTimeout's context and timer (5 in all with Go
	// 1.26; 10 when AckAll kept its indexes and errors in slices).
	if allocs := both - receive; allocs > 5 {
		t.Errorf("AckAll of %d deliveries allocates %.0f objects, want at most 5", n, allocs)
	}
	t.Logf("AckAll of %d deliveries: %.0f allocations", n, both-receive)
}

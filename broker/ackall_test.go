package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

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

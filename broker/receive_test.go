package broker

import (
	"context"
	"testing"
	"unsafe"

	"github.com/wary-go/wary/broker/driver"
)

// repeatSub hands out the same messages on every receive.
type repeatSub struct {
	stubSub
	batch []*driver.Message
}

func (s *repeatSub) ReceiveBatch(context.Context, int) ([]*driver.Message, error) {
	return s.batch, nil
}

// native stands for an SDK's own message, which a received Message's As
// reaches.
type native struct{ id string }

func (n *native) As(i any) bool {
	p, ok := i.(**native)
	if ok {
		*p = n
	}
	return ok
}

// TestReceiveAllocatesPerBatch: what Receive allocates does not grow with
// the deliveries it returns (slabs, not one allocation a delivery), and a
// received Message's As reaches what the driver set in driver.Message.As.
func TestReceiveAllocatesPerBatch(t *testing.T) {
	const n = 100
	d := &repeatSub{}
	for i := range n {
		d.batch = append(d.batch, &driver.Message{ID: "m", Headers: Headers{}, AckID: i, Attempt: 1, As: &native{id: "n"}})
	}
	sub := NewSubscription(d, nil)
	defer sub.Close()
	ctx := context.Background()
	ds, err := sub.Receive(ctx, n)
	if err != nil || len(ds) != n {
		t.Fatalf("Receive: %d deliveries, %v", len(ds), err)
	}
	var got *native
	if !ds[n-1].Message.As(&got) || got != d.batch[n-1].As {
		t.Errorf("As reached %v, want the driver's %v", got, d.batch[n-1].As)
	}
	var other *int
	if ds[0].Message.As(&other) {
		t.Error("As accepted a type the driver does not")
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := sub.Receive(ctx, n); err != nil {
			t.Fatal(err)
		}
	})
	// The result slice, two slabs, the merged context: a handful, where
	// one a delivery would be 100 or more.
	if allocs > 10 {
		t.Errorf("Receive of %d deliveries allocates %.0f objects, want at most 10", n, allocs)
	}
	t.Logf("Receive of %d deliveries: %.0f allocations", n, allocs)
}

// TestDeliverySize: a Delivery and its Message, Receive's slab element,
// stay within 192 bytes (on 64-bit platforms), so that a slab of slabLen
// is a size class of the allocator, not rounded up.
func TestDeliverySize(t *testing.T) {
	if size := unsafe.Sizeof(deliveryAndMessage{}); size > 192 {
		t.Errorf("a Delivery and its Message take %d bytes, want at most 192", size)
	}
}

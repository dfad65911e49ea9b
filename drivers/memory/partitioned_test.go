package memory_test

import (
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/memory"
)

func TestPartitionedCumulativeRedeliveryOnClose(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.Partitioned, Partitions: 1})
	a := f.sub()
	f.publish(msg("r0", "k"), msg("r1", "k"), msg("r2", "k"), msg("r3", "k"))
	ds := poll(t, a, 10)
	if got := ids(ds); got != "[r0#1 r1#1 r2#1 r3#1]" {
		t.Fatalf("got %s, want every record in offset order", got)
	}
	// Ack r0 and r2: the commit point moves past r0 only.
	for _, i := range []int{0, 2} {
		if err := ds[i].Ack(bg); err != nil {
			t.Fatal(err)
		}
	}
	b := f.sub() // no partition for b: a still owns the only one
	if got := ids(poll(t, b, 10)); got != "[]" {
		t.Fatalf("consumer without a partition got %s", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// r1 and everything after it, acked r2 included, go to b.
	if got := ids(poll(t, b, 10)); got != "[r1#2 r2#2 r3#2]" {
		t.Fatalf("after close got %s, want [r1#2 r2#2 r3#2]", got)
	}
}

func TestPartitionedRebalance(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.Partitioned, Partitions: 2})
	a := f.sub()
	// Keyless records go round-robin: r0, r2 to partition 0, r1, r3 to 1.
	f.publish(msg("r0", ""), msg("r1", ""), msg("r2", ""), msg("r3", ""))
	ds := poll(t, a, 10)
	if len(ds) != 4 {
		t.Fatalf("got %s, want all four records", ids(ds))
	}
	byID := map[string]*broker.Delivery{}
	for _, d := range ds {
		byID[d.Message.ID] = d
	}
	// Partition 1 holds r1 and r3: ack r3, which cannot commit before r1.
	if err := byID["r3"].Ack(bg); err != nil {
		t.Fatal(err)
	}
	b := f.sub() // partition 1 moves to b
	if err := byID["r1"].Ack(bg); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("ack of a revoked record: %v, want ErrLockLost", err)
	}
	if err := byID["r0"].Ack(bg); err != nil { // partition 0 stays with a
		t.Fatal(err)
	}
	// r3 was acked but not committed: it returns with r1.
	if got := ids(poll(t, b, 10)); got != "[r1#2 r3#2]" {
		t.Fatalf("new owner got %s, want [r1#2 r3#2]", got)
	}
	if got := ids(poll(t, a, 10)); got != "[]" {
		t.Fatalf("old owner got %s", got)
	}
	if err := byID["r2"].Ack(bg); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionedKeyOrderAndNack(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.Partitioned})
	s := f.sub()
	f.publish(msg("x1", "x"), msg("x2", "x"), msg("x3", "x"))
	ds := poll(t, s, 10)
	if got := ids(ds); got != "[x1#1 x2#1 x3#1]" {
		t.Fatalf("got %s", got)
	}
	// Nack x1: only x1 comes back; x2 and x3 stay in flight.
	if err := ds[0].Nack(bg, 0); err != nil {
		t.Fatal(err)
	}
	if got := ids(poll(t, s, 10)); got != "[x1#2]" {
		t.Fatalf("got %s after a nack, want [x1#2]", got)
	}
	caps := s.Capabilities()
	if caps.AckModel != capability.AckCumulative || caps.LockTimeout != 0 || caps.LockExtendable || caps.DeliveryLimitMode != capability.LimitEmulated {
		t.Fatalf("capabilities %v", caps)
	}
}

func TestPartitionedLimitOnClose(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.Partitioned, Partitions: 1, DeliveryLimit: 1})
	dlq := f.dlq()
	a := f.sub()
	f.publish(msg("r0", ""), msg("r1", ""))
	ds := poll(t, a, 1)
	if got := ids(ds); got != "[r0#1]" {
		t.Fatalf("got %s", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// r0 was delivered once, the limit: it is dead-lettered, r1 is not.
	pollOne(t, dlq, "r0")
	b := f.sub()
	if got := ids(poll(t, b, 10)); got != "[r1#1]" {
		t.Fatalf("got %s", got)
	}
}

// TestPartitionedCountLostOnRevoke checks the emulated delivery count: it
// lives with the consumer, so after a revoke a record that was delivered
// three times comes back as attempt 2, not 4.
func TestPartitionedCountLostOnRevoke(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.Partitioned, Partitions: 1})
	a := f.sub()
	f.publish(msg("r0", "k"))
	for want := 1; want <= 3; want++ {
		d := pollOne(t, a, "r0")
		if d.Attempt != want {
			t.Fatalf("delivery %d reports attempt %d", want, d.Attempt)
		}
		if want < 3 {
			if err := d.Nack(bg, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := f.sub()
	if d := pollOne(t, b, "r0"); d.Attempt != 2 || !d.Redelivered {
		t.Fatalf("after the revoke: attempt %d redelivered %t, want attempt 2, redelivered", d.Attempt, d.Redelivered)
	}
}

package rabbit_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
)

// TestTopologyNames: the topology names its dead-letter exchange and queue
// (its own, or those it was given), and the partition queues; a
// topology without a dead-letter queue names none.
func TestTopologyNames(t *testing.T) {
	for _, c := range []struct {
		top      rabbit.Topology
		dlx, dlq string
	}{
		{rabbit.Topology{Queue: "q"}, "", ""},
		{rabbit.Topology{Queue: "q", DeadLetterQueueName: "dq"}, "", ""},
		{rabbit.Topology{Queue: "q", DeadLetter: true}, "q.dlx", "q.dlq"},
		{rabbit.Topology{Queue: "q", DeadLetter: true, DeadLetterQueueName: "dq"}, "q.dlx", "dq"},
		{rabbit.Topology{Queue: "q", DeadLetterExchangeName: "x"}, "x", ""},
		{rabbit.Topology{Queue: "q", DeadLetterExchangeName: "x", DeadLetterQueueName: "dq"}, "x", "dq"},
		{rabbit.Topology{Queue: "q", DeadLetterExchangeName: "q.dlx"}, "q.dlx", "q.dlq"},
	} {
		if dlx, dlq := c.top.DeadLetterExchange(), c.top.DeadLetterQueue(); dlx != c.dlx || dlq != c.dlq {
			t.Errorf("%+v: dead-letter exchange %q, queue %q; want %q, %q", c.top, dlx, dlq, c.dlx, c.dlq)
		}
	}
	if got := (rabbit.Topology{Queue: "q", Partitions: 3}).PartitionQueues(); !slices.Equal(got, []string{"q.0", "q.1", "q.2"}) {
		t.Errorf("partition queues %v", got)
	}
}

// TestOpenDeadLettersNeedsADeadLetterQueue: a topology without a
// dead-letter queue has none to read (ErrInvalid, before any I/O).
func TestOpenDeadLettersNeedsADeadLetterQueue(t *testing.T) {
	for _, top := range []rabbit.Topology{
		{Exchange: "e", Queue: "q"},
		{Exchange: "e", Queue: "q", DeadLetterExchangeName: "elsewhere"},
	} {
		_, err := rabbit.OpenDeadLetters(context.Background(), nil, top, nil)
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", top, err)
		}
	}
}

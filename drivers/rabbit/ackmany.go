package rabbit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// SendAcks acknowledges the deliveries with as few frames as it can: per
// channel, one basic.ack with multiple=true up to the highest tag T such
// that every unsettled delivery of that channel up to T is among ids (and
// none is being settled by another call), then one basic.ack per tag for
// the rest. A delivery settled already, or whose channel is gone, is
// reported alone as LockLost.
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	errs := make([]error, len(ids))
	byCons := map[*consumer][]int{}
	var order []*consumer
	for i, id := range ids {
		a := id.(*ackID)
		if _, ok := byCons[a.c]; !ok {
			order = append(order, a.c)
		}
		byCons[a.c] = append(byCons[a.c], i)
	}
	for _, c := range order {
		at := byCons[c]
		tags := make([]uint64, len(at))
		for k, i := range at {
			tags[k] = ids[i].(*ackID).tag
		}
		upTo, singles, lost := c.takeAll(tags)
		err := s.ackFrames(c, upTo, singles)
		for k, i := range at {
			errs[i] = err
			if lost[k] {
				errs[i] = errLockLost
			}
		}
	}
	return driver.BatchErrors(errs)
}

// ackFrames sends the acks takeAll planned, and ends their settling.
func (s *subscription) ackFrames(c *consumer, upTo uint64, singles []uint64) error {
	defer c.sent(singles...)
	if upTo > 0 {
		defer c.sent(upTo)
	}
	var err error
	if upTo > 0 {
		s.ackFramesSent.Add(1)
		err = c.ch.Ack(upTo, true)
	}
	for _, t := range singles {
		if err != nil {
			break
		}
		s.ackFramesSent.Add(1)
		err = c.ch.Ack(t, false)
	}
	if err != nil && (errors.Is(err, amqp.ErrClosed) || c.ch.IsClosed()) {
		return fmt.Errorf("%w: %w", errLockLost, err)
	}
	return err
}

// takeAll claims tags for acknowledging, as take does each. It returns the
// tag to ack with multiple=true (0: none), which covers the claimed tags up
// to it, the tags to ack one by one, and, by position in tags, those
// already settled or of a channel that is gone.
func (c *consumer) takeAll(tags []uint64) (upTo uint64, singles []uint64, lost []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lost = make([]bool, len(tags))
	mine := make(map[uint64]bool, len(tags))
	var claimed []uint64
	for k, t := range tags {
		if _, ok := c.tags[t]; !ok {
			lost[k] = !mine[t] // a second copy of a tag shares the first's outcome
			continue
		}
		delete(c.tags, t)
		mine[t] = true
		claimed = append(claimed, t)
	}
	if len(claimed) == 0 {
		return 0, nil, lost
	}
	slices.Sort(claimed)
	// A multiple ack may cover only what this call claimed: every tag up
	// to it must have been registered (none still on its way from the
	// channel to a receive), and no lower tag may be unsettled or being
	// settled by another call.
	limit := claimed[len(claimed)-1]
	if c.registered != c.maxTag {
		limit = 0
	}
	for t := range c.tags {
		limit = min(limit, t-1)
	}
	for t := range c.sending {
		limit = min(limit, t-1)
	}
	n, _ := slices.BinarySearch(claimed, limit+1) // claimed[:n] <= limit
	if n >= 2 {
		upTo, claimed = claimed[n-1], claimed[n:]
		c.sending[upTo] = struct{}{}
	}
	for _, t := range claimed {
		c.sending[t] = struct{}{}
	}
	return upTo, claimed, lost
}

package broker

import (
	"context"
	"sync"
)

// ackGroup groups the acks the handler loop sends for concurrent
// handlers: an ack issued while another is in flight waits for it and then
// goes out with every other ack that waited, in one AckAll (one driver
// call). An ack issued alone goes out at once, so grouping adds no delay.
type ackGroup struct {
	mu     sync.Mutex
	busy   bool      // an AckAll is in flight
	queue  []*ackReq // acks waiting for it
	queued func()    // called for each ack that waits (tests)
}

type ackReq struct {
	d    *Delivery
	err  error
	lead bool          // this request's goroutine sends the next group
	wake chan struct{} // done, or lead
}

// ack acknowledges d, in a group with acks issued meanwhile, and returns
// what Ack would have returned for d.
func (g *ackGroup) ack(ctx context.Context, d *Delivery) error {
	req := &ackReq{d: d, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if g.busy {
		if g.queued != nil {
			g.queued()
		}
		g.mu.Unlock()
		<-req.wake
		if !req.lead {
			return req.err
		}
		g.mu.Lock()
	}
	// This goroutine sends the group: every ack waiting, its own included.
	g.busy = true
	reqs := g.queue
	g.queue = nil
	g.mu.Unlock()
	ds := make([]*Delivery, len(reqs))
	for i, r := range reqs {
		ds[i] = r.d
	}
	errs := AckAll(ctx, ds)
	for i, r := range reqs {
		if errs != nil {
			r.err = errs[i]
		}
		if r != req {
			r.wake <- struct{}{}
		}
	}
	// Hand the next group, if acks queued meanwhile, to one of them, so
	// that this handler's goroutine moves on.
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		next.lead = true
		g.mu.Unlock()
		next.wake <- struct{}{}
	} else {
		g.busy = false
		g.mu.Unlock()
	}
	return req.err
}

package servicebus

import (
	"context"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// fetcher receives for a subscription without sessions. The SDK creates
// its receiver link (and negotiates the claim) inside the first
// ReceiveMessages call, and a deadline that ends during that negotiation
// makes it recycle the whole connection, failing every settle in flight on
// it. So the SDK is only ever called with the subscription's own context:
// a receive call that stops waiting leaves the fetch running, and its
// messages go to the next receive call (unclaimed, they return when their
// locks expire). It fetches only while someone receives.
type fetcher struct {
	r    *azservicebus.Receiver
	ctx  context.Context
	mu   sync.Mutex
	busy bool
	buf  []*azservicebus.ReceivedMessage
	err  error
	cond chan struct{} // closed when buf or err changes
}

func newFetcher(ctx context.Context, r *azservicebus.Receiver) *fetcher {
	return &fetcher{r: r, ctx: ctx, cond: make(chan struct{})}
}

func (f *fetcher) signal() {
	close(f.cond)
	f.cond = make(chan struct{})
}

// receive returns buffered messages, or starts a fetch of up to max and
// waits for it up to wait.
func (f *fetcher) receive(ctx context.Context, max int, wait time.Duration) ([]*azservicebus.ReceivedMessage, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		f.mu.Lock()
		if len(f.buf) > 0 {
			n := min(max, len(f.buf))
			out := f.buf[:n:n]
			f.buf = f.buf[n:]
			f.mu.Unlock()
			return out, nil
		}
		if f.err != nil {
			err := f.err
			f.err = nil
			f.mu.Unlock()
			return nil, err
		}
		if !f.busy {
			f.busy = true
			go f.fetch(max)
		}
		cond := f.cond
		f.mu.Unlock()
		select {
		case <-cond:
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *fetcher) fetch(max int) {
	msgs, err := f.r.ReceiveMessages(f.ctx, max, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy = false
	f.buf = append(f.buf, msgs...)
	if err != nil && f.ctx.Err() == nil {
		f.err = err
	}
	f.signal()
}

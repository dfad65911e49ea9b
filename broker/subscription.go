package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// SubscriptionOptions configures a Subscription. Nil means defaults.
type SubscriptionOptions struct {
	// Telemetry receives receive-retry and handler events, spans, metrics.
	Telemetry
	// SettleTimeout bounds a settle whose ctx has no deadline, and those
	// Run and Delivery.Retry send once a handler returned, even after its
	// context ended (default 30s, or the driver's).
	SettleTimeout time.Duration
}

// settleCtx bounds a settle whose ctx has no deadline by SettleTimeout.
func (s *Subscription) settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.settleTimeout)
}

// defaultSettleTimeout is SubscriptionOptions.SettleTimeout's default.
const defaultSettleTimeout = 30 * time.Second

// Subscription receives deliveries from a broker. Create one with a
// driver's constructor or OpenSubscription. Subscriptions on one broker
// subscription compete; each is safe for concurrent use.
type Subscription struct {
	d      driver.Subscription
	caps   capability.Subscription
	logger *slog.Logger
	// settleTimeout is SubscriptionOptions.SettleTimeout.
	settleTimeout time.Duration
	tel           *tel

	closeCtx  context.Context
	cancel    context.CancelFunc
	mu        sync.RWMutex // held for reading by every call into the driver
	ackMu     sync.Mutex   // held by AckAll while it holds deliveries' locks
	ackQueued func()       // tests: called when Run's ack waits to join a group
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// NewSubscription wraps a driver subscription, for driver packages.
func NewSubscription(d driver.Subscription, opts *SubscriptionOptions) *Subscription {
	if opts == nil {
		opts = &SubscriptionOptions{}
	}
	tel := opts.Telemetry.withDefaults()
	s := &Subscription{d: d, caps: d.Capabilities(), logger: tel.Logger, settleTimeout: opts.SettleTimeout}
	if s.settleTimeout <= 0 {
		s.settleTimeout = defaultSettleTimeout
	}
	s.tel = newTel(d, tel.TracerProvider, tel.MeterProvider, false)
	s.closeCtx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Capabilities returns what the broker promises for this subscription.
func (s *Subscription) Capabilities() capability.Subscription { return s.caps }

var errSubClosed = errors.New("subscription is closed")

// Receive waits for at least one delivery and returns up to maxMessages
// (below 1: 1). It returns ErrClosed once the subscription is closed, the
// context's error when ctx is done first, and transient failures as they
// are (ErrRetryable), which Run retries.
func (s *Subscription) Receive(ctx context.Context, maxMessages int) ([]*Delivery, error) {
	if maxMessages < 1 {
		maxMessages = 1
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, newError("receive", driver.Closed, false, errSubClosed)
	}
	rctx, stop := mergeDone(ctx, s.closeCtx)
	defer stop()
	for {
		dms, err := s.d.ReceiveBatch(rctx, maxMessages)
		if err != nil {
			if s.closeCtx.Err() != nil && ctx.Err() == nil {
				return nil, newError("receive", driver.Closed, false, errSubClosed)
			}
			return nil, wrapErr("receive", s.d.Classify, err)
		}
		if len(dms) > 0 {
			// Deliveries and their messages are allocated in slabs of
			// up to slabLen (small enough to stay in the allocator's
			// size classes), not one by one.
			out := make([]*Delivery, len(dms))
			var slab []deliveryAndMessage
			for i, dm := range dms {
				if len(slab) == 0 {
					slab = make([]deliveryAndMessage, min(slabLen, len(dms)-i))
				}
				out[i] = s.initDelivery(&slab[0], dm)
				slab = slab[1:]
			}
			s.tel.counted(ctx, len(out))
			return out, nil
		}
		if err := rctx.Err(); err != nil {
			if s.closeCtx.Err() != nil && ctx.Err() == nil {
				return nil, newError("receive", driver.Closed, false, errSubClosed)
			}
			return nil, wrapErr("receive", s.d.Classify, err)
		}
	}
}

// slabLen is how many deliveries Receive allocates at once.
const slabLen = 64

// deliveryAndMessage holds a Delivery and its Message in one allocation.
type deliveryAndMessage struct {
	d Delivery
	m Message
}

func (s *Subscription) initDelivery(dm2 *deliveryAndMessage, dm *driver.Message) *Delivery {
	attempt := dm.Attempt
	if attempt < 1 {
		attempt = 1
	}
	dm2.m = Message{ID: dm.ID, Key: dm.Key, Headers: dm.Headers, Body: dm.Body, as: dm.As}
	d := &dm2.d
	d.Message = &dm2.m
	d.Attempt = attempt
	d.Redelivered = dm.Redelivered || attempt > 1
	d.PublishTime = dm.PublishTime
	d.sub = s
	d.ackID[0] = dm.AckID
	return d
}

// Peeked is a message Subscription.Peek shows: it was not delivered, and
// cannot be settled.
type Peeked struct {
	Message     *Message
	Attempt     int // deliveries so far (at least 1), as the broker counts them
	PublishTime time.Time
}

// Peek returns up to maxMessages messages after those the previous Peek
// returned, without delivering them (no lock, no delivery count); none
// means no more. A driver that cannot peek returns errors.ErrUnsupported.
func (s *Subscription) Peek(ctx context.Context, maxMessages int) ([]Peeked, error) {
	p, ok := s.d.(driver.Peeker)
	if !ok {
		return nil, newError("peek", driver.Invalid, false, fmt.Errorf("peek: %w", errors.ErrUnsupported))
	}
	maxMessages = max(maxMessages, 1)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, newError("peek", driver.Closed, false, errSubClosed)
	}
	dms, err := p.Peek(ctx, maxMessages)
	if err != nil {
		return nil, wrapErr("peek", s.d.Classify, err)
	}
	out := make([]Peeked, len(dms))
	for i, dm := range dms {
		out[i] = Peeked{
			Message:     &Message{ID: dm.ID, Key: dm.Key, Headers: dm.Headers, Body: dm.Body, as: dm.As},
			Attempt:     max(dm.Attempt, 1),
			PublishTime: dm.PublishTime,
		}
	}
	return out, nil
}

// setPrefetch passes n to a driver that implements driver.Prefetcher.
func (s *Subscription) setPrefetch(n int) error {
	p, ok := s.d.(driver.Prefetcher)
	if !ok {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return newError("prefetch", driver.Closed, false, errSubClosed)
	}
	return wrapErr("prefetch", s.d.Classify, p.SetPrefetch(n))
}

// As exposes the driver's own types; see the driver's package doc.
func (s *Subscription) As(i any) bool { return s.d.As(i) }

// ErrorAs reaches the SDK's error type behind an error this subscription
// (or one of its deliveries) returned.
func (s *Subscription) ErrorAs(err error, i any) bool {
	var be *Error
	if errors.As(err, &be) {
		err = be.err
	}
	if err == nil {
		return false
	}
	return s.d.ErrorAs(err, i)
}

// Close stops Receive calls in progress (they return ErrClosed), waits for
// them, and releases the driver; unsettled deliveries go back to the broker.
// Settling after Close is ErrClosed. Closing twice returns the first result.
func (s *Subscription) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		s.closeErr = wrapErr("close", s.d.Classify, s.d.Close())
	})
	return s.closeErr
}

// mergeDone returns a context done when either a or b is done, carrying a's
// values.
func mergeDone(a, b context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

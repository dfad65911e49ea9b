package servicebus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// SubscriptionOptions configures OpenSubscription. Nil means defaults.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (logger).
	broker.SubscriptionOptions
	// Admin, if not nil, reads the entity's properties when the
	// subscription opens (a missing entity is ErrNotFound).
	Admin *admin.Client
	// Entity declares the entity's properties when Admin is nil.
	Entity SubscriptionProperties
	// MaxSessions is how many sessions one subscription holds at once, on
	// an entity that requires sessions (default 8): each is a session
	// receiver accepted with AcceptNextSession.
	MaxSessions int
	// SessionIdle is how long a held session may go without a message
	// before the subscription releases it, so that other consumers (and
	// sessions) get a turn (default 1s).
	SessionIdle time.Duration
	// ReceiveWait is how long one receive waits for a first message before
	// it returns empty (default 1s).
	ReceiveWait time.Duration
	// CloseClient: Close also closes the client (the URL opener's
	// subscriptions own theirs).
	CloseClient bool

	via via // how Entity was given (the URL opener's), for the Source
}

// entityPath is a parsed subscription address.
type entityPath struct {
	queue, topic, sub string
	dlq               bool
}

func (e entityPath) String() string {
	s := e.queue
	if e.queue == "" {
		s = e.topic + "/Subscriptions/" + e.sub
	}
	if e.dlq {
		s += "/$DeadLetterQueue"
	}
	return s
}

// parseEntity reads "queue", "topic/Subscriptions/sub", either followed
// by "/$DeadLetterQueue" (the path segments' case does not matter).
func parseEntity(s string) (entityPath, error) {
	parts := strings.Split(s, "/")
	var e entityPath
	if n := len(parts); n > 1 && strings.EqualFold(parts[n-1], "$DeadLetterQueue") {
		e.dlq = true
		parts = parts[:n-1]
	}
	switch {
	case len(parts) == 1 && parts[0] != "":
		e.queue = parts[0]
	case len(parts) == 3 && strings.EqualFold(parts[1], "Subscriptions") && parts[0] != "" && parts[2] != "":
		e.topic, e.sub = parts[0], parts[2]
	default:
		return e, driver.Invalidf("servicebus: %q is not a queue, <topic>/Subscriptions/<name>, or either with /$DeadLetterQueue", s)
	}
	return e, nil
}

// OpenSubscription opens a subscription on entity: a queue ("orders"), a
// topic subscription ("orders/Subscriptions/billing"), or the dead-letter
// queue of either (".../$DeadLetterQueue"). On an entity that requires
// sessions it holds up to MaxSessions sessions at once (see the package
// doc). ctx bounds the open's reads through SubscriptionOptions.Admin (the
// driver sets no timeout of its own), not the subscription's life.
func OpenSubscription(ctx context.Context, client *azservicebus.Client, entity string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openSubscription(ctx, client, entity, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &s.o.SubscriptionOptions), nil
}

// OpenDeadLetters opens the dead-letter sub-queue of entity: a queue
// ("orders") or a topic subscription ("orders/Subscriptions/billing"), as
// OpenSubscription opens entity+"/$DeadLetterQueue", with the same
// options:
//
//	dl, err := servicebus.OpenDeadLetters(ctx, client, "orders/Subscriptions/billing",
//		&servicebus.SubscriptionOptions{Admin: ac})
//
// Each dead letter reports its DeadLetterReason in the header
// driver.HeaderDeadLetterReason. A dead-letter queue has no sessions, and
// no dead-letter queue of its own (its Delivery.DeadLetter is not
// supported); an entity that names a dead-letter queue already is an
// error matching broker.ErrInvalid. With SubscriptionOptions.Admin, the
// properties read are entity's (a missing entity is broker.ErrNotFound).
// ctx bounds those reads, not the subscription's life.
func OpenDeadLetters(ctx context.Context, client *azservicebus.Client, entity string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	dl, err := deadLetterEntity(entity)
	if err != nil {
		return nil, err
	}
	return OpenSubscription(ctx, client, dl, opts)
}

// deadLetterEntity returns the path of entity's dead-letter queue.
func deadLetterEntity(entity string) (string, error) {
	e, err := parseEntity(entity)
	if err != nil {
		return "", err
	}
	if e.dlq {
		return "", driver.Invalidf("servicebus: %q is a dead-letter queue, which has no dead-letter queue of its own: open the dead letters of the queue or subscription it belongs to", entity)
	}
	e.dlq = true
	return e.String(), nil
}

type subscription struct {
	client   *azservicebus.Client
	path     entityPath
	caps     capability.Subscription
	o        SubscriptionOptions
	props    entityProps
	sessions bool

	recv     *azservicebus.Receiver // without sessions
	fetch    *fetcher
	pool     *sessionPool // with sessions
	senderMu sync.Mutex
	sender   *azservicebus.Sender // for Nack(delay) copies, opened on first use

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	closeOnce sync.Once
}

func openSubscription(ctx context.Context, client *azservicebus.Client, entity string, o SubscriptionOptions) (*subscription, error) {
	if client == nil {
		return nil, driver.Invalidf("servicebus: nil client")
	}
	path, err := parseEntity(entity)
	if err != nil {
		return nil, err
	}
	if o.MaxSessions < 0 || o.SessionIdle < 0 || o.ReceiveWait < 0 || o.SettleTimeout < 0 {
		return nil, driver.Invalidf("servicebus: negative SubscriptionOptions field")
	}
	declared := o.Entity.entity()
	if err := declared.validate(); err != nil {
		return nil, err
	}
	props, read := declared, ""
	if o.MaxSessions == 0 {
		o.MaxSessions = 8
	}
	if o.SessionIdle == 0 {
		o.SessionIdle = time.Second
	}
	if o.ReceiveWait == 0 {
		o.ReceiveWait = time.Second
	}
	if o.SettleTimeout == 0 {
		// broker.SubscriptionOptions.SettleTimeout also bounds the
		// driver's settle, renew and schedule calls: after a session lock
		// is lost the SDK retries a settle until its context ends.
		o.SettleTimeout = DefaultSettleTimeout
	}
	if o.Admin != nil {
		if path.queue != "" {
			props, err = readQueue(ctx, o.Admin, path.queue)
			read = "queue " + path.queue
		} else {
			props, err = readSubscription(ctx, o.Admin, path.topic, path.sub)
			read = "subscription " + path.topic + "/Subscriptions/" + path.sub + " and its topic"
		}
		if err != nil {
			return nil, openReadError(err, o.via.adminAt)
		}
		if path.dlq {
			read += ", whose dead-letter queue this is,"
		}
	}
	props = props.withDefaults()
	s := &subscription{client: client, path: path, o: o, props: props}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sessions = props.RequiresSession && !path.dlq
	s.caps = entityCaps(props, path.queue != "", path.dlq)
	s.caps.Source = sourceOf(o.via, read, subscriptionSettings(o.via, declared, props, path.dlq), "SubscriptionOptions")
	if s.sessions {
		s.pool = newSessionPool(s)
		return s, nil
	}
	ro := &azservicebus.ReceiverOptions{}
	if path.dlq {
		ro.SubQueue = azservicebus.SubQueueDeadLetter
	}
	if path.queue != "" {
		s.recv, err = client.NewReceiverForQueue(path.queue, ro)
	} else {
		s.recv, err = client.NewReceiverForSubscription(path.topic, path.sub, ro)
	}
	if err != nil {
		return nil, driver.OpenError(code(err), err)
	}
	s.fetch = newFetcher(s.ctx, s.recv)
	return s, nil
}

// settler is what both receiver types settle with.
type settler interface {
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error
}

// delivery is the AckID: one received message and the receiver that holds
// its lock.
type delivery struct {
	rm       *azservicebus.ReceivedMessage
	by       settler
	attempts int
	sess     *heldSession // nil without sessions

	mu      sync.Mutex
	settled bool
	renewal context.CancelFunc // ExtendLock's renewer
	// lock is the message lock's end as this client estimates it, from
	// receipt or the last renewal; unset on session entities, where the
	// session's lock holds the message.
	lock lockEstimate
}

// lockEstimate is this client's estimate of when a message or session lock
// ends unless renewed: when it was granted or last renewed plus the
// entity's LockDuration, by the local clock. A renewal counts from the
// start of its call; a message from its receipt and a session from the
// accept's return (see hold), which may be later than the service's moment
// by a network latency.
type lockEstimate struct {
	mu    sync.Mutex
	until time.Time
}

// renewed records a grant or renewal made at start.
func (l *lockEstimate) renewed(start time.Time, lock time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = start.Add(lock)
}

// expired reports whether the lock has ended by the estimate (never while
// unset).
func (l *lockEstimate) expired(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.until.IsZero() && now.After(l.until)
}

// finish marks the delivery settled; false if it was already.
func (d *delivery) finish() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return false
	}
	d.settled = true
	if d.renewal != nil {
		d.renewal()
	}
	return true
}

func (s *subscription) ReceiveBatch(ctx context.Context, max int) ([]*driver.Message, error) {
	if s.pool != nil {
		return s.pool.receive(ctx, max)
	}
	msgs, err := s.fetch.receive(ctx, max, s.o.ReceiveWait)
	if err != nil {
		return nil, err
	}
	out := make([]*driver.Message, 0, len(msgs))
	for _, rm := range msgs {
		out = append(out, s.wrap(rm, s.recv, nil))
	}
	return out, nil
}

func (s *subscription) wrap(rm *azservicebus.ReceivedMessage, by settler, sess *heldSession) *driver.Message {
	m := fromSB(rm, s.path.dlq)
	d := &delivery{rm: rm, by: by, sess: sess, attempts: m.Attempt}
	if sess == nil {
		d.lock.renewed(time.Now(), s.props.LockDuration)
	}
	m.AckID = d
	return m
}

// settle runs op on each delivery, bounded by SettleTimeout, and returns
// the first error.
func (s *subscription) settle(ctx context.Context, ids []driver.AckID, op func(context.Context, *delivery) error) error {
	// One call to the service per delivery: Service Bus settles by lock
	// token, one at a time. Each delivery's outcome is its own.
	errs := make([]error, len(ids))
	for i, id := range ids {
		d, ok := id.(*delivery)
		if !ok {
			return driver.Invalidf("servicebus: foreign AckID %T", id)
		}
		if !d.finish() {
			errs[i] = errLockLost
			continue
		}
		if d.sess != nil && d.sess.lost() {
			d.sess.settled(d)
			errs[i] = errLockLost
			continue
		}
		if d.sess == nil {
			sctx, cancel := context.WithTimeout(ctx, s.o.SettleTimeout)
			errs[i] = op(sctx, d)
			cancel()
			continue
		}
		errs[i] = s.settleInSession(ctx, d, op)
		d.sess.settled(d)
	}
	return driver.BatchErrors(errs)
}

// settleInSession runs op on a delivery of a held session, stopped when the
// session is found lost (renew marks it lost once its lock has ended by this
// client's estimate): the settle cannot succeed then, and the SDK would retry
// it until SettleTimeout.
func (s *subscription) settleInSession(ctx context.Context, d *delivery, op func(context.Context, *delivery) error) error {
	sctx, cancel := context.WithTimeout(ctx, s.o.SettleTimeout)
	defer cancel()
	stop := context.AfterFunc(d.sess.lostCtx, cancel)
	defer stop()
	d.sess.sdk.Lock()
	defer d.sess.sdk.Unlock()
	if d.sess.lost() {
		return errLockLost
	}
	err := op(sctx, d)
	if err != nil && takenElsewhere(err) {
		d.sess.markLost()
	}
	if err != nil && d.sess.lost() {
		return errLockLost
	}
	return err
}

func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	return s.settle(ctx, ids, func(ctx context.Context, d *delivery) error {
		return d.by.CompleteMessage(ctx, d.rm, nil)
	})
}

// SendNacks abandons (delay 0: the service counts a delivery and redelivers
// at once), or, on a queue without sessions, schedules a copy at now+delay
// carrying the deliveries so far and completes the original; a message
// whose deliveries reach MaxDeliveryCount is dead-lettered instead, as the
// service would.
func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	return s.settle(ctx, ids, func(ctx context.Context, d *delivery) error {
		if delay <= 0 || !s.caps.NackDelay {
			return d.by.AbandonMessage(ctx, d.rm, nil)
		}
		if d.attempts >= s.props.MaxDeliveryCount {
			reason := "MaxDeliveryCountExceeded"
			return d.by.DeadLetterMessage(ctx, d.rm, &azservicebus.DeadLetterOptions{Reason: &reason})
		}
		if d.lock.expired(time.Now()) {
			// The service redelivers the original already: a scheduled
			// copy would be a second one (its complete would fail).
			return errLockLost
		}
		at := time.Now().Add(delay)
		cp := copyForRetry(d.rm, d.attempts)
		if ttl := d.rm.TimeToLive; ttl != nil && *ttl > 0 && d.rm.ExpiresAt != nil && d.rm.ExpiresAt.Year() < 9999 {
			// the copy expires when the original would have, so the
			// redelivery horizon stays the time to live
			left := d.rm.ExpiresAt.Sub(at)
			if left <= 0 {
				// the copy would arrive expired: let the service expire
				// (or dead-letter) the original
				return d.by.AbandonMessage(ctx, d.rm, nil)
			}
			cp.TimeToLive = &left
		}
		sender, err := s.retrySender()
		if err != nil {
			return err
		}
		seqs, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{cp}, at, nil)
		if err != nil {
			return err
		}
		// a crash here delivers the message twice (the original after its
		// lock expires, and the copy): at least once, never lost
		err = d.by.CompleteMessage(ctx, d.rm, nil)
		if err != nil && code(err) == driver.LockLost {
			// The lock ended by the service's clock though not yet by
			// ours (the delivery reached us late): the service redelivers
			// the original, so the copy goes.
			if cerr := sender.CancelScheduledMessages(ctx, seqs, nil); cerr != nil {
				return errors.Join(err, fmt.Errorf("servicebus: the nack's scheduled copy stays (a second delivery): %w", cerr))
			}
		}
		return err
	})
}

func (s *subscription) retrySender() (*azservicebus.Sender, error) {
	s.senderMu.Lock()
	defer s.senderMu.Unlock()
	if s.sender == nil {
		sender, err := s.client.NewSender(s.path.queue, nil)
		if err != nil {
			return nil, err
		}
		s.sender = sender
	}
	return s.sender, nil
}

func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	return s.settle(ctx, ids, func(ctx context.Context, d *delivery) error {
		return d.by.DeadLetterMessage(ctx, d.rm, &azservicebus.DeadLetterOptions{Reason: &reason})
	})
}

// ExtendLocks renews each lock now and then again every third of the lock
// duration until dur has passed or the delivery is settled (the service
// renews by its lock duration, not by an arbitrary one).
func (s *subscription) ExtendLocks(ctx context.Context, ids []driver.AckID, dur time.Duration) error {
	if s.recv == nil {
		return driver.Invalidf("servicebus: locks of session messages follow the session lock, which the driver renews")
	}
	for _, id := range ids {
		d, ok := id.(*delivery)
		if !ok {
			return driver.Invalidf("servicebus: foreign AckID %T", id)
		}
		d.mu.Lock()
		settled := d.settled
		d.mu.Unlock()
		if settled {
			return errLockLost
		}
		rctx, cancel := context.WithTimeout(ctx, s.o.SettleTimeout)
		start := time.Now()
		err := s.recv.RenewMessageLock(rctx, d.rm, nil)
		cancel()
		if err != nil {
			return err
		}
		d.lock.renewed(start, s.props.LockDuration)
		s.renewUntil(d, time.Now().Add(dur))
	}
	return nil
}

func (s *subscription) renewUntil(d *delivery, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.renewal != nil {
		d.renewal()
	}
	ctx, cancel := context.WithDeadline(s.ctx, until)
	d.renewal = cancel
	every := s.props.LockDuration / 3
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// the lock must outlast until: stop when the remaining time
			// fits in one lock duration from now
			if time.Until(until) <= 0 {
				return
			}
			rctx, rcancel := context.WithTimeout(ctx, s.o.SettleTimeout)
			start := time.Now()
			err := s.recv.RenewMessageLock(rctx, d.rm, nil)
			rcancel()
			if err == nil {
				d.lock.renewed(start, s.props.LockDuration)
			}
			if err != nil && code(err) == driver.LockLost {
				return
			}
		}
	}()
}

func (s *subscription) Capabilities() capability.Subscription { return s.caps }

func (s *subscription) Classify(err error) driver.ErrorInfo { return classify(err) }

// As accepts **azservicebus.Client and, without sessions,
// **azservicebus.Receiver.
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case **azservicebus.Client:
		*p = s.client
		return true
	case **azservicebus.Receiver:
		if s.recv != nil {
			*p = s.recv
			return true
		}
	}
	return false
}

func (s *subscription) ErrorAs(err error, i any) bool { return errorAs(err, i) }

func (s *subscription) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s.pool != nil {
			s.pool.close(ctx)
		}
		if s.recv != nil {
			err = s.recv.Close(ctx)
		}
		s.senderMu.Lock()
		if s.sender != nil {
			err = errors.Join(err, s.sender.Close(ctx))
		}
		s.senderMu.Unlock()
		if s.o.CloseClient {
			err = errors.Join(err, s.client.Close(ctx))
		}
	})
	return err
}

// Peek implements driver.Peeker with the SDK's PeekMessages, on a
// subscription without sessions (a dead-letter sub-queue has none):
// messages are shown, not delivered, so no lock is taken and their
// delivery count stays as it is. The receiver continues after the last
// message it peeked.
func (s *subscription) Peek(ctx context.Context, max int) ([]*driver.Message, error) {
	if s.recv == nil {
		return nil, driver.Invalidf("servicebus: peek on a subscription with sessions: %w", errors.ErrUnsupported)
	}
	rms, err := s.recv.PeekMessages(ctx, max, nil)
	if err != nil {
		return nil, err
	}
	out := make([]*driver.Message, 0, len(rms))
	for _, rm := range rms {
		out = append(out, fromSB(rm, s.path.dlq))
	}
	return out, nil
}

package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// DefaultWaitTime is how long one Pull waits for messages by default.
const DefaultWaitTime = 2 * time.Second

// maxPullWait bounds the deadline of one Pull as it grows (see
// SubscriptionOptions.WaitTime).
const maxPullWait = 30 * time.Second

// maxAckIDs is the most ack IDs of one Acknowledge or ModifyAckDeadline
// request (Pub/Sub caps the request at 512 KiB).
const maxAckIDs = 1000

// RedriveReason is the dead-letter reason OpenDeadLetters reports for a
// message that carries none: Pub/Sub's dead-letter policy moved it after
// MaxDeliveryAttempts deliveries, and records no reason.
const RedriveReason = "Pub/Sub dead-letter policy: delivered max_delivery_attempts times without an ack"

// SubscriptionOptions configures OpenSubscription and OpenDeadLetters.
// Nil means defaults.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (telemetry).
	broker.SubscriptionOptions
	// WaitTime bounds one Pull (its gRPC deadline). Default:
	// DefaultWaitTime. A Pull that reaches its deadline doubles the next
	// one's, up to maxPullWait, and one that brings messages sets it back
	// to WaitTime: Pub/Sub keeps what a cut-off Pull took until its ack
	// deadline, so a Pull whose answer (large messages, a slow link) takes
	// longer than WaitTime to arrive must get the time on a later try.
	WaitTime time.Duration
	// DeadLetterSubscription names the subscription of the dead-letter
	// topic that OpenDeadLetters reads. Empty: the dead-letter topic's
	// only subscription.
	DeadLetterSubscription string

	owned  bool
	stated stated // a URL's statements, compared with the configuration
}

// OpenSubscription opens a consumer of the Pub/Sub subscription name (a
// bare name in the client's project, or
// projects/PROJECT/subscriptions/NAME). It reads the subscription's
// configuration (GetSubscription), from which the capabilities come.
// Several consumers of one subscription compete. The client is the
// caller's and is not closed with the subscription. ctx bounds the open's
// requests, not the subscription's life.
func OpenSubscription(ctx context.Context, client *pubsub.Client, name string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	o.owned = false
	s, err := openSubscription(ctx, client, name, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

// OpenDeadLetters opens a consumer of the dead letters of subscription
// name: a subscription (SubscriptionOptions.DeadLetterSubscription, or the
// only one) of the topic its dead-letter policy names. A subscription
// without a dead-letter policy is ErrInvalid; a dead-letter topic without
// a subscription ErrNotFound. Messages dead-lettered by Delivery.DeadLetter
// carry their reason in the header wary-dead-letter-reason; those Pub/Sub
// moved carry RedriveReason.
func OpenDeadLetters(ctx context.Context, client *pubsub.Client, name string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	o.owned = false
	s, err := openDeadLetters(ctx, client, name, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

func readSubscription(ctx context.Context, client *pubsub.Client, name string) (*pubsubpb.Subscription, error) {
	if client == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("gcppubsub: nil *pubsub.Client"))
	}
	full, err := fullName(client.Project(), "subscriptions", name)
	if err != nil {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("gcppubsub: %w", err))
	}
	ps, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: full})
	if err != nil {
		if classify(err).Code == driver.PermissionDenied {
			// Without the configuration the driver knows neither the
			// ack deadline nor the dead-letter policy: it does not guess.
			return nil, openErr(fmt.Errorf("gcppubsub: subscription %s: reading its configuration needs the permission pubsub.subscriptions.get: %w", full, err))
		}
		return nil, openErr(fmt.Errorf("gcppubsub: subscription %s: %w", full, err))
	}
	if ps.GetPushConfig().GetPushEndpoint() != "" {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("gcppubsub: subscription %s is a push subscription; this driver pulls", full))
	}
	return ps, nil
}

// deadLetterSubscription finds the subscription of the dead-letter topic
// of sub that OpenDeadLetters reads.
func deadLetterSubscription(ctx context.Context, client *pubsub.Client, ps *pubsubpb.Subscription, named string) (string, error) {
	c := configOf(ps)
	if c.DeadLetterTopic == "" {
		return "", driver.OpenError(driver.Invalid, fmt.Errorf("gcppubsub: subscription %s has no dead-letter policy, hence no dead-letter topic", c.Name))
	}
	if named != "" {
		return named, nil
	}
	it := client.TopicAdminClient.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: c.DeadLetterTopic})
	var subs []string
	for {
		n, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return "", openErr(fmt.Errorf("gcppubsub: dead-letter topic %s: listing its subscriptions: %w", c.DeadLetterTopic, err))
		}
		subs = append(subs, n)
	}
	switch len(subs) {
	case 0:
		return "", driver.OpenError(driver.NotFound, fmt.Errorf("gcppubsub: dead-letter topic %s has no subscription to read its messages from: create one", c.DeadLetterTopic))
	case 1:
		return subs[0], nil
	}
	return "", driver.OpenError(driver.Invalid, fmt.Errorf("gcppubsub: dead-letter topic %s has %d subscriptions; name the one to read (SubscriptionOptions.DeadLetterSubscription, dead_letter_subscription in the URL)", c.DeadLetterTopic, len(subs)))
}

func openDeadLetters(ctx context.Context, client *pubsub.Client, name string, o SubscriptionOptions) (*subscription, error) {
	ps, err := readSubscription(ctx, client, name)
	if err != nil {
		return nil, err
	}
	dl, err := deadLetterSubscription(ctx, client, ps, o.DeadLetterSubscription)
	if err != nil {
		return nil, err
	}
	o.stated = stated{} // the subscription's, not its dead-letter topic's
	s, err := openSubscription(ctx, client, dl, o)
	if err != nil {
		return nil, err
	}
	s.defaultReason = RedriveReason
	return s, nil
}

func openSubscription(ctx context.Context, client *pubsub.Client, name string, o SubscriptionOptions) (*subscription, error) {
	if o.WaitTime < 0 {
		return nil, driver.OpenError(driver.Invalid, errors.New("gcppubsub: WaitTime must not be negative"))
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	ps, err := readSubscription(ctx, client, name)
	if err != nil {
		return nil, err
	}
	c := configOf(ps)
	s := &subscription{client: client, proto: ps, cfg: c, caps: c.capabilities(), wait: o.WaitTime, owned: o.owned}
	s.caps.Source.Conflicts = append(s.caps.Source.Conflicts, o.stated.conflicts(c)...)
	s.poller = driver.NewPoller(s.pull, c.AckDeadline/2)
	return s, nil
}

type subscription struct {
	client *pubsub.Client
	proto  *pubsubpb.Subscription
	cfg    Config
	caps   capability.Subscription
	wait   time.Duration
	owned  bool
	// defaultReason, on a subscription opened by OpenDeadLetters, is the
	// reason reported for messages without one.
	defaultReason string

	// poller runs the Pulls; pullWait is the next one's deadline (see
	// pull), read and set by pull only.
	poller   *driver.Poller[*pubsubpb.ReceivedMessage]
	pullWait time.Duration
}

// ackID is one delivery: Pub/Sub's ack ID, with the message for
// DeadLetter.
type ackID struct {
	id  string
	msg *pubsubpb.PubsubMessage
}

func ackIDs(ids []driver.AckID) ([]*ackID, error) {
	out := make([]*ackID, 0, len(ids))
	for _, id := range ids {
		a, ok := id.(*ackID)
		if !ok {
			return nil, invalidErr(fmt.Errorf("foreign AckID %T", id))
		}
		out = append(out, a)
	}
	return out, nil
}

// SendAcks acknowledges the deliveries, up to 1000 per Acknowledge. On a
// subscription with exactly-once delivery, Pub/Sub answers for each ack
// ID it refused (ErrorInfo metadata): such a delivery fails alone with an
// *AckError, which matches broker.ErrLockLost when the refusal is
// permanent (the message will be delivered again). Without exactly-once
// delivery Pub/Sub confirms nothing per message: a lost ack shows as a
// redelivery.
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	as, err := ackIDs(ids)
	if err != nil {
		return err
	}
	return s.perAck(ctx, as, func(ctx context.Context, part []string) error {
		return s.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: s.cfg.Name, AckIds: part})
	})
}

// perAck runs call over as in requests of maxAckIDs, and reports each
// delivery's outcome.
func (s *subscription) perAck(ctx context.Context, as []*ackID, call func(context.Context, []string) error) error {
	errs := make([]error, len(as))
	for start := 0; start < len(as); start += maxAckIDs {
		part := as[start:min(start+maxAckIDs, len(as))]
		idsOf := make([]string, len(part))
		for i, a := range part {
			idsOf[i] = a.id
		}
		err := call(ctx, idsOf)
		if err == nil {
			continue
		}
		failures := ackFailures(err)
		for i, a := range part {
			if reason, ok := failures[a.id]; ok {
				errs[start+i] = &AckError{MessageID: a.msg.GetMessageId(), Reason: reason}
			} else {
				errs[start+i] = err
			}
		}
	}
	return driver.BatchErrors(errs)
}

// modifyDeadline sets the ack deadline of the deliveries to d from now.
func (s *subscription) modifyDeadline(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	if d > MaxAckDeadline {
		return invalidErr(fmt.Errorf("ack deadline %s is over Pub/Sub's maximum of %s", d, MaxAckDeadline))
	}
	secs := int32((d + time.Second - 1) / time.Second)
	as, err := ackIDs(ids)
	if err != nil {
		return err
	}
	return s.perAck(ctx, as, func(ctx context.Context, part []string) error {
		return s.client.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: s.cfg.Name, AckIds: part, AckDeadlineSeconds: secs})
	})
}

// SendNacks sets the deliveries' ack deadline to delay (ModifyAckDeadline;
// 0 makes them available at once, at most 600 s): Pub/Sub delivers them
// again when it passes (later, under a retry policy's backoff).
func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	return s.modifyDeadline(ctx, ids, delay)
}

// ExtendLocks sets the deliveries' ack deadline to d from now
// (ModifyAckDeadline, at most 600 s).
func (s *subscription) ExtendLocks(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	return s.modifyDeadline(ctx, ids, d)
}

// SendDeadLetters publishes a copy of each message (same data, attributes
// and ordering key, with the attribute wary-dead-letter-reason) to the
// subscription's dead-letter topic, then acknowledges the original. The
// two calls are not atomic: a failure between them leaves the message in
// both places, never in neither.
func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	if s.cfg.DeadLetterTopic == "" {
		return invalidErr(errors.New("the subscription has no dead-letter policy, hence no dead-letter topic"))
	}
	as, err := ackIDs(ids)
	if err != nil {
		return err
	}
	msgs := make([]*pubsubpb.PubsubMessage, len(as))
	for i, a := range as {
		attrs := make(map[string]string, len(a.msg.GetAttributes())+1)
		for k, v := range a.msg.GetAttributes() {
			attrs[k] = v
		}
		delete(attrs, AttrDeadLetterReason)
		if reason != "" {
			if len(reason) > MaxAttributeValue {
				reason = reason[:MaxAttributeValue]
			}
			attrs[AttrDeadLetterReason] = reason
		}
		msgs[i] = &pubsubpb.PubsubMessage{Data: a.msg.GetData(), Attributes: attrs, OrderingKey: a.msg.GetOrderingKey()}
	}
	for start := 0; start < len(msgs); start += MaxBatchSize {
		end := min(start+MaxBatchSize, len(msgs))
		if _, err := s.client.TopicAdminClient.Publish(ctx, &pubsubpb.PublishRequest{Topic: s.cfg.DeadLetterTopic, Messages: msgs[start:end]}); err != nil {
			return err
		}
		if err := s.SendAcks(ctx, ids[start:end]); err != nil {
			return err
		}
	}
	return nil
}

func (s *subscription) Capabilities() capability.Subscription { return s.caps }
func (s *subscription) Classify(err error) driver.ErrorInfo   { return classify(err) }
func (s *subscription) ErrorAs(err error, i any) bool         { return errorAs(err, i) }

// As accepts **pubsub.Client, **pubsubpb.Subscription (the configuration
// read when the subscription was opened) and *Config (what the driver
// made of it).
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case **pubsub.Client:
		*p = s.client
		return true
	case **pubsubpb.Subscription:
		*p = s.proto
		return true
	case *Config:
		*p = s.cfg
		return true
	}
	return false
}

// Close waits for a Pull still in flight (at most WaitTime plus 5
// seconds, then cancels it), then makes the messages it brought, which no
// caller has seen, available again.
func (s *subscription) Close() error {
	err := s.closeReceiver()
	if s.owned {
		if cerr := s.client.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// pull is the subscription's poll (driver.Poller): one Pull of up to
// maxMessages, bounded by pullWait. A Pull cut off by that deadline is an
// empty poll, and doubles the next one's deadline, up to maxPullWait
// (its messages, if the answer was on its way, stay leased until their
// ack deadline: a slow answer gets the time on a later try); one that
// brings messages sets it back to WaitTime. ctx ends at Close.
func (s *subscription) pull(ctx context.Context, maxMessages int) ([]*pubsubpb.ReceivedMessage, error) {
	wait := max(s.pullWait, s.wait)
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, err := s.client.SubscriptionAdminClient.Pull(pctx, &pubsubpb.PullRequest{Subscription: s.cfg.Name, MaxMessages: int32(min(max(maxMessages, 1), MaxBatchSize))})
	if err != nil {
		if pctx.Err() != nil && ctx.Err() == nil {
			s.pullWait = nextPullWait(wait, s.wait, true, false)
			return nil, nil // the wait ended with nothing: an empty poll
		}
		return nil, err
	}
	msgs := res.GetReceivedMessages()
	s.pullWait = nextPullWait(wait, s.wait, false, len(msgs) > 0)
	return msgs, nil
}

// nextPullWait is the deadline of the Pull after one of deadline cur: cut
// off by it, or that brought messages (got), with WaitTime wait.
func nextPullWait(cur, wait time.Duration, cut, got bool) time.Duration {
	switch {
	case cut:
		return min(2*cur, max(maxPullWait, wait))
	case got:
		return wait
	}
	return cur
}

// ReceiveBatch pulls up to maxMessages (at most 1000) messages.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	raws, err := s.poller.Receive(ctx, maxMessages)
	if err != nil {
		return nil, err
	}
	return s.decodeAll(raws), nil
}

func (s *subscription) decodeAll(raws []*pubsubpb.ReceivedMessage) []*driver.Message {
	out := make([]*driver.Message, 0, len(raws))
	for _, r := range raws {
		out = append(out, s.decode(r))
	}
	return out
}

// decode turns a received message into the driver's: attributes other
// than the driver's become headers, except the reserved (wary-...) names
// another producer could have set and the client libraries' googclient_
// attributes.
func (s *subscription) decode(r *pubsubpb.ReceivedMessage) *driver.Message {
	pm := r.GetMessage()
	m := &driver.Message{ID: pm.GetMessageId(), Key: pm.GetOrderingKey(), Body: pm.GetData(), Attempt: 1}
	attrs := pm.GetAttributes()
	for k, v := range attrs { // a map's keys: each once
		if m.Headers == nil {
			m.Headers = make(driver.Headers, 0, len(attrs))
		}
		switch {
		case k == AttrID:
			m.ID = v
		case k == AttrKey:
			if m.Key == "" {
				m.Key = v
			}
		case k == AttrDeadLetterReason:
			if s.defaultReason != "" {
				m.Headers = append(m.Headers, [2]string{k, v})
			}
		case driver.ReservedHeader(k), strings.HasPrefix(k, "googclient_"):
		default:
			m.Headers = append(m.Headers, [2]string{k, v})
		}
	}
	if s.defaultReason != "" && m.Headers.Get(AttrDeadLetterReason) == "" {
		m.Headers.Set(AttrDeadLetterReason, s.defaultReason)
	}
	if n := int(r.GetDeliveryAttempt()); n > 0 {
		m.Attempt = n
		m.Redelivered = n > 1
	}
	if pt := pm.GetPublishTime(); pt != nil {
		m.PublishTime = pt.AsTime()
	}
	m.AckID = &ackID{id: r.GetAckId(), msg: pm}
	m.As = (*received)(r)
	return m
}

// received is Message.As on received messages: **pubsubpb.ReceivedMessage
// and **pubsubpb.PubsubMessage. A conversion of the SDK's pointer, it
// costs no allocation.
type received pubsubpb.ReceivedMessage

func (r *received) As(i any) bool {
	rm := (*pubsubpb.ReceivedMessage)(r)
	switch p := i.(type) {
	case **pubsubpb.ReceivedMessage:
		*p = rm
		return true
	case **pubsubpb.PubsubMessage:
		*p = rm.GetMessage()
		return true
	}
	return false
}

// closeReceiver waits for the Pull in flight, then makes what no caller
// took available again (ModifyAckDeadline 0).
func (s *subscription) closeReceiver() error {
	left := s.poller.Close(s.wait + 5*time.Second)
	if len(left) == 0 {
		return nil
	}
	ids := make([]driver.AckID, len(left))
	for i, r := range left {
		ids[i] = &ackID{id: r.GetAckId(), msg: r.GetMessage()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.modifyDeadline(ctx, ids, 0)
}

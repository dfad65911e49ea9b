package sqsfifo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// DefaultWaitTime is how long one receive long-polls by default.
const DefaultWaitTime = 2 * time.Second

// SubscriptionOptions configures OpenSubscription. Nil means defaults.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (logger).
	broker.SubscriptionOptions
	// WaitTime is how long one ReceiveMessage waits for messages (long
	// polling), rounded up to whole seconds, at most 20 s. Default:
	// DefaultWaitTime.
	WaitTime time.Duration
	// DedupWindow is the deduplication window the subscription declares
	// (as TopicOptions.DedupWindow).
	DedupWindow time.Duration

	// stated are a URL's max_receive and visibility, compared with the
	// queue's attributes (zero: not stated).
	statedMaxReceive int
	statedVisibility time.Duration
}

// OpenSubscription opens a consumer of the FIFO queue queueURLOrName.
// Several subscriptions on one queue are competing consumers. The client
// is the caller's and is not closed with the subscription. ctx bounds the
// open's requests (the driver sets no timeout of its own), not the
// subscription's life.
func OpenSubscription(ctx context.Context, client *sqs.Client, queueURLOrName string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openSubscription(ctx, client, queueURLOrName, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

// OpenDeadLetters opens a consumer of the dead-letter queue that the
// RedrivePolicy of queueURLOrName names (ErrInvalid if it has none).
// Messages dead-lettered by Delivery.DeadLetter carry their reason in the
// header wary-dead-letter-reason; those SQS moved after maxReceiveCount
// receives have none. ctx bounds the open, as for OpenSubscription.
func OpenDeadLetters(ctx context.Context, client *sqs.Client, queueURLOrName string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openDeadLetters(ctx, client, queueURLOrName, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

// openDeadLetters opens the dead-letter queue that q's RedrivePolicy names.
func openDeadLetters(ctx context.Context, client *sqs.Client, q string, o SubscriptionOptions) (*subscription, error) {
	qu, err := openQueue(ctx, client, q, o.DedupWindow)
	if err != nil {
		return nil, err
	}
	if qu.dlqURL == "" {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("sqsfifo: queue %q has no RedrivePolicy, hence no dead-letter queue", q))
	}
	o.statedMaxReceive, o.statedVisibility = 0, 0 // the queue's, not its dead-letter queue's
	s, err := openSubscription(ctx, client, qu.dlqURL, o)
	if err != nil {
		return nil, err
	}
	s.defaultReason = RedriveReason
	return s, nil
}

// RedriveReason is the dead-letter reason OpenDeadLetters reports for a
// message that carries none: SQS's redrive moved it after maxReceiveCount
// receives, and records no reason.
const RedriveReason = "SQS redrive: received maxReceiveCount times without being deleted"

func openSubscription(ctx context.Context, client *sqs.Client, q string, o SubscriptionOptions) (*subscription, error) {
	if o.WaitTime < 0 || o.WaitTime > 20*time.Second {
		return nil, driver.OpenError(driver.Invalid, errors.New("sqsfifo: WaitTime must be between 0 and 20s"))
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	qu, err := openQueue(ctx, client, q, o.DedupWindow)
	if err != nil {
		return nil, err
	}
	qu.sub.Source.Conflicts = append(qu.sub.Source.Conflicts, statedConflicts(qu.sub, o.statedMaxReceive, o.statedVisibility)...)
	s := &subscription{q: qu, wait: int32(ceilSeconds(o.WaitTime))}
	s.poller = driver.NewPoller(s.receive, qu.sub.LockTimeout/2)
	return s, nil
}

type subscription struct {
	q    *queue
	wait int32
	// defaultReason, on a dead-letter queue opened by OpenDeadLetters, is
	// the reason reported for messages without one.
	defaultReason string

	// poller runs the long polls; retry is the attempt ID of a failed
	// one, to reuse once (read and set by receive only).
	poller *driver.Poller[types.Message]
	retry  string
}

// ackID is a delivery's receipt handle, with the message for DeadLetter.
type ackID struct {
	handle string
	raw    types.Message
}

// As is Message.As on received messages: *types.Message.
func (a *ackID) As(i any) bool {
	if p, ok := i.(*types.Message); ok {
		*p = a.raw
		return true
	}
	return false
}

func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

func handles(ids []driver.AckID) []*ackID {
	out := make([]*ackID, 0, len(ids))
	for _, id := range ids {
		if a, ok := id.(*ackID); ok {
			out = append(out, a)
		}
	}
	return out
}

// SendAcks deletes the messages, ten per DeleteMessageBatch call. Each
// delivery's outcome is its own: an entry SQS refuses (an expired receipt
// handle, say) fails alone, and a failed call fails only its ten.
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	errs := make([]error, len(ids))
	for start := 0; start < len(ids); start += MaxBatchSize {
		part := ids[start:min(start+MaxBatchSize, len(ids))]
		entries := make([]types.DeleteMessageBatchRequestEntry, 0, len(part))
		for i, id := range part {
			a, ok := id.(*ackID)
			if !ok {
				errs[start+i] = invalidErr(fmt.Errorf("foreign AckID %T", id))
				continue
			}
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(start + i)), ReceiptHandle: aws.String(a.handle)})
		}
		if len(entries) == 0 {
			continue
		}
		res, err := s.q.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.q.url), Entries: entries})
		if err != nil {
			for _, e := range entries {
				i, _ := strconv.Atoi(aws.ToString(e.Id))
				errs[i] = err
			}
			continue
		}
		for _, f := range res.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < start || i >= start+len(part) {
				return fmt.Errorf("sqsfifo: DeleteMessageBatch answered for an entry it was not sent (%q)", aws.ToString(f.Id))
			}
			errs[i] = entryFailure([]types.BatchResultErrorEntry{f})
		}
	}
	return driver.BatchErrors(errs)
}

func entryFailure(failed []types.BatchResultErrorEntry) error {
	if len(failed) == 0 {
		return nil
	}
	f := failed[0]
	return &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
}

// changeVisibility sets the visibility of the deliveries to d from now.
func (s *subscription) changeVisibility(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	if d > MaxVisibility {
		return invalidErr(fmt.Errorf("visibility %s is over SQS's maximum of %s", d, MaxVisibility))
	}
	secs := int32(ceilSeconds(d))
	hs := handles(ids)
	for start := 0; start < len(hs); start += MaxBatchSize {
		part := hs[start:min(start+MaxBatchSize, len(hs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(part))
		for i, h := range part {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h.handle), VisibilityTimeout: secs}
		}
		res, err := s.q.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.q.url), Entries: entries})
		if err != nil {
			return err
		}
		if err := entryFailure(res.Failed); err != nil {
			return err
		}
	}
	return nil
}

// SendNacks makes the deliveries visible again after delay
// (ChangeMessageVisibility; 0 releases them at once). The message keeps
// its place at the head of its group, which waits for it.
func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	return s.changeVisibility(ctx, ids, delay)
}

// ExtendLocks sets the visibility timeout of the deliveries to d from now.
func (s *subscription) ExtendLocks(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	return s.changeVisibility(ctx, ids, d)
}

// SendDeadLetters sends a copy of each message to the dead-letter queue
// with the reason attribute, then deletes the original. The two steps are
// not atomic: a failure between them leaves the message in both queues
// (the original comes back after its visibility timeout and a second
// DeadLetter sends a copy with the same MessageDeduplicationId, which SQS
// drops within its 5-minute window), never in neither.
func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	if s.q.dlqURL == "" {
		return invalidErr(errors.New("the queue has no RedrivePolicy, hence no dead-letter queue"))
	}
	for _, h := range handles(ids) {
		if err := s.copyToDLQ(ctx, h, reason); err != nil {
			return err
		}
		if hook, _ := ctx.Value(deleteHookKey{}).(func(context.Context) error); hook != nil {
			if err := hook(ctx); err != nil {
				return err
			}
		}
		if _, err := s.q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.q.url), ReceiptHandle: aws.String(h.handle)}); err != nil {
			return err
		}
	}
	return nil
}

// deleteHookKey is the context key of a test's failpoint: the function it
// holds runs between the copy and the delete, so that a test can prove
// what a crash there leaves behind (export_test.go sets it).
type deleteHookKey struct{}

func (s *subscription) copyToDLQ(ctx context.Context, h *ackID, reason string) error {
	attrs := make(map[string]types.MessageAttributeValue, len(h.raw.MessageAttributes)+1)
	for k, v := range h.raw.MessageAttributes {
		attrs[k] = types.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	if reason != "" {
		attrs[AttrDeadLetterReason] = textAttr(reason)
	} else {
		delete(attrs, AttrDeadLetterReason)
	}
	if len(attrs) > 10 {
		return invalidErr(fmt.Errorf("message %q already has %d attributes: no room for the dead-letter reason under SQS's limit of 10", aws.ToString(h.raw.MessageId), len(attrs)-1))
	}
	in := &sqs.SendMessageInput{
		QueueUrl:               aws.String(s.q.dlqURL),
		MessageBody:            h.raw.Body,
		MessageAttributes:      attrs,
		MessageGroupId:         aws.String(h.raw.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]),
		MessageDeduplicationId: aws.String(h.raw.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]),
	}
	if aws.ToString(in.MessageDeduplicationId) == "" {
		in.MessageDeduplicationId = aws.String(MapID(aws.ToString(h.raw.MessageId)))
	}
	_, err := s.q.client.SendMessage(ctx, in)
	return err
}

func (s *subscription) Capabilities() capability.Subscription { return s.q.sub }
func (s *subscription) Classify(err error) driver.ErrorInfo   { return classify(err) }
func (s *subscription) ErrorAs(err error, i any) bool         { return errorAs(err, i) }

// As accepts **sqs.Client and *QueueURL.
func (s *subscription) As(i any) bool { return s.q.as(i) }

// Close waits for a receive still in flight (at most WaitTime), then makes
// the messages it brought, which no caller has seen, visible again.
func (s *subscription) Close() error { return s.closeReceiver() }

package sqsfifo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// DedupWindow is the deduplication window the topic declares on an
	// endpoint other than AWS's. Default: DefaultDedupWindow (5 minutes,
	// fixed by AWS); set it only for an emulator configured with another
	// window. Against AWS the topic declares 5 minutes whatever it says,
	// and another value is a Conflict in the capabilities' Source.
	DedupWindow time.Duration
}

// OpenTopic opens a topic that publishes to the FIFO queue
// queueURLOrName (a queue URL, or a name ending in ".fifo" that
// GetQueueUrl resolves). It reads the queue's attributes to build the
// capabilities: a missing queue is ErrNotFound, a standard queue
// ErrInvalid. The client is the caller's and is not closed with the topic.
// ctx bounds those requests: the driver sets no timeout of its own.
func OpenTopic(ctx context.Context, client *sqs.Client, queueURLOrName string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	t, err := openTopic(ctx, client, queueURLOrName, o)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &o.TopicOptions), nil
}

func openTopic(ctx context.Context, client *sqs.Client, q string, o TopicOptions) (*topic, error) {
	qu, err := openQueue(ctx, client, q, o.DedupWindow)
	if err != nil {
		return nil, err
	}
	return &topic{q: qu}, nil
}

type topic struct {
	q *queue
}

// SendBatch encodes every message first (nothing is sent if one breaks a
// rule), then sends them with SendMessageBatch, in requests of at most ten
// entries whose payloads together fit in the queue's MaximumMessageSize.
// When the messages fare differently it returns a *driver.BatchError: nil
// for an entry SQS accepted, an *EntryError for one it refused, the
// request's error for the entries of a failed request, and
// driver.ErrNotAttempted for those not sent because of another.
func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	out := make([]outgoing, len(msgs))
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		o, err := encode(m)
		if err == nil && o.size > t.q.maxSize {
			err = tooLargeErr(fmt.Errorf("message %q is %d bytes once encoded (body and attributes), over the queue's MaximumMessageSize of %d", m.ID, o.size, t.q.maxSize))
		}
		if err != nil {
			for j := range errs {
				errs[j] = driver.ErrNotAttempted
			}
			errs[i] = err
			return driver.BatchErrors(errs)
		}
		out[i] = o
	}
	for start := 0; start < len(out); {
		end, size := start, 0
		for end < len(out) && end-start < MaxBatchSize && size+out[end].size <= t.q.maxSize {
			size += out[end].size
			end++
		}
		if failed := t.send(ctx, out[start:end], errs[start:end]); failed {
			for i := end; i < len(errs); i++ {
				errs[i] = driver.ErrNotAttempted
			}
			return driver.BatchErrors(errs)
		}
		start = end
	}
	return nil
}

// errUnanswered is the outcome of an entry that SendMessageBatch's answer
// does not mention: SQS may have it.
var errUnanswered = errors.New("sqsfifo: SendMessageBatch did not answer for this entry")

// send sends one request's worth and records each entry's outcome in
// errs (nil: sent). It reports whether any entry failed.
func (t *topic) send(ctx context.Context, out []outgoing, errs []error) bool {
	entries := make([]types.SendMessageBatchRequestEntry, len(out))
	for i, o := range out {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                     aws.String(strconv.Itoa(i)),
			MessageBody:            aws.String(o.body),
			MessageGroupId:         aws.String(o.group),
			MessageDeduplicationId: aws.String(o.dedup),
			MessageAttributes:      o.attrs,
		}
	}
	res, err := t.q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(t.q.url), Entries: entries})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return true
	}
	for i := range errs {
		errs[i] = errUnanswered
	}
	for _, s := range res.Successful {
		if i, ok := entryIndex(s.Id, len(errs)); ok {
			errs[i] = nil
		}
	}
	for _, f := range res.Failed {
		if i, ok := entryIndex(f.Id, len(errs)); ok {
			errs[i] = &EntryError{ID: out[i].id, Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
	}
	return slices.ContainsFunc(errs, func(err error) bool { return err != nil })
}

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

func (t *topic) Capabilities() capability.Topic      { return t.q.topic }
func (t *topic) Classify(err error) driver.ErrorInfo { return classify(err) }
func (t *topic) ErrorAs(err error, i any) bool       { return errorAs(err, i) }

// As accepts **sqs.Client and *QueueURL.
func (t *topic) As(i any) bool { return t.q.as(i) }

func (t *topic) Close() error { return nil }

// QueueURL is an As target: the URL of the queue behind a topic or
// subscription.
type QueueURL string

func (q *queue) as(i any) bool {
	switch p := i.(type) {
	case **sqs.Client:
		*p = q.client
		return true
	case *QueueURL:
		*p = QueueURL(q.url)
		return true
	}
	return false
}

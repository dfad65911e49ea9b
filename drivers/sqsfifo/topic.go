package sqsfifo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// DedupWindow is the deduplication window the topic declares.
	// Default: DefaultDedupWindow (5 minutes, fixed by AWS); set it only
	// for an emulator configured with another window.
	DedupWindow time.Duration
}

// OpenTopic opens a topic that publishes to the FIFO queue
// queueURLOrName (a queue URL, or a name ending in ".fifo" that
// GetQueueUrl resolves). It reads the queue's attributes to build the
// capabilities: a missing queue is ErrNotFound, a standard queue
// ErrInvalid. The client is the caller's and is not closed with the topic.
func OpenTopic(client *sqs.Client, queueURLOrName string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	ctx, cancel := openCtx()
	defer cancel()
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
func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	out := make([]outgoing, len(msgs))
	for i, m := range msgs {
		o, err := encode(m)
		if err != nil {
			return err
		}
		if o.size > t.q.maxSize {
			return tooLargeErr(fmt.Errorf("message %q is %d bytes once encoded (body and attributes), over the queue's MaximumMessageSize of %d", m.ID, o.size, t.q.maxSize))
		}
		out[i] = o
	}
	status := make([]EntryStatus, len(out))
	for i, o := range out {
		status[i] = EntryStatus{ID: o.id, Status: NotSent}
	}
	for start := 0; start < len(out); {
		end, size := start, 0
		for end < len(out) && end-start < MaxBatchSize && size+out[end].size <= t.q.maxSize {
			size += out[end].size
			end++
		}
		if err := t.send(ctx, out[start:end], status[start:end]); err != nil {
			if start == 0 && end == len(out) && allStatus(status, NotSent, MaybeSent) {
				// One request, failed as a whole: its error says it all.
				if _, isEntry := err.(*EntryError); !isEntry {
					return err
				}
			}
			return &BatchError{Entries: status, Err: err}
		}
		start = end
	}
	return nil
}

func allStatus(s []EntryStatus, ok ...SendStatus) bool {
	for _, e := range s {
		found := false
		for _, o := range ok {
			found = found || e.Status == o
		}
		if !found {
			return false
		}
	}
	return true
}

// send sends one request's worth and fills status. It returns the
// request's error, or the first refused entry's.
func (t *topic) send(ctx context.Context, out []outgoing, status []EntryStatus) error {
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
		st := NotSent
		if classify(err).MaybeSent {
			st = MaybeSent
		}
		for i := range status {
			status[i].Status = st
		}
		return err
	}
	for i := range status {
		status[i].Status = MaybeSent // an entry SQS does not mention
	}
	for _, s := range res.Successful {
		if i, ok := entryIndex(s.Id, len(status)); ok {
			status[i].Status = Sent
		}
	}
	var first error
	for _, f := range res.Failed {
		i, ok := entryIndex(f.Id, len(status))
		if !ok {
			continue
		}
		status[i] = EntryStatus{ID: status[i].ID, Status: NotSent, Code: aws.ToString(f.Code), SenderFault: f.SenderFault}
		if first == nil {
			first = &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
	}
	if first == nil && !allStatus(status, Sent) {
		first = fmt.Errorf("sqsfifo: SendMessageBatch answered for %d of %d entries", len(res.Successful)+len(res.Failed), len(status))
	}
	return first
}

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

func (t *topic) Capabilities() driver.Capabilities   { return t.q.caps }
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

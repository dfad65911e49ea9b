package kafka

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Headers the driver writes on records. Other "wary-" headers written by the
// library (such as HeaderDeadLetterReason) travel as ordinary headers.
const (
	// HeaderID carries Message.ID.
	HeaderID = "wary-id"
	// HeaderAttempt carries, on retry-topic copies, the delivery number the
	// copy will be delivered as.
	HeaderAttempt = "wary-attempt"
	// HeaderNotBefore carries, on retry-topic copies, the Unix time in
	// milliseconds before which the copy is not delivered.
	HeaderNotBefore = "wary-not-before"
)

// recordOverhead is what the driver reserves, out of the topic's
// max.message.bytes, for the record batch framing and the ID header name.
const recordOverhead = 1024

// TopicOptions configures a topic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// SkipCheck skips the metadata and config look-up at open. The topic is
	// then not checked for existence (a missing topic fails at Publish with
	// ErrNotFound), MaxMessageSize is the client's ProducerBatchMaxBytes
	// less the driver's overhead, and RedeliveryHorizon is HorizonUnknown.
	SkipCheck bool
	// Consumers are the options the topic's subscriptions use. Kafka's
	// delivery promises are made by the consumer, so a topic's
	// Capabilities describe the path to consumers configured so (ordered or
	// not, dead-letter topic, delivery limit, retry topic). Nil: default
	// subscriptions.
	Consumers *SubscriptionOptions
}

// OpenTopic returns a topic that publishes to the Kafka topic named topic,
// through a client of its own built from clientOpts (seed brokers, TLS,
// SASL, and any other kgo option). The client must use idempotent writes
// and acks from all in-sync replicas (kgo's defaults); OpenTopic returns
// an error matching broker.ErrInvalid otherwise, and broker.ErrNotFound
// when the topic does not exist. Close closes the client; As(**kgo.Client)
// reaches it.
func OpenTopic(clientOpts []kgo.Opt, topic string, opts *TopicOptions) (*broker.Topic, error) {
	if opts == nil {
		opts = &TopicOptions{}
	}
	t, err := openTopic(context.Background(), clientOpts, topic, opts)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &opts.TopicOptions), nil
}

type topic struct {
	cl   *kgo.Client
	name string
	caps driver.Capabilities
}

// openTopic builds the topic's client and checks the topic.
func openTopic(ctx context.Context, clientOpts []kgo.Opt, name string, opts *TopicOptions) (*topic, error) {
	if err := checkTopicName("topic", name); err != nil {
		return nil, err
	}
	consumers := opts.Consumers
	if consumers == nil {
		consumers = &SubscriptionOptions{}
	}
	if err := checkTopicNames(consumers); err != nil {
		return nil, err
	}
	cl, auth, err := newClient(clientOpts)
	if err != nil {
		return nil, err
	}
	if err := checkProducer(cl); err != nil {
		cl.Close()
		return nil, err
	}
	maxMsg, horizon := producerBatchMax(cl), broker.HorizonUnknown
	if !opts.SkipCheck {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		var m int
		m, horizon, err = describePath(ctx, cl, name, consumers.RetryTopic)
		if err != nil {
			cl.Close()
			return nil, openFailure(err, auth)
		}
		maxMsg = min(maxMsg, m)
	}
	return &topic{cl: cl, name: name, caps: capsFor(consumers, maxMsg, horizon)}, nil
}

func producerBatchMax(cl *kgo.Client) int {
	if v, ok := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && v > 0 {
		return int(v)
	}
	return 1000012
}

// checkProducer rejects clients that could lose or duplicate records on
// their own: wary's "published" means written to every in-sync replica.
func checkProducer(cl *kgo.Client) error {
	if acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks != kgo.AllISRAcks() {
		return broker.Invalidf("kafka: the client must use kgo.RequiredAcks(kgo.AllISRAcks()) (the default)")
	}
	if dis, ok := cl.OptValue(kgo.DisableIdempotentWrite).(bool); ok && dis {
		return broker.Invalidf("kafka: the client must use idempotent writes (do not pass kgo.DisableIdempotentWrite)")
	}
	return nil
}

func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = toRecord(t.name, m)
	}
	return produce(ctx, t.cl, recs)
}

// produce writes recs and waits for every produce ack, or for ctx. kgo does
// not give up an idempotent record once it is in flight, so when ctx ends
// first the records may still be written: the error says so (MaybeSent),
// and the records (copies, see toRecord) finish in the background.
func produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	done := make(chan kgo.ProduceResults, 1)
	go func() { done <- cl.ProduceSync(ctx, recs...) }()
	var results kgo.ProduceResults
	select {
	case results = <-done:
	case <-ctx.Done():
		select {
		case results = <-done:
		default:
			return &produceError{err: fmt.Errorf("kafka: waiting for the produce ack: %w", ctx.Err()), maybeSent: true}
		}
	}
	var first error
	ok := 0
	for _, r := range results {
		if r.Err == nil {
			ok++
		} else if first == nil {
			first = r.Err
		}
	}
	if first == nil {
		return nil
	}
	return &produceError{err: first, maybeSent: ok > 0 || maybeSent(first)}
}

// toRecord copies m into a record (the driver must not keep m's slices,
// and a record may outlive SendBatch: see produce).
func toRecord(topic string, m *driver.Message) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: bytes.Clone(m.Body)}
	if m.Key != "" {
		r.Key = []byte(m.Key)
	}
	r.Headers = make([]kgo.RecordHeader, 0, len(m.Headers)+1)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderID, Value: []byte(m.ID)})
	for k, v := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	return r
}

func (t *topic) Capabilities() driver.Capabilities { return t.caps }
func (t *topic) Classify(err error) driver.ErrorInfo {
	return classify(err)
}

// As accepts **kgo.Client (the topic's own client).
func (t *topic) As(i any) bool {
	if p, ok := i.(**kgo.Client); ok {
		*p = t.cl
		return true
	}
	return false
}

func (t *topic) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// Close closes the topic's client.
func (t *topic) Close() error {
	t.cl.Close()
	return nil
}

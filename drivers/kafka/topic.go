package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
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

// Record sizes. Kafka's max.message.bytes bounds a record batch: its
// header, then each record with its framing (varint lengths of the record,
// key, value, header count and each header's name and value). Capabilities
// declare MaxMessageSize as max.message.bytes less recordOverhead, counted
// as the portable layer counts (body, ID, key, header names and values);
// SendBatch then checks the record's exact encoded size, with room for
// what the driver adds when it copies the record to the retry or
// dead-letter topic, so that a published message can always be retried
// and dead-lettered. A message with many headers may so be refused
// (ErrTooLarge) below MaxMessageSize.
const (
	// recordOverhead is the driver's reserve out of max.message.bytes.
	recordOverhead = 1024
	// batchOverhead is a v2 record batch's header.
	batchOverhead = 61
	// maxReasonLen bounds the dead-letter reason written on copies (a
	// longer one is cut).
	maxReasonLen = 512
	// maxSourceLen bounds HeaderDeadLetterSource's value: a topic name (at
	// most 249 bytes), "/", a partition and "@", an offset.
	maxSourceLen = 249 + 1 + 10 + 1 + 19
	// copyReserve is the most a copy adds to a record: the dead-letter
	// headers (more than the retry ones), plus a byte each for the
	// header count's and the record length's varints to grow.
	copyReserve = 2 + (1 + len(driver.HeaderDeadLetterReason) + 2 + maxReasonLen) + (1 + len(HeaderDeadLetterSource) + 2 + maxSourceLen)
)

// recordSize is the size r takes alone in a record batch, batch header
// included, as kgo encodes it (the first record of a batch has zero
// timestamp and offset deltas).
func recordSize(r *kgo.Record) int {
	n := 1 + varintLen(0) + varintLen(0) // attributes, timestamp delta, offset delta
	n += bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return batchOverhead + varintLen(int64(n)) + n
}

// bytesLen is the encoded size of a nullable byte string.
func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// checkSize refuses, before anything is sent, records that would not fit
// in maxMsg (with room for the driver's copies).
// A message over the limit is refused, and the others are not sent
// (driver.ErrNotAttempted), in a *driver.BatchError.
func checkSize(recs []*kgo.Record, ids []string, maxMsg int) error {
	for i, r := range recs {
		if n := recordSize(r); n+copyReserve > maxMsg {
			errs := make([]error, len(recs))
			for j := range errs {
				errs[j] = driver.ErrNotAttempted
			}
			errs[i] = &produceError{err: &codedError{code: driver.TooLarge, err: fmt.Errorf(
				"kafka: message %q encodes to %d bytes (key, value and headers with their framing, the driver's ID header and the batch header); with the %d bytes the driver keeps for retry and dead-letter copies, it is over the limit of %d",
				ids[i], n, copyReserve, maxMsg)}}
			return driver.BatchErrors(errs)
		}
	}
	return nil
}

// TopicOptions configures a topic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
	// SkipCheck skips the metadata and config look-up at open. The topic is
	// then not checked for existence (a missing topic fails at Publish with
	// ErrNotFound), and MaxMessageSize is the client's
	// ProducerBatchMaxBytes less the driver's overhead.
	SkipCheck bool
}

// OpenTopic returns a topic that publishes to the Kafka topic named topic
// through cl, the program's client (seed brokers, TLS, SASL and any other
// kgo option, with TopicOpts for per-topic batch sizes and an immediate
// error on a rejected SASL login). Close leaves cl open: the program
// closes it after the topics on it. cl must use idempotent writes and
// acks from all in-sync replicas (kgo's defaults); OpenTopic returns an
// error matching broker.ErrInvalid otherwise, and broker.ErrNotFound when
// the topic does not exist. As(**kgo.Client) reaches cl. ctx bounds the
// metadata and config look-up of the open: the driver sets no timeout of
// its own. Several topics may share a client.
func OpenTopic(ctx context.Context, cl *kgo.Client, topic string, opts *TopicOptions) (*broker.Topic, error) {
	if cl == nil {
		return nil, clientError("OpenTopic", "no client")
	}
	if opts == nil {
		opts = &TopicOptions{}
	}
	t, err := openTopic(ctx, cl, topic, opts)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &opts.TopicOptions), nil
}

type topic struct {
	cl     *kgo.Client
	name   string
	caps   capability.Topic
	maxMsg int // the largest record batch (see recordSize)
	auth   *authWatch
	// owned: cl was built by the URL opener, and is closed with the topic.
	owned bool
}

// openTopic checks cl and the topic, and returns the topic on cl.
func openTopic(ctx context.Context, cl *kgo.Client, name string, opts *TopicOptions) (*topic, error) {
	if err := checkTopicName("topic", name); err != nil {
		return nil, err
	}
	if err := checkProducer(cl); err != nil {
		return nil, err
	}
	var auth *authWatch
	var lim *batchLimits
	if h := hooksOf(cl); h != nil {
		auth, lim = &h.authWatch, &h.lim
	}
	maxMsg := producerBatchMax(cl)
	src := skippedTopicSource(name)
	if !opts.SkipCheck {
		ti, err := describeTopic(ctx, cl, lim, name)
		if err != nil {
			return nil, openFailure(err, auth)
		}
		maxMsg = min(maxMsg, ti.maxMsg)
		src = topicSource(ti)
	}
	caps := topicCaps(maxMsg)
	caps.Source = src
	return &topic{cl: cl, name: name, caps: caps, maxMsg: maxMsg, auth: auth}, nil
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
		return driver.Invalidf("kafka: the client must use kgo.RequiredAcks(kgo.AllISRAcks()) (the default)")
	}
	if dis, ok := cl.OptValue(kgo.DisableIdempotentWrite).(bool); ok && dis {
		return driver.Invalidf("kafka: the client must use idempotent writes (do not pass kgo.DisableIdempotentWrite)")
	}
	return nil
}

func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		recs[i], ids[i] = toRecord(t.name, m), m.ID
	}
	if err := checkSize(recs, ids, t.maxMsg); err != nil {
		return err
	}
	return produce(ctx, t.cl, t.auth, recs)
}

// produce writes recs and waits for every produce ack, for ctx, or for the
// broker to reject the client's SASL login (auth). kgo does not give up an
// idempotent record once it is in flight, so when ctx ends first the
// records may still be written: the error says so (MaybeSent), and the
// records (copies, see toRecord) finish in the background.
func produce(ctx context.Context, cl *kgo.Client, auth *authWatch, recs []*kgo.Record) error {
	done := make(chan kgo.ProduceResults, 1)
	go func() { done <- cl.ProduceSync(ctx, recs...) }()
	var results kgo.ProduceResults
	select {
	case results = <-done:
	case <-auth.rejected():
		return &produceError{err: errLoginRejected, maybeSent: true}
	case <-ctx.Done():
		select {
		case results = <-done:
		default:
			return &produceError{err: fmt.Errorf("kafka: waiting for the produce ack: %w", ctx.Err()), maybeSent: true}
		}
	}
	// ProduceSync answers in the order the records finish: match them.
	at := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		at[r] = i
	}
	errs := make([]error, len(recs))
	for _, r := range results {
		if i, ok := at[r.Record]; ok {
			errs[i] = r.Err
		}
	}
	// One error for all (a refused login, a missing topic): the produce
	// failed as a whole.
	if err := driver.BatchErrors(errs); err == nil || !errors.As(err, new(*driver.BatchError)) {
		if err != nil {
			err = &produceError{err: err, maybeSent: maybeSent(err)}
		}
		return err
	}
	for i, err := range errs {
		if err != nil {
			errs[i] = &produceError{err: err, maybeSent: maybeSent(err)}
		}
	}
	return &driver.BatchError{Errs: errs}
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
	for k, v := range m.Headers.All() {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	return r
}

func (t *topic) Capabilities() capability.Topic { return t.caps }
func (t *topic) Classify(err error) driver.ErrorInfo {
	return classify(err)
}

// As accepts **kgo.Client (the client the topic publishes through).
func (t *topic) As(i any) bool {
	if p, ok := i.(**kgo.Client); ok {
		*p = t.cl
		return true
	}
	return false
}

func (t *topic) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// Close closes the topic's client only if the URL opener built it.
func (t *topic) Close() error {
	if t.owned {
		t.cl.Close()
	}
	return nil
}

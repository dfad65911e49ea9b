package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// TopicOptions configures a Topic. The zero value (or nil) means defaults.
type TopicOptions struct {
	// Retry governs how Publish retries transient (ErrRetryable) failures.
	// Default: 3 attempts in all, backoff from 100ms to 2s.
	Retry *RetryPolicy
	// Telemetry receives retry and close events, spans and metrics.
	Telemetry
}

// RetryPolicy bounds the portable layer's retries of transient failures.
type RetryPolicy struct {
	// Attempts is the total number of tries, the first included (>= 1).
	Attempts int
	Backoff  Backoff
}

var defaultPublishRetry = RetryPolicy{Attempts: 3, Backoff: Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}}

// Topic publishes messages to a broker. Create one with a driver's
// constructor or OpenTopic. It is safe for concurrent use.
type Topic struct {
	d      driver.Topic
	caps   capability.Topic
	retry  RetryPolicy
	logger *slog.Logger
	tel    *tel

	mu        sync.RWMutex
	closed    bool
	closing   chan struct{}
	closeOnce sync.Once
}

// NewTopic wraps a driver topic, for driver packages.
func NewTopic(d driver.Topic, opts *TopicOptions) *Topic {
	if opts == nil {
		opts = &TopicOptions{}
	}
	tel := opts.Telemetry.withDefaults()
	t := &Topic{d: d, caps: d.Capabilities(), retry: defaultPublishRetry, logger: tel.Logger, closing: make(chan struct{})}
	t.tel = newTel(d, tel.TracerProvider, tel.MeterProvider, true)
	if opts.Retry != nil {
		t.retry = *opts.Retry
		if t.retry.Attempts < 1 {
			t.retry.Attempts = 1
		}
	}
	return t
}

// Capabilities returns what the broker promises for this topic.
func (t *Topic) Capabilities() capability.Topic { return t.caps }

// Publish sends msgs and returns when the broker has durably accepted every
// one of them, or with an error. Invalid messages (a missing required key,
// a bad ID or header, over a size limit) fail the call before anything is
// sent (ErrInvalid or ErrTooLarge, and ErrNotSent). A broker's failure
// matches exactly one of ErrNotSent and ErrMaybeSent; Error.Messages says
// what became of each message. Transient failures are retried per
// TopicOptions.Retry with the same IDs (an empty ID gets a random one);
// batches over the broker's limit are sent in order, and the first failed
// one stops the call.
func (t *Topic) Publish(ctx context.Context, msgs ...*Message) (err error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return newError("publish", driver.Closed, false, errors.New("topic is closed"))
	}
	if err := validateAll(t.caps, msgs); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	// One allocation for the driver's messages, not one each.
	vals := make([]driver.Message, len(msgs))
	dms := make([]*driver.Message, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = NewID()
		}
		vals[i] = driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
		dms[i] = &vals[i]
	}
	ctx, span := t.tel.startSend(ctx, dms)
	defer func() { endSpan(span, err) }()
	size := len(dms)
	if t.caps.MaxBatchSize > 0 {
		size = t.caps.MaxBatchSize
	}
	for start := 0; start < len(dms); start += size {
		end := min(start+size, len(dms))
		if err := t.sendWithRetry(ctx, dms[start:end]); err != nil {
			be := err.(*Error)
			if len(dms) > 1 {
				placeMessages(be, len(dms), start, end)
			}
			return be
		}
		t.tel.counted(ctx, end-start)
	}
	return nil
}

// As exposes the driver's own types (the SDK client or producer); each
// driver's package doc lists what it accepts.
func (t *Topic) As(i any) bool { return t.d.As(i) }

// ErrorAs reaches the SDK's error type behind an error this topic returned.
func (t *Topic) ErrorAs(err error, i any) bool {
	var be *Error
	if errors.As(err, &be) {
		err = be.err
	}
	if err == nil {
		return false
	}
	return t.d.ErrorAs(err, i)
}

// Close waits for Publish calls in flight, then releases the topic's
// resources. Publish after Close returns an error matching ErrClosed.
// Closing twice returns nil.
func (t *Topic) Close() error {
	t.closeOnce.Do(func() { close(t.closing) })
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return wrapErr("close", t.d.Classify, t.d.Close())
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	mnoop "go.opentelemetry.io/otel/metric/noop"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// chaosTopic wraps a real topic and misbehaves on purpose, the way an
// at-least-once broker may:
//
//   - duplicate: the first publish of this message ID once armed reaches
//     the broker twice;
//   - reorder: the first publish of this message ID once armed is held
//     back and reaches the broker only after the next message with the
//     same key.
//
// It is armed after the relay's crash, so that the faults do not depend
// on which rows the crashed relay's batch held. It counts what reached
// the broker.
type chaosTopic struct {
	inner     *broker.Topic
	duplicate string
	reorder   string

	mu        sync.Mutex
	armed     bool
	seen      map[string]int // publishes asked for once armed, by ID
	publishes int            // messages that reached the broker
	held      *broker.Message
	fired     struct{ duplicate, reorder bool }
}

func newChaosTopic(inner *broker.Topic, duplicate, reorder string) (*chaosTopic, *broker.Topic) {
	c := &chaosTopic{inner: inner, duplicate: duplicate, reorder: reorder, seen: map[string]int{}}
	// One attempt: the relay decides about retries. The wrapper is not a
	// broker: only the real topic reports spans and metrics.
	quiet := broker.Telemetry{Logger: slog.New(slog.DiscardHandler), TracerProvider: tnoop.NewTracerProvider(), MeterProvider: mnoop.NewMeterProvider()}
	return c, broker.NewTopic(c, &broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}, Telemetry: quiet})
}

func (c *chaosTopic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	for _, dm := range msgs {
		m := &broker.Message{ID: dm.ID, Key: dm.Key, Headers: dm.Headers, Body: dm.Body}
		c.mu.Lock()
		first := false
		if c.armed {
			c.seen[m.ID]++
			first = c.seen[m.ID] == 1
		}
		var out []*broker.Message
		switch {
		case first && m.ID == c.reorder:
			c.held = m // published after the next message of its key
		case first && m.ID == c.duplicate:
			out = []*broker.Message{m, m}
			c.fired.duplicate = true
		default:
			out = []*broker.Message{m}
		}
		if c.held != nil && c.held != m && c.held.Key == m.Key {
			out = append(out, c.held)
			c.held = nil
			c.fired.reorder = true
		}
		c.mu.Unlock()
		for _, o := range out {
			if err := c.inner.Publish(ctx, o); err != nil {
				return err
			}
			c.mu.Lock()
			c.publishes++
			c.mu.Unlock()
		}
	}
	return nil
}

// arm starts the faults.
func (c *chaosTopic) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

// flush publishes a message still held back (its key had no later
// message).
func (c *chaosTopic) flush(ctx context.Context) error {
	c.mu.Lock()
	m := c.held
	c.held = nil
	c.mu.Unlock()
	if m == nil {
		return nil
	}
	if err := c.inner.Publish(ctx, m); err != nil {
		return err
	}
	c.mu.Lock()
	c.publishes++
	c.mu.Unlock()
	return nil
}

func (c *chaosTopic) Capabilities() capability.Topic { return c.inner.Capabilities() }
func (c *chaosTopic) Classify(err error) driver.ErrorInfo {
	var be *broker.Error
	if errors.As(err, &be) {
		return driver.ErrorInfo{Code: driver.CodeOf(err), MaybeSent: be.MaybeSent}
	}
	return driver.ErrorInfo{}
}
func (c *chaosTopic) As(any) bool             { return false }
func (c *chaosTopic) ErrorAs(error, any) bool { return false }
func (c *chaosTopic) Close() error            { return nil }

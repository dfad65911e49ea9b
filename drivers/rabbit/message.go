package rabbit

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// Headers this driver adds to AMQP messages. They never appear in
// Message.Headers on receive, except HeaderDeadLetterReason.
const (
	// hdrKey carries Message.Key when the routing key does not (partitioned
	// topics, a fixed RoutingKey, copies parked in a delay queue).
	hdrKey = "wary-key"
	// hdrPrior counts the deliveries a message had before it was copied
	// into a delay queue (nack with delay), so Attempt keeps counting.
	hdrPrior = "wary-prior-attempts"
	// hdrReason is driver.HeaderDeadLetterReason.
	hdrReason = driver.HeaderDeadLetterReason
)

// maxShortStr is AMQP 0-9-1's limit for routing keys, message IDs and
// header names.
const maxShortStr = 255

// invalidError is a message the driver cannot encode in AMQP.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "rabbit: " + e.msg }

func checkMessage(m *driver.Message, routingKey string) error {
	switch {
	case len(m.ID) > maxShortStr:
		return &invalidError{fmt.Sprintf("message ID is %d bytes; AMQP allows %d", len(m.ID), maxShortStr)}
	case len(routingKey) > maxShortStr:
		return &invalidError{fmt.Sprintf("routing key (the message key) is %d bytes; AMQP allows %d", len(routingKey), maxShortStr)}
	}
	for _, h := range m.Headers {
		if len(h[0]) > maxShortStr {
			return &invalidError{fmt.Sprintf("header name is %d bytes; AMQP allows %d", len(h[0]), maxShortStr)}
		}
	}
	return nil
}

// toPublishing encodes m. keyHeader puts m.Key in the wary-key header.
func toPublishing(m *driver.Message, keyHeader bool) amqp.Publishing {
	var h amqp.Table
	if len(m.Headers) > 0 || keyHeader {
		h = make(amqp.Table, len(m.Headers)+1)
		for _, p := range m.Headers {
			h[p[0]] = p[1]
		}
		if keyHeader {
			h[hdrKey] = m.Key
		}
	}
	return amqp.Publishing{
		Headers:      h,
		MessageId:    m.ID,
		DeliveryMode: amqp.Persistent,
		Body:         m.Body,
	}
}

// isBrokerHeader reports headers RabbitMQ adds (delivery count,
// dead-lettering history) and those reserved for wary, which are not the
// user's: they never reach Message.Headers as they arrived, and a copy
// (delayed nack, dead letter) does not carry them over.
func isBrokerHeader(k string) bool {
	switch k {
	case "x-delivery-count", "x-death":
		return true
	}
	return strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-") || driver.ReservedHeader(k)
}

// maxCount bounds the delivery counts read from headers (x-delivery-count,
// wary-prior-attempts), so that Attempt cannot overflow or go negative.
const maxCount = 1 << 20

// origin is what a subscription knows of where a delivery comes from; it
// decides which headers of the delivery to trust (see the package doc,
// Trusted headers).
type origin struct {
	// queue is the queue the delivery was consumed from.
	queue string
	// partitions > 1: queue is partition number partition of them, and
	// the key travels in the wary-key header. Otherwise the key is the
	// routing key, or the wary-key header when there is one.
	partitions, partition int
	// deadLettersFrom is the exchange through which dead letters reach
	// the queue ("": the queue is not a dead-letter queue).
	deadLettersFrom string
}

// fromDelivery decodes d, trusting only what RabbitMQ or wary itself set:
//   - x-delivery-count only on a redelivery (d.Redelivered, which only
//     the broker sets; a quorum queue overwrites a producer's count), at
//     least 1 there, at most maxCount;
//   - wary-prior-attempts only on a message that came back from one of
//     the queue's delay queues (through the default exchange, routed to
//     the queue, its latest x-death an expiry from "<queue>.delay.<n>ms")
//     or that reached a dead-letter queue through its dead-letter exchange;
//     at most maxCount;
//   - a dead-letter reason (wary-dead-letter-reason, x-death, x-first-
//     death-reason) only on a message that reached the queue through
//     origin.deadLettersFrom;
//   - wary-key as the key on a partitioned queue only if the key hashes to
//     the queue's partition (otherwise the message has no key); a key, from
//     wary-key or the routing key, only if it is valid UTF-8.
//
// Every other reserved header (wary-...) is dropped. prior is the trusted
// wary-prior-attempts.
func fromDelivery(d *amqp.Delivery, o origin) (m *driver.Message, prior int) {
	m = &driver.Message{ID: d.MessageId, Body: d.Body, Redelivered: d.Redelivered}
	viaLadder := d.Exchange == "" && d.RoutingKey == o.queue && o.queue != "" && fromDelayQueue(d.Headers, o.queue)
	viaDLX := o.deadLettersFrom != "" && d.Exchange == o.deadLettersFrom
	key, hasKey := "", false
	if k, ok := d.Headers[hdrKey].(string); ok && utf8.ValidString(k) {
		key, hasKey = k, true
	}
	switch {
	case o.partitions > 1:
		m.Key = key
		if partition(&driver.Message{ID: d.MessageId, Key: key}, o.partitions) != o.partition {
			m.Key = "" // not where its key would put it: not its key
		}
	case hasKey:
		m.Key = key
	case !viaLadder && utf8.ValidString(d.RoutingKey):
		// Keys are UTF-8: another producer's routing key that is not is
		// no key wary could have sent.
		m.Key = d.RoutingKey
	}
	var count int64
	if d.Redelivered {
		count = max(min(toInt(d.Headers["x-delivery-count"]), maxCount), 1)
	}
	if viaLadder || viaDLX {
		prior = int(max(min(toInt(d.Headers[hdrPrior]), maxCount), 0))
	}
	for k, v := range d.Headers {
		if isBrokerHeader(k) {
			continue
		}
		if m.Headers == nil {
			m.Headers = make(driver.Headers, 0, len(d.Headers))
		}
		m.Headers = append(m.Headers, [2]string{k, headerString(v)})
	}
	m.Attempt = prior + int(count) + 1
	if viaDLX {
		r, _ := d.Headers[hdrReason].(string)
		if r == "" {
			r = deathReason(d.Headers)
		}
		if r != "" {
			m.Headers.Set(hdrReason, r)
		}
	}
	return m, prior
}

// fromDelayQueue reports whether the latest x-death of h is an expiry in
// one of queue's delay queues.
func fromDelayQueue(h amqp.Table, queue string) bool {
	deaths, ok := h["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		return false
	}
	last, ok := deaths[0].(amqp.Table)
	if !ok {
		return false
	}
	reason, _ := last["reason"].(string)
	q, _ := last["queue"].(string)
	return reason == "expired" && strings.HasPrefix(q, queue+".delay.") && isDelayQueue(q) && strings.Count(q[len(queue):], ".") == 2
}

// deathReason is why RabbitMQ last dead-lettered the message ("" if it did
// not, or if the last death was a delay queue handing the message back).
func deathReason(h amqp.Table) string {
	if deaths, ok := h["x-death"].([]any); ok && len(deaths) > 0 {
		// x-death is sorted most recent first.
		if last, ok := deaths[0].(amqp.Table); ok {
			reason, _ := last["reason"].(string)
			queue, _ := last["queue"].(string)
			if reason == "expired" && isDelayQueue(queue) {
				return ""
			}
			return reason
		}
	}
	if r, ok := h["x-first-death-reason"].(string); ok {
		return r
	}
	return ""
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		if n > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(n)
	}
	return 0
}

// headerString renders an AMQP header value as a string: strings as they
// are, numbers in decimal, times in RFC 3339, other values with fmt.
func headerString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// republish builds a copy of d for a delay queue or the dead-letter
// exchange: the user's headers and properties, without RabbitMQ's
// bookkeeping headers, with the key and extra headers set.
func republish(d *amqp.Delivery, key string, extra amqp.Table) amqp.Publishing {
	h := make(amqp.Table, len(d.Headers)+len(extra)+1)
	// Reserved and broker headers of the delivery are not carried over:
	// the copy carries what the driver trusted (key, attempts) and sets.
	for k, v := range d.Headers {
		if !isBrokerHeader(k) {
			h[k] = v
		}
	}
	h[hdrKey] = key
	for k, v := range extra {
		h[k] = v
	}
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

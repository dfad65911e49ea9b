package rabbit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
	for k := range m.Headers {
		if len(k) > maxShortStr {
			return &invalidError{fmt.Sprintf("header name is %d bytes; AMQP allows %d", len(k), maxShortStr)}
		}
	}
	return nil
}

// toPublishing encodes m. keyHeader puts m.Key in the wary-key header.
func toPublishing(m *driver.Message, keyHeader bool) amqp.Publishing {
	var h amqp.Table
	if len(m.Headers) > 0 || keyHeader {
		h = make(amqp.Table, len(m.Headers)+1)
		for k, v := range m.Headers {
			h[k] = v
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
// dead-lettering history) and ours, which are not the user's.
func isBrokerHeader(k string) bool {
	switch k {
	case "x-delivery-count", "x-death", hdrKey, hdrPrior:
		return true
	}
	return strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-")
}

// fromDelivery decodes d. keyFromRoutingKey: Key is the routing key unless
// the wary-key header says otherwise.
func fromDelivery(d *amqp.Delivery, keyFromRoutingKey bool) (m *driver.Message, prior int) {
	m = &driver.Message{ID: d.MessageId, Body: d.Body, Redelivered: d.Redelivered}
	if keyFromRoutingKey {
		m.Key = d.RoutingKey
	}
	var count int64
	dead := false // RabbitMQ dead-lettered it at some point
	for k, v := range d.Headers {
		switch {
		case k == hdrKey:
			if key, ok := v.(string); ok {
				m.Key = key
			}
		case k == hdrPrior:
			prior = int(toInt(v))
		case k == "x-delivery-count":
			count = toInt(v)
		case k == "x-death" || k == "x-first-death-reason":
			dead = true
		case isBrokerHeader(k):
		default:
			if m.Headers == nil {
				m.Headers = make(map[string]string, len(d.Headers))
			}
			m.Headers[k] = headerString(v)
		}
	}
	m.Attempt = prior + int(count) + 1
	if dead {
		if _, ok := m.Headers[hdrReason]; !ok {
			if r := deathReason(d.Headers); r != "" {
				if m.Headers == nil {
					m.Headers = map[string]string{}
				}
				m.Headers[hdrReason] = r
			}
		}
	}
	return m, prior
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
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
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

package rabbit

import (
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP 0-9-1 sends a message's properties, headers included, in one
// content-header frame, which may not exceed the connection's negotiated
// frame_max: RabbitMQ answers a larger one by closing the whole connection
// (FRAME_ERROR), and with it every channel and unsettled delivery on it.
// The body is split over as many frames as it needs; the header is not.
// So the driver computes the exact size of the content header it is about
// to send and refuses a message whose header does not fit, before sending
// anything.
const (
	// frameOverhead is a frame's type, channel, payload size and end octet.
	frameOverhead = 8
	// contentHeaderFixed is a content header's class id, weight, body size
	// and property flags.
	contentHeaderFixed = 2 + 2 + 8 + 2
	// headerReserve is what capability.Topic.MaxHeaderSize leaves of the
	// frame_max for what is not the user's header names and values:
	//   - the frame overhead and the content header's fixed part (22);
	//   - the header table's length (4);
	//   - the properties the driver sets (message-id, up to 256 bytes with
	//     its length; delivery mode, 1), and those a delayed nack or a
	//     dead-letter copies from the delivery (content type and encoding,
	//     correlation id, reply-to, type, app id: up to 6×256; priority 1;
	//     timestamp 8);
	//   - the driver's own headers, names and encodings: wary-key (14 plus
	//     the key), wary-prior-attempts (25), wary-dead-letter-reason (29
	//     plus a reason of at most driver.MaxReasonLen bytes, as
	//     broker.Delivery.DeadLetter, the only way to SendDeadLetters, bounds it);
	//   - each header's own encoding (a length octet for the name, a type
	//     octet and a 4-byte length for the value), which is not covered:
	//     many small headers use up the reserve sooner.
	// 4 KiB covers the fixed parts with room to spare. The budget is an
	// upper bound: the exact check, made on every publish, also counts
	// each header's 6 bytes of encoding and the key when it travels in
	// wary-key (partitioned topics, a fixed RoutingKey).
	headerReserve = 4096
)

// headerBudget is capability.Topic.MaxHeaderSize for a connection whose
// frame_max is frameMax (0: unlimited, no separate budget).
func headerBudget(frameMax int) int {
	if frameMax <= 0 {
		return 0
	}
	return max(frameMax-headerReserve, 0)
}

// tooLargeError is a message whose content header exceeds frame_max. It
// names the message by ID and never repeats a header.
type tooLargeError struct {
	id              string
	size, frameMax  int
	keyInHeader     bool
	headers, keyLen int
}

func (e *tooLargeError) Error() string {
	s := fmt.Sprintf("rabbit: message %q: its AMQP content header (%d headers", e.id, e.headers)
	if e.keyInHeader {
		s += fmt.Sprintf(", a %d-byte key in wary-key", e.keyLen)
	}
	return s + fmt.Sprintf(", properties) would take %d bytes, over the connection's frame_max of %d; RabbitMQ would close the connection", e.size, e.frameMax)
}

// checkFrame reports p if its content-header frame would exceed frameMax
// (0: unlimited).
func checkFrame(p *amqp.Publishing, frameMax int) error {
	n, ok := contentHeaderSize(p)
	limit := math.MaxUint32
	if frameMax > 0 {
		limit = frameMax
	}
	if !ok || n+frameOverhead > limit {
		key, inHeader := p.Headers[hdrKey].(string)
		return &tooLargeError{id: p.MessageId, size: n + frameOverhead, frameMax: frameMax, keyInHeader: inHeader, headers: len(p.Headers), keyLen: len(key)}
	}
	return nil
}

// contentHeaderSize is the payload size of the content-header frame
// amqp091-go writes for p (see its headerFrame.write); false if a value
// cannot be encoded or a length overflows the protocol's 32 bits.
func contentHeaderSize(p *amqp.Publishing) (int, bool) {
	n := contentHeaderFixed
	for _, s := range []string{p.ContentType, p.ContentEncoding, p.CorrelationId, p.ReplyTo, p.Expiration, p.MessageId, p.Type, p.UserId, p.AppId} {
		if s != "" {
			if len(s) > maxShortStr {
				return 0, false
			}
			n += 1 + len(s)
		}
	}
	if len(p.Headers) > 0 {
		t, ok := tableSize(p.Headers, 0)
		if !ok {
			return 0, false
		}
		n += t
	}
	if p.DeliveryMode > 0 {
		n++
	}
	if p.Priority > 0 {
		n++
	}
	if !p.Timestamp.IsZero() {
		n += 8
	}
	return n, n <= math.MaxUint32
}

// maxNesting bounds how deep tableSize follows nested tables and arrays.
const maxNesting = 64

// tableSize is the encoded size of t: its 4-byte length and its entries.
func tableSize(t amqp.Table, depth int) (int, bool) {
	if depth > maxNesting {
		return 0, false
	}
	n := 4
	for k, v := range t {
		if len(k) > maxShortStr {
			return 0, false
		}
		f, ok := fieldSize(v, depth)
		if !ok {
			return 0, false
		}
		n += 1 + len(k) + f
		if n > math.MaxUint32 {
			return 0, false
		}
	}
	return n, true
}

// fieldSize is the encoded size of a field value, type octet included, as
// amqp091-go's writeField encodes it.
func fieldSize(v any, depth int) (int, bool) {
	switch x := v.(type) {
	case bool, byte, int8:
		return 2, true
	case int16, uint16:
		return 3, true
	case int, int32, uint32, float32:
		return 5, true
	case amqp.Decimal:
		return 6, true
	case int64, float64, time.Time:
		return 9, true
	case string:
		return 5 + len(x), len(x) <= math.MaxUint32
	case []byte:
		return 5 + len(x), len(x) <= math.MaxUint32
	case nil:
		return 1, true
	case amqp.Table:
		n, ok := tableSize(x, depth+1)
		return 1 + n, ok
	case []any:
		if depth > maxNesting {
			return 0, false
		}
		n := 5
		for _, e := range x {
			f, ok := fieldSize(e, depth+1)
			if !ok {
				return 0, false
			}
			n += f
			if n > math.MaxUint32 {
				return 0, false
			}
		}
		return n, true
	}
	return 0, false
}

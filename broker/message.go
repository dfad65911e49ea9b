package broker

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// Message is one message: a stable logical ID, an ordering key, headers and
// a body.
type Message struct {
	// ID is the stable logical ID that broker dedup and inboxes recognise
	// (driver.ValidateID); Publish fills an empty one with a random ID.
	ID string
	// Key is the ordering key (Kafka record key, SQS MessageGroupId, ...).
	Key string
	// Headers are application headers, valid UTF-8, each name once. Names
	// starting with "wary-" are reserved (driver.ReservedHeader), except
	// the Header constants of this package.
	Headers Headers
	// Body is the payload: any bytes.
	Body []byte

	as driver.Aser // the driver's, on received messages
}

// As reaches the driver's own message type on a received message (see each
// driver's package doc for the types it accepts).
func (m *Message) As(i any) bool {
	if m.as == nil {
		return false
	}
	return m.as.As(i)
}

// Headers are a message's application headers, name and value pairs:
// Headers{{"tenant", "t1"}}; methods Get, Lookup, Set, Del, All, Len, Clone.
type Headers = driver.Headers

// Event-identity headers: the reserved "wary-" names a producer may set.
// Package idem's outbox writes them and its version checks read them.
const (
	// HeaderAggregateID is the ID of the event's aggregate (entity).
	HeaderAggregateID = "wary-aggregate-id"
	// HeaderAggregateVersion is the aggregate's version after the event.
	HeaderAggregateVersion = "wary-aggregate-version"
	// HeaderSequence is the event's per-aggregate sequence number.
	HeaderSequence = "wary-sequence"
	// HeaderType is the event's type name ("order.cancelled").
	HeaderType = "wary-type"
	// HeaderContentType names the body's Codec, for NewMessage and Decode.
	HeaderContentType = "wary-content-type"
)

// size is the message's size as the portable layer counts it against
// capability.Topic.MaxMessageSize: body, ID, key, and header names and values.
func (m *Message) size() int {
	n := len(m.Body) + len(m.ID) + len(m.Key)
	return n + headersSize(m.Headers)
}

// headersSize is the headers' names and values, in bytes.
func headersSize(h Headers) int {
	n := 0
	for _, p := range h {
		n += len(p[0]) + len(p[1])
	}
	return n
}

// NewID returns a random 128-bit message ID in hex.
func NewID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validate(caps capability.Topic, m *Message) error {
	if m == nil {
		return invalidf("publish", "nil message")
	}
	if caps.KeyRequired && m.Key == "" {
		return invalidf("publish", "message %q has no ordering key, and this broker requires one (%s)", m.ID, caps.OrderingKey)
	}
	if m.ID != "" { // an empty ID gets a random one
		if err := driver.ValidateID(m.ID); err != nil {
			return invalidf("publish", "%v", errors.Unwrap(err))
		}
	}
	if !utf8.ValidString(m.Key) {
		return invalidf("publish", "message %q: the key must be valid UTF-8", m.ID)
	}
	if err := driver.ValidateHeaders(m.Headers); err != nil {
		return invalidf("publish", "message %q: %v", m.ID, errors.Unwrap(err))
	}
	if caps.MaxHeaderSize > 0 {
		if n := headersSize(m.Headers); n > caps.MaxHeaderSize {
			return newError("publish", driver.TooLarge, false, fmt.Errorf("message %q: headers take %d bytes, over the broker's header limit of %d", m.ID, n, caps.MaxHeaderSize))
		}
	}
	if caps.MaxMessageSize > 0 {
		if n := m.size(); n > caps.MaxMessageSize {
			return newError("publish", driver.TooLarge, false, errTooLarge{id: m.ID, size: n, max: caps.MaxMessageSize})
		}
	}
	return nil
}

type errTooLarge struct {
	id        string
	size, max int
}

func (e errTooLarge) Error() string {
	return "message " + quote(e.id) + " is " + itoa(e.size) + " bytes, over the broker's limit of " + itoa(e.max)
}

// Backoff is an exponential backoff with full jitter: the delay before
// retry n is drawn from [0, Ceiling(n)].
type Backoff struct {
	// Initial is the first ceiling (default 100ms).
	Initial time.Duration
	// Max caps every ceiling (default 30s).
	Max time.Duration
	// Multiplier grows the ceiling per attempt (default 2; values below 1,
	// NaN and infinities mean the default).
	Multiplier float64
}

// check reports a Backoff that cannot be used (a negative duration, Max
// below Initial, a Multiplier that is negative or not finite) as an error
// matching ErrInvalid that names what (the field holding it).
func (b Backoff) check(what string) error {
	switch {
	case b.Initial < 0 || b.Max < 0:
		return invalidf("open", "%s: a negative duration", what)
	case b.Initial > 0 && b.Max > 0 && b.Max < b.Initial:
		return invalidf("open", "%s: Max is below Initial", what)
	case b.Multiplier < 0 || math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0):
		return invalidf("open", "%s: Multiplier is negative or not a finite number", what)
	}
	return nil
}

// Delay returns a random delay in [0, Ceiling(attempt)].
func (b Backoff) Delay(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Ceiling returns the largest delay before retry attempt (1-based):
// Initial × Multiplier^(attempt-1), capped at Max.
func (b Backoff) Ceiling(attempt int) time.Duration {
	initial, maxd, mult := b.Initial, b.Max, b.Multiplier
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if maxd <= 0 {
		maxd = 30 * time.Second
	}
	if !(mult >= 1) || math.IsInf(mult, 0) {
		mult = 2
	}
	if attempt < 1 {
		attempt = 1
	}
	d := float64(initial) * math.Pow(mult, float64(attempt-1))
	if math.IsNaN(d) || d >= float64(maxd) {
		return maxd
	}
	return time.Duration(d)
}

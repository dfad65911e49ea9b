package servicebus

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Application properties the driver sets on its way through Service Bus,
// removed from Headers on receipt.
const (
	// propKey carries Message.Key on entities without sessions (on session
	// entities the key is the SessionId).
	propKey = "wary-key"
	// propID carries Message.ID on a copy scheduled by Nack with a delay,
	// whose own MessageId is fresh so that duplicate detection keeps it.
	propID = "wary-id"
	// propAttempts counts the deliveries before a scheduled copy: the
	// copy's DeliveryCount restarts at 1.
	propAttempts = "wary-attempts"
)

// Service Bus limits on identifiers.
const (
	// MaxIDLen is the longest MessageId Service Bus accepts (128
	// characters); Message.ID is its MessageId.
	MaxIDLen = 128
	// MaxSessionIDLen is the longest SessionId (128 characters).
	MaxSessionIDLen = 128
)

// invalidMessage is a message Service Bus would refuse, refused before
// sending (ErrInvalid, not sent).
type invalidMessage struct{ why string }

func (e *invalidMessage) Error() string { return e.why }

func invalidf(format string, args ...any) error {
	return &invalidMessage{fmt.Sprintf(format, args...)}
}

// checkMessage refuses, before any network I/O, a message Service Bus
// would refuse.
func checkMessage(m *driver.Message, sessions bool) error {
	if n := utf8.RuneCountInString(m.ID); n > MaxIDLen {
		return invalidf("message ID is %d characters, over Service Bus's MessageId limit of %d", n, MaxIDLen)
	}
	if sessions && m.Key == "" {
		return invalidf("message %q has no Key, and the entity requires sessions (Key is the SessionId)", m.ID)
	}
	if n := utf8.RuneCountInString(m.Key); sessions && n > MaxSessionIDLen {
		return invalidf("message %q: key is %d characters, over Service Bus's SessionId limit of %d", m.ID, n, MaxSessionIDLen)
	}
	// The SDK reports a property that is not valid UTF-8 as a lost
	// connection: refuse it here (the portable layer checks it too).
	for k, v := range m.Headers.All() {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalidf("message %q: header names and values must be valid UTF-8", m.ID)
		}
	}
	return nil
}

// toSB converts an outgoing message.
func toSB(m *driver.Message, sessions bool) *azservicebus.Message {
	id := m.ID
	out := &azservicebus.Message{MessageID: &id, Body: m.Body}
	if len(m.Headers) > 0 || (!sessions && m.Key != "") {
		out.ApplicationProperties = make(map[string]any, len(m.Headers)+1)
		for k, v := range m.Headers.All() {
			out.ApplicationProperties[k] = v
		}
	}
	if sessions {
		key := m.Key
		out.SessionID = &key
	} else if m.Key != "" {
		out.ApplicationProperties[propKey] = m.Key
	}
	return out
}

// fromSB converts a received message, trusting only what Service Bus or
// the driver itself set (see the package doc, Trusted headers):
//   - "wary-id" and "wary-attempts" only on a copy that Nack scheduled (the
//     service stamps ScheduledEnqueueTime on it) or on a message read from
//     a dead-letter queue (a copy that was dead-lettered later);
//   - the dead-letter reason only on a message read from a dead-letter
//     queue (the SDK reads DeadLetterReason from application properties,
//     which any producer can set);
//   - "wary-key" as the key on entities without sessions.
//
// Every other reserved property (wary-...) is dropped. Attempt is
// DeliveryCount plus the deliveries counted before a scheduled copy.
func fromSB(rm *azservicebus.ReceivedMessage, deadLetters bool) *driver.Message {
	m := &driver.Message{ID: rm.MessageID, Body: rm.Body}
	ours := deadLetters || rm.ScheduledEnqueueTime != nil
	prior := 0
	for k, v := range rm.ApplicationProperties {
		switch {
		case k == propKey:
			m.Key = fmt.Sprint(v)
			continue
		case k == propID && ours:
			m.ID = fmt.Sprint(v)
			continue
		case k == propAttempts && ours:
			prior = min(max(attemptsOf(v), 0), maxAttempts)
			continue
		case (k == "DeadLetterReason" || k == "DeadLetterErrorDescription") && deadLetters && rm.DeadLetterReason != nil:
			continue // reported as HeaderDeadLetterReason
		case driver.ReservedHeader(k):
			continue // not the driver's: no producer may speak for wary
		}
		if m.Headers == nil {
			m.Headers = make(driver.Headers, 0, len(rm.ApplicationProperties))
		}
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		m.Headers = append(m.Headers, [2]string{k, s}) // a map's keys: each once
	}
	if rm.SessionID != nil {
		m.Key = *rm.SessionID
	}
	if deadLetters && rm.DeadLetterReason != nil {
		m.Headers.Set(driver.HeaderDeadLetterReason, *rm.DeadLetterReason)
	}
	m.Attempt = prior + int(rm.DeliveryCount)
	if m.Attempt < 1 {
		m.Attempt = 1
	}
	m.Redelivered = m.Attempt > 1
	if rm.EnqueuedTime != nil {
		m.PublishTime = *rm.EnqueuedTime
	}
	m.As = (*received)(rm)
	return m
}

// received is Message.As on received (and peeked) messages:
// **azservicebus.ReceivedMessage. A conversion of the SDK's pointer, it
// costs no allocation.
type received azservicebus.ReceivedMessage

func (r *received) As(i any) bool {
	p, ok := i.(**azservicebus.ReceivedMessage)
	if ok {
		*p = (*azservicebus.ReceivedMessage)(r)
	}
	return ok
}

// maxAttempts bounds the count read from "wary-attempts", so that Attempt
// cannot overflow.
const maxAttempts = 1 << 20

func attemptsOf(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int:
		return n
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// copyForRetry is the copy Nack schedules: the same body, key and headers,
// a fresh MessageId (duplicate detection would drop the original's), the
// original ID and the deliveries so far in properties.
func copyForRetry(rm *azservicebus.ReceivedMessage, attempts int) *azservicebus.Message {
	props := make(map[string]any, len(rm.ApplicationProperties)+2)
	for k, v := range rm.ApplicationProperties {
		props[k] = v
	}
	if _, ok := props[propID]; !ok {
		props[propID] = rm.MessageID
	}
	props[propAttempts] = int64(attempts)
	id := broker.NewID()
	return &azservicebus.Message{
		MessageID:             &id,
		Body:                  rm.Body,
		ApplicationProperties: props,
		SessionID:             rm.SessionID,
		ContentType:           rm.ContentType,
		CorrelationID:         rm.CorrelationID,
		Subject:               rm.Subject,
	}
}

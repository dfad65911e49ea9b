package idem

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/wary-go/wary/broker"
)

// Message headers that carry an event's identity (the broker package's
// event-identity headers, the reserved "wary-" names a producer may set).
// The outbox writes them; any producer may. Values are decimal integers
// where noted.
const (
	// HeaderAggregateID is the ID of the aggregate (entity) the event
	// belongs to. Parking holds later messages of the same aggregate behind
	// a parked one.
	HeaderAggregateID = broker.HeaderAggregateID
	// HeaderAggregateVersion is the aggregate's version after the event:
	// 1 for the event that creates it, then 2, 3, ... without holes.
	HeaderAggregateVersion = broker.HeaderAggregateVersion
	// HeaderSequence is the event's per-aggregate sequence number, which
	// orders events that do not bump the version.
	HeaderSequence = broker.HeaderSequence
	// HeaderType is the event's type name ("order.cancelled").
	HeaderType = broker.HeaderType
)

// Event is the identity of an event, read from a message's headers.
type Event struct {
	AggregateID string
	Version     int64
	Sequence    int64
	Type        string
}

// ErrNoEvent matches the error ParseEvent returns for a message without an
// aggregate ID or with a malformed version or sequence. A handler's error
// matching it settles the message for good, as the version checks'
// (Options.Versions) does: dead-lettered, or parked where the broker
// cannot dead-letter; never retried.
var ErrNoEvent = errors.New("idem: message carries no valid event identity")

// ParseEvent reads an Event from m's headers. The aggregate ID is required;
// version and sequence are optional (0 if absent) but must be decimal
// integers when present, and the version must not be negative.
func ParseEvent(m *broker.Message) (Event, error) {
	var ev Event
	if m == nil {
		return ev, fmt.Errorf("%w: nil message", ErrNoEvent)
	}
	ev.AggregateID = m.Headers.Get(HeaderAggregateID)
	if ev.AggregateID == "" {
		return ev, fmt.Errorf("%w: message %q has no %s header", ErrNoEvent, m.ID, HeaderAggregateID)
	}
	ev.Type = m.Headers.Get(HeaderType)
	var err error
	if ev.Version, err = intHeader(m, HeaderAggregateVersion); err != nil {
		return ev, err
	}
	if ev.Sequence, err = intHeader(m, HeaderSequence); err != nil {
		return ev, err
	}
	return ev, nil
}

func intHeader(m *broker.Message, name string) (int64, error) {
	s, ok := m.Headers.Lookup(name)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: message %q: header %s=%q is not a non-negative integer", ErrNoEvent, m.ID, name, s)
	}
	return n, nil
}

// Headers returns the headers that carry ev, for a producer to merge into a
// message.
func (ev Event) Headers() broker.Headers {
	h := make(broker.Headers, 1, 4)
	h[0] = [2]string{HeaderAggregateID, ev.AggregateID}
	if ev.Version != 0 {
		h = append(h, [2]string{HeaderAggregateVersion, strconv.FormatInt(ev.Version, 10)})
	}
	if ev.Sequence != 0 {
		h = append(h, [2]string{HeaderSequence, strconv.FormatInt(ev.Sequence, 10)})
	}
	if ev.Type != "" {
		h = append(h, [2]string{HeaderType, ev.Type})
	}
	return h
}

// ParkError, returned by a handler, asks the inbox to roll the transaction
// back and then either park the message at once (Now) or retry it with
// backoff, parking it after Options.MaxAttempts failed attempts. A parked
// message counts as consumed: it is acknowledged, recorded in the inbox,
// and waits in the park for an operator. The version checks
// (Options.Versions) return one for a gap or a missing aggregate.
type ParkError struct {
	// Reason is stored with the parked message.
	Reason string
	// Now parks without retrying.
	Now bool
}

func (e *ParkError) Error() string {
	if e.Now {
		return "idem: park: " + e.Reason
	}
	return "idem: retry, then park: " + e.Reason
}

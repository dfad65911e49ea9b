// Package seam is what idem's packages and the SQL stores share across
// the store seam, which is internal: the handle a store gives idem's
// constructors (Driver, Provider), and the few types and errors that cross
// the seam and that no user handles (a claim's request and answers, early
// events, ErrData's marking).
//
// The types a user sees are defined once, in the package the user imports
// (idem, idem/outbox, idem/keys), and the SQL code uses them directly; the
// interfaces a store implements are declared, unexported, by the package
// that calls them (idem's inbox, outbox's Outbox and Relay, keys' Caller),
// each of which asserts a Driver's implementation to its own interface once,
// when it is built.
package seam

import (
	"errors"
	"fmt"
	"time"

	"github.com/wary-go/wary/broker"
)

// ErrData matches the errors of a database refusing a value of one message
// (a message ID, key, aggregate ID or header it cannot store): an invalid
// byte sequence, a value too long for its column or index. Retrying the
// same message cannot succeed, so such errors are also broker.Permanent:
// the inbox dead-letters the message (or parks it where the broker cannot
// dead-letter) instead of retrying it for ever, and the other messages keep
// flowing. Stores mark such errors with DataError; connection failures and
// every other error stay transient.
var ErrData = errors.New("idem: the database refused a value of the message")

// DataError marks err as a per-message data error (see ErrData).
func DataError(err error) error {
	if err == nil || errors.Is(err, ErrData) {
		return err
	}
	return broker.Permanent(fmt.Errorf("%w: %w", ErrData, err))
}

// ClaimRequest names the messages a claim records for a consumer.
type ClaimRequest struct {
	Consumer string
	// IDs are distinct message IDs, in the order to claim them (the inbox
	// sorts them, so that concurrent claims of overlapping sets cannot
	// deadlock on each other).
	IDs []string
	// Aggregates, if not nil, holds an aggregate ID for each of IDs (""
	// for none): for each message claimed with one, the answer says
	// whether Consumer has a parked message of that aggregate.
	Aggregates []string
	// At is the time recorded.
	At time.Time
}

// Claimed is a claim's answer for one message.
type Claimed struct {
	// New: this claim recorded the message; false: it was recorded
	// before (a duplicate).
	New bool
	// Held: New, and the consumer has a parked message of the message's
	// aggregate (ClaimRequest.Aggregates), so it must wait behind it.
	Held bool
}

// EarlyEvent is an early event as the store keeps it: the whole message,
// and when it was held.
type EarlyEvent struct {
	Consumer    string
	AggregateID string
	Version     int64
	// Awaited is the version the aggregate awaited when the event was
	// held (its version then, plus one).
	Awaited   int64
	MessageID string
	Key       string
	Headers   broker.Headers
	Body      []byte
	HeldAt    time.Time
}

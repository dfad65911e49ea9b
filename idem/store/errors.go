package store

import (
	"errors"
	"fmt"

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
var ErrData = errors.New("idem/store: the database refused a value of the message")

// DataError marks err as a per-message data error (see ErrData).
func DataError(err error) error {
	if err == nil || errors.Is(err, ErrData) {
		return err
	}
	return broker.Permanent(fmt.Errorf("%w: %w", ErrData, err))
}

// Conflicts is implemented by stores whose transactions can fail only
// because of concurrent ones, such that the same work tried again at once
// can succeed (PostgreSQL: a deadlock's victim, SQLSTATE 40P01, or a
// serialization failure, 40001). The inbox tries such a transaction again
// itself, a few times, instead of nacking its deliveries, since a nack
// counts toward the broker's delivery limit. idem finds it by type
// assertion on the Driver.
type Conflicts interface {
	// Conflict reports whether err, or an error it wraps, is such a
	// failure.
	Conflict(err error) bool
}

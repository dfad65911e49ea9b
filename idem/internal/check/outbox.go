package check

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// ErrOutboxMessage matches what OutboxMessage returns (it is
// outbox.ErrInvalidMessage).
var ErrOutboxMessage = errors.New("idem: invalid outbox message")

// eventHeaders are the headers a relay writes over a row's own.
var eventHeaders = []string{broker.HeaderAggregateID, broker.HeaderAggregateVersion, broker.HeaderSequence, broker.HeaderType}

// OutboxMessage checks, by its fields, the outbox.Message a relay would refuse to publish, or could not
// publish faithfully: the one rule for outbox rows, applied by
// outbox.Outbox.Add before it writes a row and by the stores as they read
// rows back (a row another writer put in the table), which the relay then
// quarantines instead of publishing. A message needs an ID
// (driver.ValidateID) and an aggregate ID that is valid UTF-8 and not
// only white space (unicode.IsSpace), a version of at least 0, a type of
// valid UTF-8, and headers that driver.ValidateHeaders accepts, none of
// them one of the event headers the relay writes (broker.HeaderContentType,
// which outbox.NewMessage sets, is the row's own). The error matches
// ErrOutboxMessage and, when the broker's rules refuse it, broker.ErrInvalid.
func OutboxMessage(id, aggregateID string, version int64, typ string, headers driver.Headers) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: message %q: %s", ErrOutboxMessage, id, fmt.Sprintf(format, args...))
	}
	if err := driver.ValidateID(id); err != nil {
		return fmt.Errorf("%w: message %q: %w", ErrOutboxMessage, id, err)
	}
	switch {
	case strings.TrimFunc(aggregateID, unicode.IsSpace) == "":
		return bad("no aggregate ID (empty or only white space)")
	case !utf8.ValidString(aggregateID) || !utf8.ValidString(typ):
		return bad("aggregate ID and type must be valid UTF-8")
	case version < 0:
		return bad("negative version %d", version)
	}
	for k := range headers.All() {
		for _, r := range eventHeaders {
			if strings.EqualFold(k, r) {
				return bad("header %s is written by the relay", r)
			}
		}
	}
	if err := driver.ValidateHeaders(headers); err != nil {
		return fmt.Errorf("%w: message %q: %w", ErrOutboxMessage, id, err)
	}
	return nil
}

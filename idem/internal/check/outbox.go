package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem/store"
)

// ErrOutboxMessage matches what OutboxMessage returns (it is
// outbox.ErrInvalidMessage).
var ErrOutboxMessage = errors.New("idem: invalid outbox message")

// eventHeaders are the headers a relay writes over a row's own.
var eventHeaders = []string{broker.HeaderAggregateID, broker.HeaderAggregateVersion, broker.HeaderSequence, broker.HeaderType}

// OutboxMessage checks what a relay would refuse to publish, or could not
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
func OutboxMessage(m *store.OutboxMessage) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: message %q: %s", ErrOutboxMessage, m.ID, fmt.Sprintf(format, args...))
	}
	if err := driver.ValidateID(m.ID); err != nil {
		return fmt.Errorf("%w: message %q: %w", ErrOutboxMessage, m.ID, err)
	}
	switch {
	case strings.TrimFunc(m.AggregateID, unicode.IsSpace) == "":
		return bad("no aggregate ID (empty or only white space)")
	case !utf8.ValidString(m.AggregateID) || !utf8.ValidString(m.Type):
		return bad("aggregate ID and type must be valid UTF-8")
	case m.Version < 0:
		return bad("negative version %d", m.Version)
	}
	for k := range m.Headers {
		for _, r := range eventHeaders {
			if strings.EqualFold(k, r) {
				return bad("header %s is written by the relay", r)
			}
		}
	}
	if err := driver.ValidateHeaders(m.Headers); err != nil {
		return fmt.Errorf("%w: message %q: %w", ErrOutboxMessage, m.ID, err)
	}
	return nil
}

// OutboxRow is how a store reads a row back (a claim, a listing, the
// stream): headers is the row's headers column (a JSON object of strings;
// "{}" or empty for none), and readErr what else the store could not read
// of it. A row that does not decode, or that OutboxMessage refuses, gets
// r.Invalid, an error matching ErrOutboxMessage: the relay settles it
// like a publish that failed for good (quarantined with the error, its
// aggregate held behind it) instead of failing the claim or the stream.
func OutboxRow(r *store.OutboxRow, headers string, readErr error) {
	r.Headers, r.Invalid = nil, nil
	if headers != "" && headers != "{}" {
		if err := json.Unmarshal([]byte(headers), &r.Headers); err != nil {
			r.Headers = nil
			readErr = errors.Join(readErr, fmt.Errorf("headers are not a JSON object of strings: %w", err))
		}
	}
	if readErr != nil {
		r.Invalid = fmt.Errorf("%w: row %d: %w", ErrOutboxMessage, r.RowID, readErr)
		return
	}
	r.Invalid = OutboxMessage(&r.OutboxMessage)
}

package sqlcore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/outbox"
)

// Unreadable starts the headers column of a row whose values a store's
// claim cannot read (MySQL: a row larger than max_allowed_packet), the
// reason after it: DecodeRow makes the row Invalid with that reason, and
// the relay quarantines it. A headers column is JSON otherwise, which
// never starts with a NUL.
const Unreadable = "\x00unreadable: "

// DecodeRow is how a store reads a row back (a claim, a listing, the
// stream): headers is the row's headers column (a JSON object of strings;
// "{}" or empty for none), and readErr what else the store could not read
// of it. A row that does not decode, or that check.OutboxMessage refuses, gets
// r.Invalid, an error matching outbox.ErrInvalidMessage: the relay settles it
// like a publish that failed for good (quarantined with the error, its
// aggregate held behind it) instead of failing the claim or the stream.
func DecodeRow(r *outbox.Row, headers string, readErr error) {
	r.Headers, r.Invalid = nil, nil
	if reason, ok := strings.CutPrefix(headers, Unreadable); ok {
		readErr, headers = errors.Join(readErr, errors.New(reason)), ""
	}
	if headers != "" && headers != "{}" {
		if err := json.Unmarshal([]byte(headers), &r.Headers); err != nil {
			r.Headers = nil
			readErr = errors.Join(readErr, fmt.Errorf("headers are not a JSON object of strings: %w", err))
		}
	}
	if readErr != nil {
		r.Invalid = fmt.Errorf("%w: row %d: %w", outbox.ErrInvalidMessage, r.RowID, readErr)
		return
	}
	r.Invalid = check.OutboxMessage(r.ID, r.AggregateID, r.Version, r.Type, r.Headers)
}

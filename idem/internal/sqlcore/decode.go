package sqlcore

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/outbox"
)

// DecodeRow is how a store reads a row back (a claim, a listing, the
// stream): headers is the row's headers column (a JSON object of strings;
// "{}" or empty for none), and readErr what else the store could not read
// of it. A row that does not decode, or that check.OutboxMessage refuses, gets
// r.Invalid, an error matching outbox.ErrInvalidMessage: the relay settles it
// like a publish that failed for good (quarantined with the error, its
// aggregate held behind it) instead of failing the claim or the stream.
func DecodeRow(r *outbox.Row, headers string, readErr error) {
	r.Headers, r.Invalid = nil, nil
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

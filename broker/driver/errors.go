package driver

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNotAttempted is the outcome, in a SendBatch *BatchError, of a message
// the driver did not send because another message of the batch was refused
// first. The portable layer reports it as certainly not sent.
var ErrNotAttempted = errors.New("not sent: another message of the batch was refused first")

// ErrorCode classifies a driver error.
type ErrorCode int

// Error codes. Drivers return raw errors and map them through Classify.
const (
	// Unknown: not classified; treated as not retryable.
	Unknown ErrorCode = iota
	// NotFound: the topic, queue or subscription does not exist.
	NotFound
	// TooLarge: the message exceeds the broker's size limit.
	TooLarge
	// Invalid: the broker rejected the request as malformed.
	Invalid
	// Closed: the topic, subscription or its connection is closed for good.
	Closed
	// LockLost: the delivery's lock expired or it was settled already, so
	// it can no longer be settled; the broker will (or did) redeliver it.
	LockLost
	// Canceled: the context was canceled.
	Canceled
	// DeadlineExceeded: the context's deadline passed.
	DeadlineExceeded
	// Unavailable: a transient failure (connection lost, broker busy,
	// throttled); retrying may succeed.
	Unavailable
	// PermissionDenied: credentials or rights are missing.
	PermissionDenied
)

var codeNames = [...]string{"unknown", "not found", "too large", "invalid", "closed", "lock lost", "canceled", "deadline exceeded", "unavailable", "permission denied"}

func (c ErrorCode) String() string {
	if int(c) >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "unknown"
}

// ErrorInfo is a driver's classification of one error.
type ErrorInfo struct {
	Code ErrorCode
	// MaybeSent is true when a failed send may nevertheless have reached the
	// broker (a timeout waiting for a confirm, a connection lost after the
	// write). It is false when the driver knows nothing was sent.
	MaybeSent bool
}

// BatchError is what SendBatch or a settle method (SendAcks, SendNacks,
// SendDeadLetters, ExtendLocks) returns when the messages or deliveries it
// was given did not all fare alike: Errs[i] is the outcome for msgs[i] or
// ids[i], nil for one sent or settled. Any other error is the outcome for
// every one. The portable layer classifies each error of Errs with
// Classify, so that, say, one delivery whose lock was lost is reported as
// LockLost while the others of the call are acknowledged, and one message
// too large as TooLarge (not sent) while the others of its batch were
// sent. A message SendBatch did not send because another was refused
// first has ErrNotAttempted.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	n, first := 0, error(nil)
	for _, err := range e.Errs {
		if err != nil {
			if n++; first == nil {
				first = err
			}
		}
	}
	return fmt.Sprintf("%d of %d failed, first: %v", n, len(e.Errs), first)
}

// Unwrap returns the errors of Errs that are not nil.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// BatchErrors returns the error for a send or settle of len(errs)
// messages or ids whose outcomes are errs: nil when every one is nil,
// errs[0] when every one is errs[0] (a single id, a request that failed as
// a whole), and a *BatchError otherwise.
func BatchErrors(errs []error) error {
	switch {
	case !slices.ContainsFunc(errs, func(err error) bool { return err != nil }):
		return nil
	case !slices.ContainsFunc(errs, func(err error) bool { return err != errs[0] }):
		return errs[0]
	}
	return &BatchError{Errs: errs}
}

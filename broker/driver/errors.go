package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// The error classes, matched with errors.Is. Package broker documents
// them and declares the same values (broker.ErrNotFound is ErrNotFound),
// which its users match; ClassOf maps an ErrorCode to its class, so that
// a driver's own error types and Error match them too.
var (
	ErrNotFound   = errors.New("wary: not found")
	ErrTooLarge   = errors.New("wary: message too large")
	ErrInvalid    = errors.New("wary: invalid")
	ErrClosed     = errors.New("wary: closed")
	ErrLockLost   = errors.New("wary: lock lost")
	ErrPermission = errors.New("wary: permission denied")
	ErrRetryable  = errors.New("wary: retryable")
)

// ClassOf returns the class matching code (ErrNotFound for NotFound,
// ErrRetryable for Unavailable, context.Canceled for Canceled, ...), or
// nil for Unknown. Drivers whose own error types must match the classes
// implement Is as target == driver.ClassOf(code).
func ClassOf(code ErrorCode) error {
	switch code {
	case NotFound:
		return ErrNotFound
	case TooLarge:
		return ErrTooLarge
	case Invalid:
		return ErrInvalid
	case Closed:
		return ErrClosed
	case LockLost:
		return ErrLockLost
	case PermissionDenied:
		return ErrPermission
	case Unavailable:
		return ErrRetryable
	case Canceled:
		return context.Canceled
	case DeadlineExceeded:
		return context.DeadlineExceeded
	}
	return nil
}

// Error is a classified error that a driver's constructor or URL opener
// returns (OpenError, Invalidf), or a check of this package (ValidateID,
// ValidateHeaders). It matches the class of its Code with errors.Is, as
// *broker.Error does; the portable layer (a Topic, a Subscription, the
// URLMux) turns it into a *broker.Error of the same class.
type Error struct {
	// Op is what failed: "open" (OpenError, Invalidf), "id", "headers".
	Op   string
	Code ErrorCode
	Err  error
}

func (e *Error) Error() string {
	s := "wary: " + e.Op
	if e.Code != Unknown {
		s += " (" + e.Code.String() + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether e belongs to the class target (see ClassOf).
func (e *Error) Is(target error) bool {
	if target == os.ErrDeadlineExceeded {
		return e.Code == DeadlineExceeded
	}
	return target != nil && target == ClassOf(e.Code)
}

// OpenError classifies a failure met while opening a topic or
// subscription as an *Error of Op "open". Driver constructors return it,
// so that their errors match the classes like every error of package
// broker. An err that is already an *Error is returned unchanged.
func OpenError(code ErrorCode, err error) error {
	if err == nil {
		return nil
	}
	var de *Error
	if errors.As(err, &de) {
		return err
	}
	return &Error{Op: "open", Code: code, Err: err}
}

// Invalidf returns an error matching ErrInvalid (Op "open"), for openers
// and drivers that reject a configuration.
func Invalidf(format string, args ...any) error {
	return &Error{Op: "open", Code: Invalid, Err: fmt.Errorf(format, args...)}
}

// CodeOf returns the code whose class err matches (see ClassOf), Unknown
// when it matches none. A driver that wraps a *broker.Topic or
// *broker.Subscription (a test double, a fault injector) classifies their
// errors with it.
func CodeOf(err error) ErrorCode {
	for c := NotFound; c <= PermissionDenied; c++ {
		if class := ClassOf(c); class != nil && errors.Is(err, class) {
			return c
		}
	}
	return Unknown
}

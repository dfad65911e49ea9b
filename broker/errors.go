package broker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wary-go/wary/broker/driver"
)

// Error classes, matched with errors.Is. Every error of a Topic,
// Subscription or Delivery method is an *Error of at most one class, and
// for Publish of exactly one of ErrNotSent and ErrMaybeSent. What the
// capabilities do not offer is errors.ErrUnsupported.
var (
	// ErrNotFound: the topic, queue or subscription does not exist.
	ErrNotFound = driver.ErrNotFound
	// ErrTooLarge: the message exceeds the broker's size limit.
	ErrTooLarge = driver.ErrTooLarge
	// ErrInvalid: the message, request or option is not valid.
	ErrInvalid = driver.ErrInvalid
	// ErrClosed: the topic or subscription was closed.
	ErrClosed = driver.ErrClosed
	// ErrLockLost: the delivery can no longer be settled; it comes again.
	ErrLockLost = driver.ErrLockLost
	// ErrPermission: credentials or rights are missing.
	ErrPermission = driver.ErrPermission

	// ErrRetryable: a transient failure; trying again may succeed.
	ErrRetryable = driver.ErrRetryable

	// ErrNotSent: the broker has none of the failed messages.
	ErrNotSent = errors.New("wary: certainly not sent")
	// ErrMaybeSent: the broker may have some (a resend may duplicate).
	ErrMaybeSent = errors.New("wary: may have been sent")
)

// Error is the error type of this package: classify it with errors.Is,
// reach the SDK's error with Topic.ErrorAs and Subscription.ErrorAs.
type Error struct {
	// Op is the operation that failed: "publish", "receive", "ack", "nack",
	// "dead-letter", "extend-lock", "open", "close", "topology" (package
	// broker/topology).
	Op string
	// MaybeSent (Op "publish"): a message of the call may be on the broker.
	MaybeSent bool
	// Messages, for a Publish of several messages, says what became of
	// each, in order: nil if accepted, else its own *Error (ErrNotSent or
	// ErrMaybeSent, and its class). One not sent because another failed
	// matches ErrNotSent and driver.ErrNotAttempted only.
	Messages []error
	code     driver.ErrorCode
	err      error
}

func (e *Error) Error() string {
	s := "wary: " + e.Op
	if e.code != driver.Unknown {
		s += " (" + e.code.String() + ")"
	}
	first := -1
	if e.Op == "publish" {
		sent, failed, f := e.counts()
		switch {
		case sent > 0 || (len(e.Messages) > 0 && !e.MaybeSent):
			s += fmt.Sprintf(" [%d of %d sent, %d failed]", sent, len(e.Messages), failed)
		case e.MaybeSent:
			s += " [may have been sent]"
		default:
			s += " [not sent]"
		}
		first = f
	}
	if first >= 0 {
		return s + ": " + e.messageText(first)
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

// counts returns how many of Messages were accepted, how many failed on
// their own account (not those left unsent because of another), and the
// index of the first of those (-1 if none).
func (e *Error) counts() (sent, failed, first int) {
	first = -1
	for i, err := range e.Messages {
		switch {
		case err == nil:
			sent++
		case !errors.Is(err, driver.ErrNotAttempted):
			if failed++; first < 0 {
				first = i
			}
		}
	}
	return sent, failed, first
}

// messageText names message i of Messages and says why it failed, without
// the "wary: publish ..." its own *Error would repeat. A context error of
// the call that the message's own error does not mention is added.
func (e *Error) messageText(i int) string {
	m := e.Messages[i]
	var me *Error
	if errors.As(m, &me) && me.err != nil {
		m = me.err
	}
	s := fmt.Sprintf("message %d: %v", i, m)
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(e.err, c) && !errors.Is(m, c) {
			s += " (" + c.Error() + ")"
		}
	}
	return s
}

// Unwrap returns the underlying error (a driver's error, or a context error).
func (e *Error) Unwrap() error { return e.err }

// Is reports whether e belongs to the class target.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotSent:
		return e.Op == "publish" && !e.MaybeSent
	case ErrMaybeSent:
		return e.Op == "publish" && e.MaybeSent
	case context.DeadlineExceeded, os.ErrDeadlineExceeded:
		return e.code == driver.DeadlineExceeded
	}
	return target != nil && target == driver.ClassOf(e.code)
}

// newError builds an *Error; a nil classify means the error is ours.
func newError(op string, code driver.ErrorCode, maybeSent bool, err error) *Error {
	return &Error{Op: op, code: code, MaybeSent: maybeSent, err: err}
}

// wrapErr classifies a driver error. Context errors win over the driver's
// classification, so callers can rely on errors.Is(err, context.Canceled).
func wrapErr(op string, classify func(error) driver.ErrorInfo, err error) error {
	if err == nil {
		return nil
	}
	// A batch's errors first: its messages' own errors, if *Error, would
	// otherwise stand for the whole batch.
	var dbe *driver.BatchError
	if op == "publish" && errors.As(err, &dbe) {
		return batchError(classify, dbe, err)
	}
	var de *driver.Error
	if errors.As(err, &de) && !errors.As(err, new(*Error)) {
		// A driver's classified error (driver.OpenError, Invalidf): its
		// class and cause hold, the op is ours.
		cause := err
		if err == error(de) {
			cause = de.Err
		}
		return newError(op, de.Code, false, cause)
	}
	var be *Error
	if errors.As(err, &be) {
		if be.Op != op {
			// Built for another op: the class and the cause hold, the op and the sent
			// bit are ours, and the other op is not named.
			cause := err
			if err == error(be) {
				cause = be.err
			}
			return newError(op, be.code, be.MaybeSent && op == "publish", cause)
		}
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		info := classify(err)
		return newError(op, driver.Canceled, info.MaybeSent, err)
	case errors.Is(err, context.DeadlineExceeded):
		info := classify(err)
		return newError(op, driver.DeadlineExceeded, info.MaybeSent, err)
	}
	info := classify(err)
	return newError(op, info.Code, info.MaybeSent, err)
}

func invalidf(op, format string, args ...any) error {
	return newError(op, driver.Invalid, false, fmt.Errorf(format, args...))
}

// Permanent marks a handler error as permanent: the handler loop
// dead-letters the delivery with the error's text as reason instead of
// retrying it (where the driver cannot dead-letter, it nacks).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return "permanent: " + p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// batchError classifies a SendBatch *driver.BatchError message by
// message; Publish places the messages in the call.
func batchError(classify func(error) driver.ErrorInfo, dbe *driver.BatchError, err error) *Error {
	out := newError("publish", driver.Unknown, false, err)
	out.Messages = make([]error, len(dbe.Errs))
	for i, e := range dbe.Errs {
		if e != nil {
			out.Messages[i] = messageError(classify, e)
		}
	}
	out.summarize()
	return out
}

// summarize sets e's class from its Messages: that of the first message
// refused on its own account (not one left unsent because another was
// refused), and may-have-been-sent when any message was accepted or may
// have been.
func (e *Error) summarize() {
	classed := false
	for _, m := range e.Messages {
		var me *Error
		switch {
		case m == nil:
			e.MaybeSent = true
		case errors.As(m, &me):
			e.MaybeSent = e.MaybeSent || me.MaybeSent
			if !classed && !errors.Is(m, driver.ErrNotAttempted) {
				e.code, classed = me.code, true
			}
		}
	}
}

// messageError classifies one message's error of a SendBatch.
func messageError(classify func(error) driver.ErrorInfo, err error) *Error {
	if errors.Is(err, driver.ErrNotAttempted) {
		return newError("publish", driver.Unknown, false, err)
	}
	return wrapErr("publish", classify, err).(*Error)
}

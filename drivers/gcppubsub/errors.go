package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wary-go/wary/broker/driver"
)

// classedError is an error the driver itself detected, with its class.
type classedError struct {
	code driver.ErrorCode
	err  error
}

func (e *classedError) Error() string { return "gcppubsub: " + e.err.Error() }
func (e *classedError) Unwrap() error { return e.err }
func (e *classedError) Is(target error) bool {
	return target != nil && target == driver.ClassOf(e.code)
}

func invalidErr(err error) error  { return &classedError{driver.Invalid, err} }
func tooLargeErr(err error) error { return &classedError{driver.TooLarge, err} }

// AckError is Pub/Sub's refusal of one acknowledgement or deadline change
// on a subscription with exactly-once delivery: the reason Pub/Sub gave
// for that ack ID in the ErrorInfo of its answer. Reach it with
// Subscription.ErrorAs on the delivery's settle error. A reason starting
// with "TRANSIENT_" is retryable; any other ("PERMANENT_FAILURE_INVALID_ACK_ID":
// the ack deadline passed, or the message was acked or delivered again)
// means the ack did not take: the error matches broker.ErrLockLost and
// the message will be delivered again.
type AckError struct {
	// MessageID is Pub/Sub's ID of the message, Reason Pub/Sub's.
	MessageID, Reason string
}

func (e *AckError) Error() string {
	return fmt.Sprintf("gcppubsub: Pub/Sub refused the ack of message %s: %s", e.MessageID, e.Reason)
}

// Transient reports whether Pub/Sub said to try again.
func (e *AckError) Transient() bool { return strings.HasPrefix(e.Reason, "TRANSIENT_") }

// ackFailures returns the per-ack-ID reasons of an Acknowledge or
// ModifyAckDeadline error on an exactly-once subscription (the
// ErrorInfo's metadata, keyed by ack ID), or nil.
func ackFailures(err error) map[string]string {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae.Metadata()
	}
	if ae, ok := apierror.FromError(err); ok {
		return ae.Metadata()
	}
	return nil
}

// grpcCode returns the gRPC status code of err, and whether it has one.
func grpcCode(err error) (codes.Code, string, bool) {
	var ae *apierror.APIError
	if errors.As(err, &ae) && ae.GRPCStatus() != nil {
		return ae.GRPCStatus().Code(), ae.GRPCStatus().Message(), true
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK {
		return s.Code(), s.Message(), true
	}
	return codes.OK, "", false
}

// classify maps an error from the SDK or the driver to its class, and
// says whether a publish that failed so may nevertheless have reached
// Pub/Sub.
func classify(err error) driver.ErrorInfo {
	if err == nil {
		return driver.ErrorInfo{}
	}
	var ce *classedError
	if errors.As(err, &ce) {
		return driver.ErrorInfo{Code: ce.code}
	}
	var ack *AckError
	if errors.As(err, &ack) {
		if ack.Transient() {
			return driver.ErrorInfo{Code: driver.Unavailable}
		}
		return driver.ErrorInfo{Code: driver.LockLost}
	}
	code, msg, ok := grpcCode(err)
	if !ok {
		switch {
		case errors.Is(err, context.Canceled):
			// A bare context error: the call was not made.
			return driver.ErrorInfo{Code: driver.Canceled}
		case errors.Is(err, context.DeadlineExceeded):
			return driver.ErrorInfo{Code: driver.DeadlineExceeded}
		}
		return driver.ErrorInfo{Code: driver.Unknown, MaybeSent: true}
	}
	switch code {
	case codes.NotFound:
		return driver.ErrorInfo{Code: driver.NotFound}
	case codes.PermissionDenied, codes.Unauthenticated:
		return driver.ErrorInfo{Code: driver.PermissionDenied}
	case codes.InvalidArgument, codes.OutOfRange:
		if tooLargeText(msg) {
			return driver.ErrorInfo{Code: driver.TooLarge}
		}
		return driver.ErrorInfo{Code: driver.Invalid}
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Unimplemented:
		return driver.ErrorInfo{Code: driver.Invalid}
	case codes.ResourceExhausted:
		if tooLargeText(msg) { // gRPC's limit on a message's size
			return driver.ErrorInfo{Code: driver.TooLarge}
		}
		// Quota or flow control: Pub/Sub refused the request.
		return driver.ErrorInfo{Code: driver.Unavailable}
	case codes.Canceled:
		// The request may have left before the caller gave up.
		return driver.ErrorInfo{Code: driver.Canceled, MaybeSent: true}
	case codes.DeadlineExceeded:
		return driver.ErrorInfo{Code: driver.DeadlineExceeded, MaybeSent: true}
	case codes.Unavailable:
		// A connection that was never made sent nothing.
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: !dialFailed(msg)}
	}
	// Internal, Unknown, Aborted, DataLoss: Pub/Sub failed on its side,
	// after the request reached it.
	return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: true}
}

// tooLargeText: Pub/Sub's InvalidArgument for a request or message over
// its limits.
func tooLargeText(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "too large") || strings.Contains(m, "larger than max") || strings.Contains(m, "exceeds") || strings.Contains(m, "size limit")
}

// dialFailed: gRPC's Unavailable for a connection it could not make.
func dialFailed(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "connection refused") || strings.Contains(m, "error while dialing") ||
		strings.Contains(m, "no such host")
}

func errorAs(err error, i any) bool { return errors.As(err, i) }

// openErr classifies an error of the open.
func openErr(err error) error { return driver.OpenError(classify(err).Code, err) }

package nats

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker/driver"
)

// classedError is an error the driver itself detected, with its class.
type classedError struct {
	code driver.ErrorCode
	err  error
}

func (e *classedError) Error() string { return "nats: " + e.err.Error() }
func (e *classedError) Unwrap() error { return e.err }
func (e *classedError) Is(target error) bool {
	return target != nil && target == driver.ClassOf(e.code)
}

func invalidErr(err error) error  { return &classedError{driver.Invalid, err} }
func tooLargeErr(err error) error { return &classedError{driver.TooLarge, err} }

// errLockLost is the outcome of settling a delivery that was settled
// already, or whose AckWait has passed (the server redelivers it, or has).
var errLockLost = &classedError{driver.LockLost, errors.New("the delivery was settled already, or its ack_wait passed: the server redelivers it")}

// awaitingAck wraps a failure that came after a message was written to
// the connection, before its PubAck: the stream may hold it.
type awaitingAck struct{ err error }

func (e *awaitingAck) Error() string { return "nats: waiting for the PubAck: " + e.err.Error() }
func (e *awaitingAck) Unwrap() error { return e.err }

// Error codes of the JetStream API the driver tells apart.
const (
	codeStreamNotFound   = 10059
	codeConsumerNotFound = 10014
	codeMsgTooLarge      = 10054
	codeStreamNotMatch   = 10060
	codeWrongLastSeq     = 10071
)

// classify maps an error from nats.go or the driver to its class.
func classify(err error) driver.ErrorInfo {
	if err == nil {
		return driver.ErrorInfo{}
	}
	var aa *awaitingAck
	maybe := errors.As(err, &aa)
	switch {
	case errors.Is(err, context.Canceled):
		return driver.ErrorInfo{Code: driver.Canceled, MaybeSent: maybe}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout):
		return driver.ErrorInfo{Code: driver.DeadlineExceeded, MaybeSent: maybe || errors.Is(err, natsgo.ErrTimeout)}
	}
	var ce *classedError
	if errors.As(err, &ce) {
		return driver.ErrorInfo{Code: ce.code}
	}
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode {
		case codeStreamNotFound, codeConsumerNotFound:
			return driver.ErrorInfo{Code: driver.NotFound}
		case codeMsgTooLarge:
			return driver.ErrorInfo{Code: driver.TooLarge}
		case codeStreamNotMatch, codeWrongLastSeq:
			return driver.ErrorInfo{Code: driver.Invalid}
		}
		switch {
		case ae.Code == 404:
			return driver.ErrorInfo{Code: driver.NotFound}
		case ae.Code == 403:
			return driver.ErrorInfo{Code: driver.PermissionDenied}
		case ae.Code >= 500:
			return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: maybe}
		case ae.Code >= 400:
			return driver.ErrorInfo{Code: driver.Invalid}
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrConsumerNotFound):
		return driver.ErrorInfo{Code: driver.NotFound}
	case errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum), errors.Is(err, natsgo.ErrMaxPayload):
		return driver.ErrorInfo{Code: driver.TooLarge}
	case errors.Is(err, natsgo.ErrPermissionViolation), errors.Is(err, natsgo.ErrAuthorization),
		errors.Is(err, natsgo.ErrAuthExpired), errors.Is(err, natsgo.ErrAuthRevoked):
		return driver.ErrorInfo{Code: driver.PermissionDenied}
	case errors.Is(err, natsgo.ErrConnectionClosed), errors.Is(err, natsgo.ErrBadSubscription):
		return driver.ErrorInfo{Code: driver.Closed, MaybeSent: maybe}
	case errors.Is(err, natsgo.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		// Nobody answered the request: the stream did not take it.
		return driver.ErrorInfo{Code: driver.Unavailable}
	case errors.Is(err, natsgo.ErrConnectionDraining), errors.Is(err, natsgo.ErrConnectionReconnecting),
		errors.Is(err, natsgo.ErrDisconnected), errors.Is(err, natsgo.ErrStaleConnection),
		errors.Is(err, natsgo.ErrSlowConsumer), errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged), errors.Is(err, natsgo.ErrReconnectBufExceeded):
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: maybe}
	case errors.Is(err, natsgo.ErrBadSubject), errors.Is(err, natsgo.ErrBadHeaderMsg),
		errors.Is(err, jetstream.ErrInvalidSubject), errors.Is(err, jetstream.ErrInvalidStreamName),
		errors.Is(err, jetstream.ErrInvalidConsumerName):
		return driver.ErrorInfo{Code: driver.Invalid}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) {
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: maybe}
	}
	return driver.ErrorInfo{Code: driver.Unknown, MaybeSent: true}
}

func errorAs(err error, i any) bool { return errors.As(err, i) }

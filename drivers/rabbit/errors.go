package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker/driver"
)

// Sentinel errors of this driver. They reach users wrapped in *broker.Error;
// errors.Is works through it.
var (
	// errLockLost: the delivery belongs to a channel that is gone, or was
	// settled already; RabbitMQ requeues (or did requeue) it.
	errLockLost = errors.New("rabbit: delivery tag is no longer valid (channel was reset or the delivery was settled)")
	// errClosed: the Conn, topic or subscription was closed.
	errClosed = errors.New("rabbit: closed")
	// errNotReady: the connection did not come back within ReadyTimeout.
	errNotReady = errors.New("rabbit: connection is down and did not come back in time")
	// errConsumerLost: the consumer's channel closed; the next receive opens
	// a new one.
	errConsumerLost = errors.New("rabbit: consumer channel closed")
)

// sendError carries whether a failed publish may have reached the broker.
type sendError struct {
	err       error
	maybeSent bool
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

func notSent(err error) error { return &sendError{err: err} }
func maybeSent(err error) error {
	return &sendError{err: err, maybeSent: true}
}

// returnedError is a mandatory publish that RabbitMQ returned: no queue is
// bound for its routing key. The broker dropped it.
type returnedError struct {
	exchange, key string
	code          uint16
	text          string
}

func (e *returnedError) Error() string {
	return fmt.Sprintf("rabbit: message returned by exchange %q for routing key %q: %d %s", e.exchange, e.key, e.code, e.text)
}

// nackError: the broker answered a publish with basic.nack.
type nackError struct{}

func (nackError) Error() string { return "rabbit: broker refused the message (basic.nack)" }

// classify maps an error of this driver to its class.
func classify(err error) driver.ErrorInfo {
	var info driver.ErrorInfo
	var se *sendError
	if errors.As(err, &se) {
		info.MaybeSent = se.maybeSent
	}
	info.Code = code(err)
	return info
}

func code(err error) driver.ErrorCode {
	var ae *amqp.Error
	var re *returnedError
	var ne net.Error
	switch {
	case err == nil:
		return driver.Unknown
	case errors.Is(err, context.Canceled):
		return driver.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return driver.DeadlineExceeded
	case errors.Is(err, errLockLost):
		return driver.LockLost
	case errors.Is(err, errClosed):
		return driver.Closed
	case errors.Is(err, errNotReady), errors.Is(err, errConsumerLost), errors.As(err, new(nackError)):
		return driver.Unavailable
	case errors.As(err, &re):
		return driver.NotFound
	case errors.As(err, new(*invalidError)):
		return driver.Invalid
	case errors.As(err, new(*tooLargeError)):
		return driver.TooLarge
	case errors.As(err, &ae):
		return amqpCode(ae)
	case errors.As(err, &ne):
		return driver.Unavailable
	}
	return driver.Unknown
}

func amqpCode(e *amqp.Error) driver.ErrorCode {
	switch e.Code {
	case amqp.NotFound, amqp.NoRoute:
		return driver.NotFound
	case amqp.AccessRefused, amqp.NotAllowed:
		return driver.PermissionDenied
	case amqp.ContentTooLarge:
		return driver.TooLarge
	case amqp.PreconditionFailed:
		// RabbitMQ closes the channel with 406 for a message above
		// max_message_size, and for declarations that disagree with the
		// existing queue or exchange.
		if containsFold(e.Reason, "max size") || containsFold(e.Reason, "message size") {
			return driver.TooLarge
		}
		return driver.Invalid
	case amqp.SyntaxError, amqp.CommandInvalid, amqp.NotImplemented:
		return driver.Invalid
	case amqp.ResourceLocked:
		return driver.Invalid
	case amqp.ChannelError, amqp.ConnectionForced, amqp.ResourceError, amqp.InternalError, amqp.UnexpectedFrame,
		amqp.FrameError: // amqp091-go reports I/O errors (a reset connection) as 501
		return driver.Unavailable
	}
	if e.Recover {
		return driver.Unavailable
	}
	return driver.Unknown
}

func errorAs(err error, i any) bool {
	switch p := i.(type) {
	case **amqp.Error:
		return errors.As(err, p)
	case *amqp.Return:
		var re *returnedError
		if errors.As(err, &re) {
			*p = amqp.Return{ReplyCode: re.code, ReplyText: re.text, Exchange: re.exchange, RoutingKey: re.key}
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// openErr classifies an error met while opening a topic or subscription,
// which the portable layer does not wrap.
func openErr(err error) error { return driver.OpenError(code(err), err) }

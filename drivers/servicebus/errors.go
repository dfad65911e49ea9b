package servicebus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/wary-go/wary/broker/driver"
)

// Sentinel errors of this driver. They reach users wrapped in *broker.Error;
// errors.Is works through it.
var (
	// errLockLost: the delivery was settled already, or its session
	// receiver was released; Service Bus redelivers it.
	errLockLost = errors.New("servicebus: the delivery's lock or session is no longer held")
	// errClosed: the topic or subscription was closed.
	errClosed = errors.New("servicebus: closed")
	// errTooLarge: a message does not fit into the entity's size limit.
	errTooLarge = errors.New("servicebus: message too large for the entity")
	// errNotFound: the administration client found no such entity.
	errNotFound = errors.New("servicebus: entity not found")
)

func notFound(kind, name string) error {
	return fmt.Errorf("servicebus: %s %q does not exist: %w", kind, name, errNotFound)
}

// sendError carries whether a failed send may have reached the broker.
type sendError struct {
	err       error
	maybeSent bool
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// AMQP conditions Service Bus reports. The SDK maps only the management
// API's 404 to CodeNotFound; link and settlement errors arrive as the
// raw *amqp.Error, and some inside an *azservicebus.Error that does not
// unwrap, so the conditions are also matched in its text.
const (
	condNotFound            = "amqp:not-found"
	condUnauthorized        = "amqp:unauthorized-access"
	condSizeExceeded        = "amqp:link:message-size-exceeded"
	condNotAllowed          = "amqp:not-allowed"
	condInvalidField        = "amqp:invalid-field"
	condMessageLockLost     = "com.microsoft:message-lock-lost"
	condSessionLockLost     = "com.microsoft:session-lock-lost"
	condSessionCannotLock   = "com.microsoft:session-cannot-be-locked"
	condServerBusy          = "com.microsoft:server-busy"
	condTimeout             = "com.microsoft:timeout"
	condEntityDisabled      = "com.microsoft:entity-disabled"
	condResourceLimit       = "amqp:resource-limit-exceeded"
	condLinkDetachForced    = "amqp:link:detach-forced"
	condConnectionForced    = "amqp:connection:forced"
	condMessageNotFound     = "com.microsoft:message-not-found"
	condSessionLockMismatch = "com.microsoft:session-lock-mismatch" // not sent by the service as far as measured; kept as lock lost
)

var conditionCodes = map[string]driver.ErrorCode{
	condNotFound:            driver.NotFound,
	condUnauthorized:        driver.PermissionDenied,
	condSizeExceeded:        driver.TooLarge,
	condNotAllowed:          driver.Invalid,
	condInvalidField:        driver.Invalid,
	condMessageLockLost:     driver.LockLost,
	condSessionLockLost:     driver.LockLost,
	condSessionLockMismatch: driver.LockLost,
	condMessageNotFound:     driver.LockLost,
	condSessionCannotLock:   driver.Unavailable,
	condServerBusy:          driver.Unavailable,
	condTimeout:             driver.Unavailable,
	condResourceLimit:       driver.Unavailable,
	condLinkDetachForced:    driver.Unavailable,
	condConnectionForced:    driver.Unavailable,
	condEntityDisabled:      driver.Unavailable,
}

// classify maps an error of this driver, the SDK or go-amqp to a code.
func classify(err error) driver.ErrorInfo {
	info := driver.ErrorInfo{Code: code(err)}
	var se *sendError
	if errors.As(err, &se) {
		info.MaybeSent = se.maybeSent
		switch info.Code {
		case driver.NotFound, driver.TooLarge, driver.Invalid, driver.PermissionDenied:
			info.MaybeSent = false
		}
	}
	return info
}

func code(err error) driver.ErrorCode {
	switch {
	case err == nil:
		return driver.Unknown
	case errors.Is(err, errLockLost):
		return driver.LockLost
	case errors.Is(err, errNotFound):
		return driver.NotFound
	case errors.Is(err, errClosed):
		return driver.Closed
	case errors.Is(err, errTooLarge), errors.Is(err, azservicebus.ErrMessageTooLarge):
		return driver.TooLarge
	case errors.As(err, new(*invalidMessage)):
		return driver.Invalid
	case errors.Is(err, context.Canceled):
		return driver.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return driver.DeadlineExceeded
	}
	if c, ok := conditionCodes[condition(err)]; ok {
		return c
	}
	var sbe *azservicebus.Error
	if errors.As(err, &sbe) {
		switch sbe.Code {
		case azservicebus.CodeLockLost:
			return driver.LockLost
		case azservicebus.CodeNotFound:
			return driver.NotFound
		case azservicebus.CodeUnauthorizedAccess:
			return driver.PermissionDenied
		case azservicebus.CodeClosed:
			return driver.Closed
		case azservicebus.CodeConnectionLost, azservicebus.CodeTimeout:
			return driver.Unavailable
		}
	}
	var le *amqp.LinkError
	var ce *amqp.ConnError
	var sse *amqp.SessionError
	var ne net.Error
	if errors.As(err, &le) || errors.As(err, &ce) || errors.As(err, &sse) || errors.As(err, &ne) {
		return driver.Unavailable
	}
	return driver.Unknown
}

// condition is the AMQP condition err carries ("" if none): an
// *amqp.Error's, or one of conditionCodes named in the text of an
// *azservicebus.Error, which does not unwrap.
func condition(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return string(ae.Condition)
	}
	var sbe *azservicebus.Error
	if errors.As(err, &sbe) {
		msg := sbe.Error()
		for cond := range conditionCodes {
			if strings.Contains(msg, cond) {
				return cond
			}
		}
	}
	return ""
}

// takenElsewhere reports whether err says that another receiver holds the
// session (com.microsoft:session-cannot-be-locked, which the SDK can
// return from any call on a session receiver whose link it re-attached).
// For a session this receiver held, the lock is lost; only for an accept
// does it mean "try later".
func takenElsewhere(err error) bool { return condition(err) == condSessionCannotLock }

// errorAs reaches *azservicebus.Error and go-amqp's error types.
func errorAs(err error, i any) bool {
	switch p := i.(type) {
	case **azservicebus.Error:
		return errors.As(err, p)
	case **amqp.Error:
		return errors.As(err, p)
	case **amqp.LinkError:
		return errors.As(err, p)
	case **amqp.ConnError:
		return errors.As(err, p)
	case **amqp.SessionError:
		return errors.As(err, p)
	}
	return false
}

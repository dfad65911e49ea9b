package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/wary-go/wary/broker/driver"
)

type code = driver.ErrorCode

const (
	codeNotFound = driver.NotFound
	codeInvalid  = driver.Invalid
	codeTooLarge = driver.TooLarge
	codeClosed   = driver.Closed
	codeLockLost = driver.LockLost
)

// memError is the driver's own error. It matches the broker package's
// error classes with errors.Is, so that errors from Broker methods (which
// are not wrapped by the portable layer) can be tested like any other.
type memError struct {
	code code
	msg  string
}

func errorf(c code, format string, args ...any) error {
	return &memError{code: c, msg: fmt.Sprintf(format, args...)}
}

func (e *memError) Error() string { return "memory: " + e.msg }

// Is matches the broker error class of e's code.
func (e *memError) Is(target error) bool {
	return target != nil && target == driver.ClassOf(e.code)
}

var (
	errTopicClosed  = &memError{code: codeClosed, msg: "topic is closed"}
	errSubClosed    = &memError{code: codeClosed, msg: "subscription is closed"}
	errBrokerClosed = &memError{code: codeClosed, msg: "broker is closed"}
	errStale        = &memError{code: codeLockLost, msg: "delivery is no longer locked by this consumer (settled, lock expired or partition revoked)"}
)

// classify maps the driver's errors to codes. Nothing the memory driver
// returns may have been sent: a publish either stored every message or none.
func classify(err error) driver.ErrorInfo {
	var me *memError
	switch {
	case err == nil:
		return driver.ErrorInfo{}
	case errors.Is(err, context.Canceled):
		return driver.ErrorInfo{Code: driver.Canceled}
	case errors.Is(err, context.DeadlineExceeded):
		return driver.ErrorInfo{Code: driver.DeadlineExceeded}
	case errors.As(err, &me):
		return driver.ErrorInfo{Code: me.code}
	}
	return driver.ErrorInfo{Code: driver.Unknown}
}

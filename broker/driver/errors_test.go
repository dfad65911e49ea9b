package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// TestClassesAreBrokers: the classes drivers match are package broker's
// own values, so that a driver's error and a *broker.Error match alike.
func TestClassesAreBrokers(t *testing.T) {
	for _, c := range []struct{ d, b error }{
		{driver.ErrNotFound, broker.ErrNotFound}, {driver.ErrTooLarge, broker.ErrTooLarge},
		{driver.ErrInvalid, broker.ErrInvalid}, {driver.ErrClosed, broker.ErrClosed},
		{driver.ErrLockLost, broker.ErrLockLost}, {driver.ErrPermission, broker.ErrPermission},
		{driver.ErrRetryable, broker.ErrRetryable},
	} {
		if c.d != c.b {
			t.Errorf("%v is not broker's %v", c.d, c.b)
		}
	}
}

// TestOpenErrorClassifies: OpenError gives an *Error of Op "open" that
// matches its code's class and keeps the cause, leaves an *Error as it
// is, and CodeOf reads each class back.
func TestOpenErrorClassifies(t *testing.T) {
	cause := errors.New("no such topic")
	err := driver.OpenError(driver.NotFound, cause)
	var de *driver.Error
	if !errors.As(err, &de) || de.Op != "open" || !errors.Is(err, broker.ErrNotFound) || !errors.Is(err, cause) || errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("OpenError: %v, want an *Error of op open, not found, wrapping its cause", err)
	}
	if err.Error() != "wary: open (not found): no such topic" {
		t.Errorf("text %q", err)
	}
	if again := driver.OpenError(driver.Unavailable, fmt.Errorf("dial: %w", err)); !errors.Is(again, broker.ErrNotFound) || errors.Is(again, broker.ErrRetryable) {
		t.Errorf("OpenError of an *Error: %v, want it unchanged (not found only)", again)
	}
	if driver.OpenError(driver.Invalid, nil) != nil {
		t.Error("OpenError(nil) is not nil")
	}
	for c := driver.NotFound; c <= driver.PermissionDenied; c++ {
		if got := driver.CodeOf(driver.OpenError(c, cause)); got != c {
			t.Errorf("CodeOf(OpenError(%v)) = %v", c, got)
		}
	}
	if got := driver.CodeOf(cause); got != driver.Unknown {
		t.Errorf("CodeOf of an unclassified error = %v", got)
	}
	if !errors.Is(driver.OpenError(driver.Canceled, cause), context.Canceled) {
		t.Error("Canceled does not match context.Canceled")
	}
	if err := driver.Invalidf("bad %s", "option"); !errors.Is(err, broker.ErrInvalid) || err.Error() != "wary: open (invalid): bad option" {
		t.Errorf("Invalidf: %v", err)
	}
}

// TestReservedHeaderKeepsBrokersHeaders: the headers package broker lets
// a producer set are not reserved; other "wary-" names are.
func TestReservedHeaderKeepsBrokersHeaders(t *testing.T) {
	for _, h := range []string{broker.HeaderAggregateID, broker.HeaderAggregateVersion, broker.HeaderSequence, broker.HeaderType, broker.HeaderContentType, driver.HeaderReplayedBy, "x-app"} {
		if driver.ReservedHeader(h) {
			t.Errorf("%s is reserved", h)
		}
	}
	for _, h := range []string{driver.HeaderDeadLetterReason, "WARY-anything", "traceparent-not"} {
		if want := h != "traceparent-not"; driver.ReservedHeader(h) != want {
			t.Errorf("ReservedHeader(%s) = %t", h, !want)
		}
	}
}

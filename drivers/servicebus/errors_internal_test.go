package servicebus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/wary-go/wary/broker/driver"
)

// The SDK maps only the administration API's 404: the driver classifies the
// AMQP conditions links and settlements report, wrapped or not, and keeps
// "maybe sent" only where the service may have taken the message.
func TestClassify(t *testing.T) {
	cond := func(c string) error {
		return fmt.Errorf("send: %w", &amqp.Error{Condition: amqp.ErrCond(c), Description: "from the service"})
	}
	for _, tc := range []struct {
		name      string
		err       error
		code      driver.ErrorCode
		maybeSent bool
	}{
		{"not found", cond(condNotFound), driver.NotFound, false},
		{"unauthorized", cond(condUnauthorized), driver.PermissionDenied, false},
		{"size exceeded", cond(condSizeExceeded), driver.TooLarge, false},
		{"refused before sending", invalidf("message ID is 129 characters"), driver.Invalid, false},
		{"not allowed", cond(condNotAllowed), driver.Invalid, false},
		{"message lock lost", cond(condMessageLockLost), driver.LockLost, false},
		{"session lock lost", cond(condSessionLockLost), driver.LockLost, false},
		{"session taken by another receiver", cond(condSessionCannotLock), driver.Unavailable, false},
		{"server busy", cond(condServerBusy), driver.Unavailable, false},
		{"timeout", cond(condTimeout), driver.Unavailable, false},
		{"unknown condition", cond("amqp:internal-error"), driver.Unknown, false},
		{"SDK lock lost", &azservicebus.Error{Code: azservicebus.CodeLockLost}, driver.LockLost, false},
		{"SDK connection lost", &azservicebus.Error{Code: azservicebus.CodeConnectionLost}, driver.Unavailable, false},
		{"link detached", &amqp.LinkError{}, driver.Unavailable, false},
		{"connection closed", &amqp.ConnError{}, driver.Unavailable, false},
		{"the driver's lock lost", fmt.Errorf("ack: %w", errLockLost), driver.LockLost, false},
		{"the driver's not found", notFound("queue", "orders"), driver.NotFound, false},
		{"deadline", fmt.Errorf("settle: %w", context.DeadlineExceeded), driver.DeadlineExceeded, false},
		{"send lost after writing", &sendError{err: &amqp.ConnError{}, maybeSent: true}, driver.Unavailable, true},
		{"send refused as too large", &sendError{err: cond(condSizeExceeded), maybeSent: true}, driver.TooLarge, false},
		{"send to a missing entity", &sendError{err: cond(condNotFound), maybeSent: true}, driver.NotFound, false},
	} {
		got := classify(tc.err)
		if got.Code != tc.code || got.MaybeSent != tc.maybeSent {
			t.Errorf("%s: %v, maybe sent %v; want %v, %v", tc.name, got.Code, got.MaybeSent, tc.code, tc.maybeSent)
		}
	}
	if !takenElsewhere(cond(condSessionCannotLock)) || takenElsewhere(cond(condSessionLockLost)) || takenElsewhere(errors.New("com.microsoft:session-cannot-be-locked")) {
		t.Error("takenElsewhere: only the session-cannot-be-locked condition means another receiver holds the session")
	}
}

package sqsfifo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wary-go/wary/broker/driver"
)

// classedError is an error the driver itself detected, with its class.
type classedError struct {
	code driver.ErrorCode
	err  error
}

func (e *classedError) Error() string { return "sqsfifo: " + e.err.Error() }
func (e *classedError) Unwrap() error { return e.err }
func (e *classedError) Is(target error) bool {
	return target != nil && target == driver.ClassOf(e.code)
}

func invalidErr(err error) error  { return &classedError{driver.Invalid, err} }
func tooLargeErr(err error) error { return &classedError{driver.TooLarge, err} }

// EntryError is SQS's refusal of one message of a batch: reach it with
// Topic.ErrorAs on that message's error in broker.Error.Messages. It is
// retryable when SQS blamed itself rather than the request.
type EntryError struct {
	// ID is the message's wary ID.
	ID string
	// Code and Message are SQS's, and SenderFault whether it blamed the
	// request.
	Code, Message string
	SenderFault   bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("message %q refused: %s: %s", e.ID, e.Code, e.Message)
}

// Error codes of SQS (JSON protocol, with their Query protocol aliases).
var (
	notFoundCodes = []string{"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "NonExistentQueue"}
	permCodes     = []string{"AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "MissingAuthenticationToken", "IncompleteSignature", "ExpiredToken", "InvalidSecurity",
		"KmsAccessDenied", "KmsDisabled", "KmsInvalidKeyUsage", "KmsInvalidState", "KmsNotFound", "RequestExpired"}
	transientCodes = []string{"ThrottlingException", "Throttling", "RequestThrottled", "KmsThrottled", "ServiceUnavailable",
		"InternalError", "InternalFailure", "OverLimit", "QueueDeletedRecently", "AWS.SimpleQueueService.ServiceUnavailable"}
	lockCodes = []string{"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidReceiptHandle",
		"AWS.SimpleQueueService.MessageNotInflight"}
	tooLargeCodes = []string{"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong"}
	invalidCodes  = []string{"InvalidParameterValue", "InvalidAttributeName", "InvalidAttributeValue", "InvalidMessageContents",
		"MissingParameter", "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", "InvalidBatchEntryId",
		"BatchEntryIdsNotDistinct", "TooManyEntriesInBatchRequest", "EmptyBatchRequest", "ValidationError",
		"InvalidAddress", "InvalidIdFormat", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
		"AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest",
		"AWS.SimpleQueueService.InvalidBatchEntryId"}
)

func codeOf(code, msg string) driver.ErrorCode {
	in := func(list []string) bool {
		for _, c := range list {
			if strings.EqualFold(c, code) {
				return true
			}
		}
		return false
	}
	switch {
	case in(notFoundCodes):
		return driver.NotFound
	case in(permCodes):
		return driver.PermissionDenied
	case in(transientCodes):
		return driver.Unavailable
	case in(lockCodes):
		return driver.LockLost
	case in(tooLargeCodes):
		return driver.TooLarge
	case in(invalidCodes):
		// An expired or unknown receipt handle comes back as
		// InvalidParameterValue naming the ReceiptHandle.
		if strings.Contains(msg, "ReceiptHandle") || strings.Contains(msg, "receipt handle") {
			return driver.LockLost
		}
		return driver.Invalid
	}
	return driver.Unknown
}

// classify maps an error from the SDK or the driver to its class.
func classify(err error) driver.ErrorInfo {
	if err == nil {
		return driver.ErrorInfo{}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A bare context error: the driver or the portable layer stopped
		// before calling SQS. Wrapped in an SDK operation error: the
		// request may have been written.
		var oe *smithy.OperationError
		return driver.ErrorInfo{Code: driver.Canceled, MaybeSent: errors.As(err, &oe)}
	}
	var ce *classedError
	if errors.As(err, &ce) {
		return driver.ErrorInfo{Code: ce.code}
	}
	if errors.Is(err, errUnanswered) {
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: true}
	}
	var ee *EntryError
	if errors.As(err, &ee) {
		c := codeOf(ee.Code, ee.Message)
		if !ee.SenderFault && (c == driver.Unknown || c == driver.Unavailable) {
			c = driver.Unavailable
		}
		return driver.ErrorInfo{Code: c}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		c := codeOf(ae.ErrorCode(), ae.ErrorMessage())
		maybe := false
		if ae.ErrorFault() == smithy.FaultServer || c == driver.Unavailable {
			// SQS failed on its side: it may have stored the message.
			if c == driver.Unknown {
				c = driver.Unavailable
			}
			maybe = c == driver.Unavailable && !throttled(ae.ErrorCode())
		}
		var re *smithyhttp.ResponseError
		if c == driver.Unknown && errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
			c, maybe = driver.Unavailable, true
		}
		return driver.ErrorInfo{Code: c, MaybeSent: maybe}
	}
	if transport(err) {
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: !dialFailed(err)}
	}
	var mae *retry.MaxAttemptsError
	if errors.As(err, &mae) {
		return driver.ErrorInfo{Code: driver.Unavailable, MaybeSent: true}
	}
	return driver.ErrorInfo{Code: driver.Unknown, MaybeSent: true}
}

func throttled(code string) bool {
	return strings.Contains(code, "Throttl") || code == "OverLimit"
}

// transport reports a failure of the connection rather than an answer.
func transport(err error) bool {
	var rse *smithyhttp.RequestSendError
	var ne net.Error
	return errors.As(err, &rse) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// dialFailed: the request never left (the connection was refused), so
// nothing was sent.
func dialFailed(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func errorAs(err error, i any) bool { return errors.As(err, i) }

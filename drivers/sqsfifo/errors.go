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

	"github.com/wary-go/wary/broker"
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
	return target != nil && target == broker.ClassOf(e.code)
}

func invalidErr(err error) error  { return &classedError{driver.Invalid, err} }
func tooLargeErr(err error) error { return &classedError{driver.TooLarge, err} }

// SendStatus is what became of one message of a failed batch.
type SendStatus int

// Send statuses.
const (
	// Sent: SQS accepted the message.
	Sent SendStatus = iota
	// NotSent: SQS certainly does not have the message (it refused the
	// entry, or the driver never sent it).
	NotSent
	// MaybeSent: the request carrying the message failed in a way that
	// leaves SQS's answer unknown (a connection lost after the write).
	MaybeSent
)

func (s SendStatus) String() string {
	switch s {
	case Sent:
		return "sent"
	case NotSent:
		return "not sent"
	}
	return "maybe sent"
}

// EntryStatus is the outcome of one message of a batch.
type EntryStatus struct {
	// ID is the message's wary ID.
	ID     string
	Status SendStatus
	// Code is SQS's error code for a refused entry ("" otherwise), and
	// SenderFault whether SQS blamed the request rather than itself.
	Code        string
	SenderFault bool
}

// BatchError reports a publish of which not every message succeeded:
// Entries has one element per message, in the order given, saying which
// were sent, certainly not sent, or may have been sent. Reach it with
// Topic.ErrorAs(err, &batchErr) where batchErr is a *sqsfifo.BatchError.
// As a whole it is ErrMaybeSent when any entry is Sent or MaybeSent, and
// retryable when a failure is SQS's own or the network's: publishing the
// batch again is then safe, SQS's deduplication dropping the copies of
// those that were sent (within its 5-minute window).
type BatchError struct {
	Entries []EntryStatus
	// Err is the first failure: the request's error, or an *EntryError.
	Err error
}

// EntryError is SQS's refusal of one entry of a batch.
type EntryError struct {
	Code, Message string
	SenderFault   bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("entry refused: %s: %s", e.Code, e.Message)
}

func (e *BatchError) Error() string {
	var sent, not, maybe int
	for _, s := range e.Entries {
		switch s.Status {
		case Sent:
			sent++
		case NotSent:
			not++
		default:
			maybe++
		}
	}
	return fmt.Sprintf("sqsfifo: batch of %d: %d sent, %d not sent, %d maybe sent: %v", len(e.Entries), sent, not, maybe, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

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
	var be *BatchError
	if errors.As(err, &be) {
		info := classify(be.Err)
		for _, s := range be.Entries {
			if s.Status != NotSent {
				info.MaybeSent = true
			}
			if s.Status == NotSent && s.Code != "" && !s.SenderFault {
				info.Code = driver.Unavailable
			}
		}
		return info
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

var errClosed = &classedError{driver.Closed, errors.New("subscription is closed")}

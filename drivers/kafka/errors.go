package kafka

import (
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

var (
	// errLockLost is returned when a delivery's partition was revoked or
	// lost, or the delivery was settled already.
	errLockLost = errors.New("kafka: delivery is stale (settled already, or its partition was revoked)")
	errClosed   = errors.New("kafka: subscription is closed")
)

// produceError carries whether a failed produce may have been written.
type produceError struct {
	err       error
	maybeSent bool
}

func (e *produceError) Error() string { return e.err.Error() }
func (e *produceError) Unwrap() error { return e.err }

// openError is an error the driver classifies itself.
type openError struct {
	code driver.ErrorCode
	err  error
}

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// Is matches the broker's error classes, so that errors from the
// constructors (which the portable layer does not wrap) match them too.
func (e *openError) Is(target error) bool {
	return target != nil && target == broker.ClassOf(e.code)
}

// openErr classifies an error met while opening a topic or subscription.
func openErr(err error) error {
	if err == nil {
		return nil
	}
	var oe *openError
	if errors.As(err, &oe) {
		return err
	}
	return &openError{code: classify(err).Code, err: err}
}

// notSentErrs are broker answers that reject a produce before the append.
var notSentErrs = []error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidTopicException,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.TransactionalIDAuthorizationFailed, kerr.InvalidRequiredAcks, kerr.InvalidRequest,
	kerr.UnsupportedForMessageFormat, kerr.UnsupportedVersion, kgo.ErrMaxBuffered,
}

// maybeSent reports whether a produce that failed with err may have been
// appended anyway. Unless the broker said no, assume it may.
func maybeSent(err error) bool {
	for _, e := range notSentErrs {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

func classify(err error) driver.ErrorInfo {
	var info driver.ErrorInfo
	var pe *produceError
	if errors.As(err, &pe) {
		info.MaybeSent = pe.maybeSent
	}
	var oe *openError
	var ke *kerr.Error
	var ne net.Error
	switch {
	case errors.As(err, &oe):
		info.Code = oe.code
	case errors.Is(err, errLockLost):
		info.Code = driver.LockLost
	case errors.Is(err, errClosed), errors.Is(err, kgo.ErrClientClosed):
		info.Code = driver.Closed
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		info.Code = driver.NotFound
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		info.Code = driver.TooLarge
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.UnknownMemberID),
		errors.Is(err, kerr.FencedInstanceID), errors.Is(err, kerr.StaleMemberEpoch):
		// A commit from a member the group no longer knows: its partitions
		// are (being) reassigned and will be redelivered elsewhere.
		info.Code = driver.LockLost
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed):
		info.Code = driver.PermissionDenied
	case errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidRequest),
		errors.Is(err, kerr.InvalidRequiredAcks):
		info.Code = driver.Invalid
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries), errors.Is(err, kgo.ErrMaxBuffered):
		info.Code = driver.Unavailable
	case errors.As(err, &ke):
		if ke.Retriable {
			info.Code = driver.Unavailable
		}
	case errors.As(err, &ne):
		info.Code = driver.Unavailable
	}
	return info
}

// errorAs sets i to the first error in err's chain that matches it, as
// errors.As does (e.g. **kerr.Error, *net.OpError).
func errorAs(err error, i any) bool {
	if i == nil {
		return false
	}
	defer func() { _ = recover() }() // errors.As panics on a non-pointer target
	return errors.As(err, i)
}

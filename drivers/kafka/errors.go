package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// codedError is an error the driver classifies itself.
type codedError struct {
	code driver.ErrorCode
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// Is matches the broker's error classes.
func (e *codedError) Is(target error) bool {
	return target != nil && target == driver.ClassOf(e.code)
}

// openFailure classifies an error met while opening a topic or
// subscription, as a *broker.Error of Op "open". auth, if not nil, watched
// the client's SASL exchanges.
func openFailure(err error, auth *authWatch) error {
	var be *broker.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &be):
		return err
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return driver.OpenError(driver.PermissionDenied, fmt.Errorf("kafka: SASL authentication failed: %w", err))
	case auth != nil && auth.failed.Load():
		// Brokers (kfake, and Kafka on some paths) close the connection
		// instead of answering a failed SASLAuthenticate, which kgo reports
		// as a bare EOF.
		return driver.OpenError(driver.PermissionDenied, fmt.Errorf("kafka: SASL authentication failed: the broker closed the connection in answer to the credentials (check the mechanism, user and password): %w", err))
	case errors.Is(err, context.Canceled):
		return driver.OpenError(driver.Canceled, fmt.Errorf("kafka: open: %w", err))
	case errors.Is(err, context.DeadlineExceeded):
		return driver.OpenError(driver.DeadlineExceeded, fmt.Errorf("kafka: open: %w", err))
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return driver.OpenError(ce.code, err)
	}
	return driver.OpenError(classify(err).Code, fmt.Errorf("kafka: open: %w", err))
}

// authWatch is a kgo hook that records whether the last SASL exchange of a
// client ended with the broker closing the connection. kgo retries such a
// connection until the caller's deadline; rejected lets a waiting produce
// stop at once.
type authWatch struct {
	failed atomic.Bool
	mu     sync.Mutex
	// rej is closed while the last exchange failed, and replaced when one
	// succeeds.
	rej chan struct{}
}

func (w *authWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != int16(kmsg.SASLAuthenticate) {
		return
	}
	failed := e.WriteErr == nil && (errors.Is(e.ReadErr, io.EOF) || errors.Is(e.ReadErr, io.ErrUnexpectedEOF) || errors.Is(e.ReadErr, syscall.ECONNRESET))
	w.failed.Store(failed)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch closed := w.rej != nil && isClosed(w.rej); {
	case failed && !closed:
		if w.rej == nil {
			w.rej = make(chan struct{})
		}
		close(w.rej)
	case !failed && closed:
		w.rej = nil
	}
}

// rejected returns a channel closed once the broker rejects the client's
// SASL login (nil for a nil watch: never).
func (w *authWatch) rejected() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rej == nil {
		w.rej = make(chan struct{})
	}
	return w.rej
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// errLoginRejected ends a produce that waits on a client whose SASL login
// the broker rejects. The client keeps the records and would send them once
// a login succeeds: they may have been sent.
var errLoginRejected = &codedError{code: driver.PermissionDenied, err: errors.New("kafka: SASL authentication failed: the broker closed the connection in answer to the credentials (check the mechanism, user and password)")}

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
	var oe *codedError
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

// checkTopicName checks name against Kafka's rules for topic names (1 to
// 249 characters from a-z, A-Z, 0-9, ".", "_" and "-"; not "." or ".."),
// which the broker would otherwise apply at the first produce or fetch,
// or silently through auto-creation. The name is not echoed: from a URL,
// it is a parameter's value.
func checkTopicName(role, name string) error {
	ok := name != "" && len(name) <= 249 && name != "." && name != ".."
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return driver.Invalidf("kafka: the %s name is not a valid Kafka topic name (1 to 249 characters from a-z, A-Z, 0-9, \".\", \"_\" and \"-\", not \".\" or \"..\")", role)
	}
	return nil
}

// checkTopicNames checks the names of a subscription's retry and
// dead-letter topics, where set.
func checkTopicNames(o *SubscriptionOptions) error {
	if o.RetryTopic != "" {
		if err := checkTopicName("RetryTopic", o.RetryTopic); err != nil {
			return err
		}
	}
	if o.DeadLetterTopic != "" {
		return checkTopicName("DeadLetterTopic", o.DeadLetterTopic)
	}
	return nil
}

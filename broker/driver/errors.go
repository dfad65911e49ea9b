package driver

// ErrorCode classifies a driver error.
type ErrorCode int

// Error codes. Drivers return raw errors and map them through Classify.
const (
	// Unknown: not classified; treated as not retryable.
	Unknown ErrorCode = iota
	// NotFound: the topic, queue or subscription does not exist.
	NotFound
	// TooLarge: the message exceeds the broker's size limit.
	TooLarge
	// Invalid: the broker rejected the request as malformed.
	Invalid
	// Closed: the topic, subscription or its connection is closed for good.
	Closed
	// LockLost: the delivery's lock expired or it was settled already, so
	// it can no longer be settled; the broker will (or did) redeliver it.
	LockLost
	// Canceled: the context was canceled.
	Canceled
	// DeadlineExceeded: the context's deadline passed.
	DeadlineExceeded
	// Unavailable: a transient failure (connection lost, broker busy,
	// throttled); retrying may succeed.
	Unavailable
	// PermissionDenied: credentials or rights are missing.
	PermissionDenied
)

var codeNames = [...]string{"unknown", "not found", "too large", "invalid", "closed", "lock lost", "canceled", "deadline exceeded", "unavailable", "permission denied"}

func (c ErrorCode) String() string {
	if int(c) >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "unknown"
}

// ErrorInfo is a driver's classification of one error.
type ErrorInfo struct {
	Code ErrorCode
	// MaybeSent is true when a failed send may nevertheless have reached the
	// broker (a timeout waiting for a confirm, a connection lost after the
	// write). It is false when the driver knows nothing was sent.
	MaybeSent bool
}

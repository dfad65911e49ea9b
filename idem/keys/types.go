package keys

import (
	"fmt"
	"time"

	"github.com/wary-go/wary/idem/internal/names"
)

// State is the state of an idempotency key.
type State int

// Key states.
const (
	// Staged: the key and intent are committed; the call was not
	// started.
	Staged State = iota
	// InFlight: a call was started at LastCallAt and holds the key until
	// LeaseUntil. Past it, with no outcome recorded, the caller died
	// during the call (or after it, before recording): the outcome is
	// unknown.
	InFlight
	// Succeeded: the provider did it; Result is its answer.
	Succeeded
	// Failed: the provider refused for good (the call returned an error
	// marked with broker.Permanent); Error says why.
	Failed
	// Unknown: the call failed in a way that leaves the outcome open (a
	// timeout, a 5xx), and it may not be retried automatically.
	Unknown
)

func (s State) String() string {
	switch s {
	case Staged:
		return "staged"
	case InFlight:
		return "in flight"
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Record is an idempotency key as stored.
type Record struct {
	Provider string
	Key      string
	// Intent is what the call is to do (the request, as the caller encodes
	// it), stored with the key.
	Intent   []byte
	State    State
	Result   []byte
	Error    string
	Attempts int // calls started
	// CreatedAt is when the key was staged; FirstCallAt when the provider
	// could first have seen it (the start of the first call; zero if
	// none); LastCallAt the start of the latest call; LeaseUntil when an
	// in-flight call's hold ends; DoneAt when the outcome was recorded.
	CreatedAt, FirstCallAt, LastCallAt, LeaseUntil, DoneAt time.Time
}

// Outcome is what a call, or a reconciliation, found.
type Outcome struct {
	// State is Succeeded, Failed or Unknown; a reconciliation may
	// also say Staged: the provider never saw the key, so it is safe to
	// call again (as if for the first time).
	State  State
	Result []byte
	Error  string
}

// MaxLen is the longest idempotency key accepted, in bytes (Stripe's
// limit).
const MaxLen = names.MaxKeyLen

// Validate checks an idempotency key: 1 to 255 bytes of printable ASCII
// without spaces. Its error matches idem.ErrInvalidName.
func Validate(key string) error { return names.ValidateKey(key) }

// Filter selects idempotency keys of one provider.
type Filter struct {
	Provider string
	// States, if not empty, selects keys in one of these states.
	States []State
	// Unresolved selects keys whose outcome is unknown: Unknown, and
	// InFlight with LeaseUntil not after At.
	Unresolved bool
	At         time.Time
	// Limit, if positive, caps the number of keys.
	Limit int
}

package idem

import (
	"errors"
	"fmt"
)

// Result says what Inbox.Handle did with a delivery. Every result but
// ResultGapRetried and ResultFailed settled the delivery for good (acked or
// dead-lettered); those two nacked it for redelivery.
type Result int

// Results of Handle.
const (
	// ResultApplied: the handler ran and its transaction, with the claim,
	// committed; the delivery was acknowledged.
	ResultApplied Result = iota + 1
	// ResultDuplicate: the message was already claimed (processed or
	// parked before); acknowledged without running the handler.
	ResultDuplicate
	// ResultStale: the handler found the message a duplicate or stale by
	// the state (it returned SkipStale; a version check does for
	// VersionStale) and applied nothing; the claim committed and the
	// delivery was acknowledged.
	ResultStale
	// ResultGapRetried: the handler returned a *ParkError (a version gap
	// or missing aggregate) with attempts left: rolled back and nacked
	// with backoff, to be parked after Options.MaxAttempts.
	ResultGapRetried
	// ResultParked: the message was parked (a *ParkError out of attempts,
	// or with ParkError.Now; or it could not be claimed, see ErrInvalidID
	// and ErrData, and the broker cannot dead-letter) and
	// acknowledged.
	ResultParked
	// ResultHeld: the message's aggregate has a parked message, so it was
	// parked behind it without running the handler, and acknowledged.
	ResultHeld
	// ResultFailed: the handler (or the store) failed: rolled back and
	// nacked with backoff; Handle returns the error.
	ResultFailed
	// ResultDeadLettered: the handler returned an error marked with
	// broker.Permanent, or the message could not be claimed (its ID breaks
	// the ID rules, ErrInvalidID, or the store refused one of its values,
	// ErrData), and the broker can dead-letter: dead-lettered with
	// the reason, never applied.
	ResultDeadLettered
	// ResultEarly: a versioned event ahead of its aggregate (a gap), held
	// in the store with its claim (Options.Gaps) and acknowledged; it is
	// applied, by the same handler, in the transaction that applies its
	// predecessor (see Stats.EarlyApplied), or parked with its aggregate
	// after Options.EarlyLimit.
	ResultEarly
)

func (r Result) String() string {
	switch r {
	case ResultApplied:
		return "applied"
	case ResultDuplicate:
		return "duplicate"
	case ResultStale:
		return "stale"
	case ResultGapRetried:
		return "gap retried"
	case ResultParked:
		return "parked"
	case ResultHeld:
		return "held"
	case ResultFailed:
		return "failed"
	case ResultDeadLettered:
		return "dead-lettered"
	case ResultEarly:
		return "early"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// SkipStale, returned by a handler, says that the message is a duplicate or
// stale by the state it found (a version check said VersionStale, a
// state-transition guard TransitionAlready or TransitionInvalid) and that it
// applied nothing. It is not a failure: the transaction, with the claim,
// commits, the delivery is acknowledged, and Handle reports ResultStale.
// Wrapped, it is matched with errors.Is.
//
//lint:ignore ST1012 a signal like fs.SkipDir, not a failure
var SkipStale = errors.New("idem: duplicate or stale, not applied")

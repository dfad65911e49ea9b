package testkit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wary-go/wary/idem"
)

// Report is what one Run did.
type Report struct {
	// Published counts the messages published, copies included; Order
	// lists their IDs in the order they reached the broker.
	Published int
	Order     []string
	// Late counts the messages that reached the broker after one listed
	// after them (the reorders; copies aside).
	Late int
	// Deliveries counts the deliveries handed to the inbox, redeliveries
	// included.
	Deliveries int
	// Results counts what Inbox.Handle returned, by result: applied,
	// duplicates dropped (idem.ResultDuplicate), stale, gaps retried,
	// parked, held, failed, dead-lettered. The deliveries failed by the
	// injected crash before commit are not counted here.
	Results map[idem.Result]int
	// CrashesBeforeCommit and CrashesAfterCommit count the injected
	// crashes: transactions rolled back after the handler succeeded, and
	// acknowledgements lost after a commit.
	CrashesBeforeCommit int
	CrashesAfterCommit  int
	// Failures are the handler's (and the store's) errors, in order; the
	// inbox retried those messages, or dead-lettered them.
	Failures []Failure
	// Parked is the consumer's park after the run, by aggregate in replay
	// order (Inbox.Parked): replay it with Kit.Inbox().Replay or ReplayAll.
	Parked []idem.Parked
	// Early are the events the inbox holds in the store after the run,
	// ahead of a predecessor that never came (idem.GapsHold, the default
	// on the Queue profile): a gap that did not close. The inbox parks
	// them once they waited idem.Options.EarlyLimit (an hour by default),
	// which Run does not wait for; a later Run that delivers the missing
	// event applies them.
	Early []Early
	// DeadLetters are the messages dead-lettered during the run: by the
	// inbox (an error marked broker.Permanent, a write outside the
	// transaction) or by the broker (its delivery limit, MaxAttempts+3).
	DeadLetters []DeadLetter
}

// Failure is one failed delivery.
type Failure struct {
	MessageID string
	Attempt   int
	Err       error
}

// Early is an event the inbox holds ahead of its predecessor.
type Early struct {
	MessageID   string
	AggregateID string
	Version     int64 // the event's
	Applied     int64 // the aggregate's, in the state table (0: no row)
}

// String says what the event waits for.
func (e Early) String() string {
	return fmt.Sprintf("held as an early event: aggregate %q is at version %d, and version %d never came (a gap that did not close; "+
		"the inbox parks it after idem.Options.EarlyLimit)", e.AggregateID, e.Applied, e.Applied+1)
}

// DeadLetter is a dead-lettered message and the reason given.
type DeadLetter struct {
	MessageID string
	Reason    string
}

// String sums the report up on a few lines, for t.Log.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d messages (%d late), %d deliveries; crashes: %d before commit, %d after commit\n",
		r.Published, r.Late, r.Deliveries, r.CrashesBeforeCommit, r.CrashesAfterCommit)
	results := make([]idem.Result, 0, len(r.Results))
	for res := range r.Results {
		results = append(results, res)
	}
	slices.Sort(results)
	b.WriteString("results:")
	for _, res := range results {
		fmt.Fprintf(&b, " %s %d", res, r.Results[res])
	}
	b.WriteString("\n")
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "failed: %s attempt %d: %v\n", f.MessageID, f.Attempt, f.Err)
	}
	for _, p := range r.Parked {
		fmt.Fprintf(&b, "parked: %s (aggregate %q version %d): %s\n", p.MessageID, p.AggregateID, p.Version, p.Reason)
	}
	for _, e := range r.Early {
		fmt.Fprintf(&b, "early: %s %s\n", e.MessageID, e)
	}
	for _, d := range r.DeadLetters {
		fmt.Fprintf(&b, "dead-lettered: %s: %s\n", d.MessageID, d.Reason)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

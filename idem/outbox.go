package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wary-go/wary/broker"
)

// OutboxMessage is one event written to the outbox in the domain
// transaction.
type OutboxMessage struct {
	// ID is the message's stable logical ID, which becomes broker.Message.ID
	// (the broker's dedup ID and the consumer inbox's key). Empty: Add
	// fills it with broker.NewID(); the caller sees it.
	ID string
	// AggregateID identifies the aggregate (entity) the event belongs to;
	// required. It becomes broker.Message.Key, the ordering key, and the
	// header HeaderAggregateID.
	AggregateID string
	// Version is the aggregate's version after the event (HeaderAggregateVersion),
	// or 0 for events that do not bump it.
	Version int64
	// Type is the event type name (HeaderType), optional.
	Type string
	// Headers are extra application headers (a W3C traceparent, say).
	// Values must be valid UTF-8; the four event headers of this package
	// are written by the relay and may not be set here.
	Headers map[string]string
	// Payload is the message body.
	Payload []byte
}

// OutboxState is the state of an outbox row.
type OutboxState int

// Outbox row states.
const (
	// OutboxPending: committed and not yet published (or published, and
	// the relay crashed before marking it).
	OutboxPending OutboxState = iota
	// OutboxSent: published; the broker confirmed it.
	OutboxSent
	// OutboxQuarantined: publishing failed permanently or too often. The
	// row blocks the later rows of its aggregate until an operator
	// requeues or discards it.
	OutboxQuarantined
	// OutboxDiscarded: an operator gave up on the row; it no longer blocks
	// its aggregate and is never published.
	OutboxDiscarded
)

func (s OutboxState) String() string {
	switch s {
	case OutboxPending:
		return "pending"
	case OutboxSent:
		return "sent"
	case OutboxQuarantined:
		return "quarantined"
	case OutboxDiscarded:
		return "discarded"
	}
	return fmt.Sprintf("OutboxState(%d)", int(s))
}

// OutboxRow is an outbox message as stored.
type OutboxRow struct {
	OutboxMessage
	// RowID identifies the row in the store (increasing in insertion order).
	RowID int64
	// Sequence is the row's per-aggregate sequence: 1, 2, 3, ... in commit
	// order, without gaps (HeaderSequence).
	Sequence  int64
	State     OutboxState
	CreatedAt time.Time
	// Attempts counts failed publish attempts.
	Attempts int
	// NextAttempt is when a pending row that failed may be tried again.
	NextAttempt time.Time
	// LastError is the last publish failure.
	LastError string
	// SentAt is when the row was marked sent (or discarded).
	SentAt time.Time
}

// Message returns the broker message the relay publishes for r: ID, key,
// the event headers (HeaderAggregateID, HeaderAggregateVersion when not 0,
// HeaderSequence, HeaderType when set) merged over r's headers, and the
// payload as body.
func (r *OutboxRow) Message() *broker.Message {
	h := make(map[string]string, len(r.Headers)+4)
	for k, v := range r.Headers {
		h[k] = v
	}
	for k, v := range (Event{AggregateID: r.AggregateID, Version: r.Version, Sequence: r.Sequence, Type: r.Type}).Headers() {
		h[k] = v
	}
	return &broker.Message{ID: r.ID, Key: r.AggregateID, Headers: h, Body: r.Payload}
}

// OutboxStore is the database side of the outbox, for transactions of type
// Tx. idem/postgres and idem/sqlite implement it.
type OutboxStore[Tx any] interface {
	RelayStore
	// AddOutbox inserts msgs in tx and returns their per-aggregate
	// sequences. Each message gets the next sequence of its aggregate,
	// assigned under a lock on the aggregate's counter row that tx holds
	// until it ends: a transaction adding to the same aggregate waits, so
	// sequences of one aggregate commit in order, and a rollback returns
	// its sequences to be reused (no gaps). msgs are valid (see Outbox.Add).
	AddOutbox(ctx context.Context, tx Tx, msgs []OutboxMessage, at time.Time) ([]int64, error)
}

// RelayStore is what a Relay needs from a store: claiming due rows,
// recording outcomes, and the operator's view. Implementations are safe
// for concurrent use, also by relays in several processes.
type RelayStore interface {
	// ClaimOutbox claims up to r.Limit rows for r.Owner: the lowest
	// unsent row (pending or quarantined) of each aggregate, if it is
	// pending and due at r.Now, followed by up to r.PerAggregate-1 more
	// pending rows of the same aggregate, in sequence order. An aggregate
	// whose first unsent row another relay has claimed is skipped. Nothing
	// claimed returns a batch with no rows.
	ClaimOutbox(ctx context.Context, r OutboxClaim) (OutboxBatch, error)
	// ReleaseOutbox gives up whatever owner holds (a lease), so that
	// another relay can take over at once. Relays call it when they stop.
	ReleaseOutbox(ctx context.Context, owner string) error
	// OutboxHealth reports the backlog as of now.
	OutboxHealth(ctx context.Context, now time.Time) (OutboxHealth, error)
	// ListOutbox lists rows matching f, in row order.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// SetOutboxState moves the row with the given ID from one of from to
	// to (requeue: quarantined to pending with attempts reset; discard: to
	// discarded) and reports whether it did.
	SetOutboxState(ctx context.Context, rowID int64, to OutboxState, at time.Time, from ...OutboxState) (bool, error)
	// PurgeOutbox deletes at most limit sent or discarded rows marked
	// before before, and returns how many.
	PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error)
}

// OutboxClaim is a claim request.
type OutboxClaim struct {
	Owner        string
	Now          time.Time
	Limit        int
	PerAggregate int
	// Lease is how long a store that claims by lease (SQLite) keeps the
	// claim when its owner goes silent.
	Lease time.Duration
}

// OutboxBatch is a claimed set of rows. Exactly one of Complete and Release
// must be called.
type OutboxBatch interface {
	// Rows are the claimed rows, each aggregate's in sequence order.
	Rows() []OutboxRow
	// Complete marks sent as sent and records failed, in one transaction,
	// and releases the claim.
	Complete(ctx context.Context, sent []int64, failed []OutboxFailure, at time.Time) error
	// Release releases the claim and records nothing: the rows stay as they
	// were (a crashed relay).
	Release(ctx context.Context) error
}

// OutboxFailure is one failed publish.
type OutboxFailure struct {
	RowID       int64
	Error       string
	NextAttempt time.Time
	Quarantine  bool
}

// OutboxFilter selects outbox rows. The zero value selects every row.
type OutboxFilter struct {
	// States, if not empty, selects rows in one of these states.
	States []OutboxState
	// AggregateID, if not empty, selects one aggregate's rows.
	AggregateID string
	// Limit, if positive, caps the number of rows.
	Limit int
}

// OutboxHealth is the outbox's backlog.
type OutboxHealth struct {
	// Backlog counts pending rows (due or backing off).
	Backlog int64
	// Retrying counts pending rows that failed at least once.
	Retrying int64
	// Quarantined counts quarantined rows.
	Quarantined int64
	// OldestUnsent is the creation time of the oldest pending or
	// quarantined row (zero if none), and OldestUnsentAge its age.
	OldestUnsent    time.Time
	OldestUnsentAge time.Duration
}

// ErrInvalidMessage matches the error Outbox.Add returns for a message it
// refuses (no aggregate ID, a negative version, a reserved or non-UTF-8
// header).
var ErrInvalidMessage = errors.New("idem: invalid outbox message")

// Outbox adds messages to the outbox inside the caller's transaction.
type Outbox[Tx any] struct {
	store OutboxStore[Tx]
	now   func() time.Time
}

// NewOutbox returns an outbox on store; now is the clock (nil: time.Now).
func NewOutbox[Tx any](store OutboxStore[Tx], now func() time.Time) (*Outbox[Tx], error) {
	if store == nil {
		return nil, errors.New("idem: nil store")
	}
	if now == nil {
		now = time.Now
	}
	return &Outbox[Tx]{store: store, now: now}, nil
}

// Store returns the store.
func (o *Outbox[Tx]) Store() OutboxStore[Tx] { return o.store }

// Add writes msgs to the outbox in tx, the transaction that also writes the
// domain change they announce, and returns their per-aggregate sequences.
// Messages with an empty ID get one (written back into msgs). The rows
// become visible to the relay when tx commits, and vanish with it if it
// rolls back. Add validates every message first and writes nothing if one
// is invalid (ErrInvalidMessage).
//
// Add locks each aggregate's sequence counter until tx ends, so keep
// transactions that add to a busy aggregate short; messages of one call are
// locked in aggregate order, and transactions that add to several
// aggregates in different orders across calls can deadlock (the database
// aborts one).
func (o *Outbox[Tx]) Add(ctx context.Context, tx Tx, msgs ...*OutboxMessage) ([]int64, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	rows := make([]OutboxMessage, len(msgs))
	for i, m := range msgs {
		if err := validateOutbox(m); err != nil {
			return nil, err
		}
		if m.ID == "" {
			m.ID = broker.NewID()
		}
		rows[i] = *m
	}
	seqs, err := o.store.AddOutbox(ctx, tx, rows, o.now())
	if err != nil {
		return nil, fmt.Errorf("idem: outbox add: %w", err)
	}
	return seqs, nil
}

var reservedHeaders = []string{HeaderAggregateID, HeaderAggregateVersion, HeaderSequence, HeaderType}

func validateOutbox(m *OutboxMessage) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: message %q: %s", ErrInvalidMessage, m.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil message", ErrInvalidMessage)
	case m.AggregateID == "":
		return bad("no aggregate ID")
	case !utf8.ValidString(m.AggregateID) || !utf8.ValidString(m.ID) || !utf8.ValidString(m.Type):
		return bad("ID, aggregate ID and type must be valid UTF-8")
	case m.Version < 0:
		return bad("negative version %d", m.Version)
	}
	for k, v := range m.Headers {
		for _, r := range reservedHeaders {
			if strings.EqualFold(k, r) {
				return bad("header %s is written by the relay", r)
			}
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return bad("header %s: not valid UTF-8", strconv.Quote(k))
		}
	}
	return nil
}

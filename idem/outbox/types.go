package outbox

import (
	"fmt"
	"time"

	"github.com/wary-go/wary/broker"
)

// Message is one event written to the outbox in the domain
// transaction.
type Message struct {
	// ID is the message's stable logical ID, which becomes broker.Message.ID
	// (the broker's dedup ID and the consumer inbox's key), under
	// driver.ValidateID's rules (not only white space, no control
	// characters, at most driver.MaxIDLen bytes). Empty: Add fills it with
	// broker.NewID(); the caller sees it.
	ID string
	// AggregateID identifies the aggregate (entity) the event belongs to;
	// required, and not only white space. It becomes broker.Message.Key,
	// the ordering key, and the header broker.HeaderAggregateID.
	AggregateID string
	// Version is the aggregate's version after the event (broker.HeaderAggregateVersion),
	// or 0 for events that do not bump it.
	Version int64
	// Type is the event type name (broker.HeaderType), optional.
	Type string
	// Headers are extra application headers (a W3C traceparent, say,
	// or broker.HeaderContentType, which NewMessage sets), under
	// driver.ValidateHeaders's rules (names not empty, names and values
	// valid UTF-8, no name reserved for wary); the four event headers of
	// this package are written by the relay and may not be set here.
	Headers broker.Headers
	// Payload is the message body.
	Payload []byte
}

// NewMessage returns a message whose payload is v encoded with c (nil:
// broker.JSON), as broker.NewMessage encodes it, with c's content type in
// broker.HeaderContentType: the relay publishes the header, and a typed
// consumer (idem.Typed, broker.Typed, broker.Decode) with another codec
// refuses the message instead of misreading it. id, aggregateID, version
// and typ are the message's ID (empty: Add fills it), AggregateID,
// Version and Type.
func NewMessage[T any](c broker.Codec, id, aggregateID string, version int64, typ string, v T) (*Message, error) {
	m, err := broker.NewMessage(c, id, aggregateID, v)
	if err != nil {
		return nil, err
	}
	return &Message{ID: id, AggregateID: aggregateID, Version: version, Type: typ, Headers: m.Headers, Payload: m.Body}, nil
}

// State is the state of an outbox row.
type State int

// Outbox row states.
const (
	// Pending: committed and not yet published (or published, and
	// the relay crashed before marking it).
	Pending State = iota
	// Sent: published; the broker confirmed it.
	Sent
	// Quarantined: publishing failed permanently or too often. The
	// row blocks the later rows of its aggregate until an operator
	// requeues or discards it.
	Quarantined
	// Discarded: an operator gave up on the row; it no longer blocks
	// its aggregate and is never published.
	Discarded
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Sent:
		return "sent"
	case Quarantined:
		return "quarantined"
	case Discarded:
		return "discarded"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Row is an outbox message as stored.
type Row struct {
	Message
	// RowID identifies the row in the store (increasing in insertion order).
	RowID int64
	// Sequence is the row's per-aggregate sequence: 1, 2, 3, ... in commit
	// order, without gaps (broker.HeaderSequence).
	Sequence  int64
	State     State
	CreatedAt time.Time
	// Attempts counts failed publish attempts.
	Attempts int
	// NextAttempt is when a pending row that failed may be tried again.
	NextAttempt time.Time
	// LastError is the last publish failure.
	LastError string
	// SentAt is when the row was marked sent (or discarded).
	SentAt time.Time
	// Invalid, when not nil, says why the row cannot be published: it did
	// not decode (headers that are not a JSON object of strings, say), or
	// holds what Add refuses (an empty or blank message ID, an empty
	// aggregate ID: a row another writer put in the table). It matches
	// ErrInvalidMessage. A store returns such a row, with what it could
	// read (at least RowID; AggregateID as the table holds it), rather than
	// failing the claim or the stream, and the relay quarantines it with
	// this error as its last error.
	Invalid error
}

// Health is the outbox's backlog.
type Health struct {
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

// Filter selects outbox rows, for the operator's listings
// (admin.Admin.Outbox) and the relay's. The zero value selects every row.
type Filter struct {
	// States, if not empty, selects rows in one of these states.
	States []State
	// AggregateID, if not empty, selects one aggregate's rows.
	AggregateID string
	// AfterRow, if positive, selects rows whose RowID is greater: a
	// cursor for paging through rows.
	AfterRow int64
	// Limit, if positive, caps the number of rows.
	Limit int
	// NoPayload lists the rows without their payloads (Payload nil),
	// which the store then does not read.
	NoPayload bool
}

// StreamStatus is the outbox stream's position on the server, where
// relays stream the outbox from the database's log
// (postgres.SourceOptions.Stream).
type StreamStatus struct {
	// Slot names the server's position (PostgreSQL: the replication slot),
	// and Publication what it streams.
	Slot, Publication string
	// Exists reports whether the slot exists, and Active whether a relay
	// streams from it now.
	Exists, Active bool
	// LagBytes is how much log the slot retains beyond its confirmed
	// position: the server's current position minus the confirmed one.
	LagBytes int64
	// LagAge is how long ago the relay last confirmed everything it had
	// been sent (PostgreSQL: pg_stat_replication.flush_lag; 0 when caught
	// up or unknown).
	LagAge time.Duration
	// WALStatus is the server's view of the retained log (PostgreSQL:
	// reserved, extended, unreserved or lost).
	WALStatus string
	// Released counts the times a relay dropped the slot because it
	// retained more log than the store's WAL budget (the relay polled the
	// table, then streamed from a new slot); ReleasedAt is the last time,
	// and ReleasedLag how much log the slot retained then.
	Released    int64
	ReleasedAt  time.Time
	ReleasedLag int64
}

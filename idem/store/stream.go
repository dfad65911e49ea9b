package store

import (
	"context"
	"errors"
	"time"
)

// Streamer is implemented by stores that can stream committed outbox rows
// from the database's log, in commit order (PostgreSQL: logical
// replication from a slot, with pgoutput and a publication on the outbox
// table). A relay with RelayOptions.Stream uses it instead of claiming
// rows from the table; the table stays the source of truth.
type Streamer interface {
	// OpenOutboxStream opens the stream for owner, creating what it needs
	// on the server (a publication, a slot). It fails with an error
	// matching ErrStreamHeld while another relay holds the stream, and
	// with one matching ErrStreamUnavailable when the server cannot stream
	// (the error says exactly what is missing): the relay then polls the
	// table. Any other error says the server is out of reach for now (a
	// restart), or the stream's position vanished while it was opened:
	// the relay tries to open the stream again soon.
	OpenOutboxStream(ctx context.Context, owner string) (OutboxStream, error)
	// OutboxStreamStatus reports the stream's position on the server, for
	// operators.
	OutboxStreamStatus(ctx context.Context) (OutboxStreamStatus, error)
}

// ErrStreamHeld is returned by OpenOutboxStream while another relay holds
// the stream: this relay stands by.
var ErrStreamHeld = errors.New("idem/store: another relay holds the outbox stream")

// ErrStreamUnavailable is returned by OpenOutboxStream when the server
// cannot stream the outbox (wrapped with what is missing).
var ErrStreamUnavailable = errors.New("idem/store: the outbox stream is unavailable")

// OutboxStream is one relay's open stream. Recv is called from one
// goroutine; the other methods are safe for concurrent use with it.
type OutboxStream interface {
	// Fresh reports whether rows committed before the stream's position
	// may be only in the table: the position was created by this open (no
	// earlier one existed, or it was lost), or by an earlier one whose
	// relay stopped before it called Drained. The relay publishes them
	// from the table, then calls Drained.
	Fresh() bool
	// Drained records that the rows committed before the stream's
	// position were published from the table: later opens are not Fresh.
	Drained(ctx context.Context) error
	// Recv returns the next event: a commit's outbox rows in insertion
	// order, or a position with no rows when every commit up to it has
	// been returned (a keepalive, or commits without outbox rows).
	Recv(ctx context.Context) (StreamEvent, error)
	// Clear reports whether the table holds no row that Publishable would
	// leave out or that would hold an aggregate's later rows back: none
	// quarantined, and no pending row that failed before, was requeued,
	// or is for the claims only (Settle's passed, or moved by the purge).
	// While it holds, and nothing the relay does changes it, the relay
	// publishes windows without Publishable.
	Clear(ctx context.Context) (bool, error)
	// Publishable returns the rows of rows (a window of streamed rows, each
	// aggregate's in sequence order) that may be published: those not
	// settled otherwise (sent by a claim, discarded, quarantined, failed)
	// whose aggregate has no earlier unsent row outside rows and aloft
	// (the rows of earlier windows being published), nor an earlier row
	// in rows that it leaves for claims. held counts the rows it leaves in
	// the table for the relay's claims (not those already sent or
	// discarded).
	Publishable(ctx context.Context, rows, aloft []OutboxRow) (publish []OutboxRow, held int, err error)
	// Horizon returns a time at and a log position pos such that every
	// row created before at (by the server's clock) belongs to a
	// transaction that rolled back or committed before pos: the server's
	// time, or the start of the oldest transaction still open, and its
	// current log position.
	Horizon(ctx context.Context) (at time.Time, pos uint64, err error)
	// Settle deletes the published rows sent, records failed, and marks
	// passed (the window's rows not published: failed, held back, or
	// settled otherwise) for the claims only: the stream never publishes
	// them, and Clear sees them until a claim has.
	Settle(ctx context.Context, sent []int64, failed []OutboxFailure, passed []int64, at time.Time) error
	// Confirm tells the server that every commit up to pos is settled: it
	// is not sent again, and the log before it may be recycled. Confirm
	// returns at once; the position is sent with the stream's next status
	// report.
	Confirm(pos uint64)
	// Close ends the stream (the position stays on the server for the
	// next open).
	Close(ctx context.Context) error
}

// StreamEvent is what OutboxStream.Recv returns.
type StreamEvent struct {
	// Pos is the log position after the commit (or the keepalive's
	// position): confirming it settles the commit.
	Pos uint64
	// Rows are the commit's outbox rows; none for a keepalive.
	Rows []OutboxRow
	// Time is the commit's time (zero for a keepalive).
	Time time.Time
}

// OutboxStreamStatus is the stream's state on the server.
type OutboxStreamStatus struct {
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
}

package store

import (
	"context"
	"time"
)

// StreamStatuser is implemented by stores whose relays can stream the
// outbox from the database's log (PostgreSQL: logical replication), for
// the operator's view of the stream's position.
type StreamStatuser interface {
	// OutboxStreamStatus reports the stream's position on the server.
	OutboxStreamStatus(ctx context.Context) (OutboxStreamStatus, error)
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
	// Released counts the times a relay dropped the slot because it
	// retained more log than the store's WAL budget (the relay polled the
	// table, then streamed from a new slot); ReleasedAt is the last time,
	// and ReleasedLag how much log the slot retained then.
	Released    int64
	ReleasedAt  time.Time
	ReleasedLag int64
}

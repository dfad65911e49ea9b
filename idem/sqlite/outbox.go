package sqlite

import (
	"context"
	"database/sql"

	"github.com/wary-go/wary/idem/internal/sqlcore"
)

// The outbox on SQLite: one relay at a time holds a lease and claims rows
// (SQLite has no SKIP LOCKED, and serialises writers anyway); relays that
// wait for the lease, or find nothing due, look with a plain read and do
// not take the write lock. There is no NOTIFY: relays poll, and a producer
// in the same process can call Relay.Wake after committing.
func outboxDialect(db *sql.DB) sqlcore.OutboxDialect {
	return sqlcore.OutboxDialect{
		Read: func(ctx context.Context, f func(q sqlcore.Querier) error) error { return f(sqlcore.StdQuerier{On: db}) },
	}
}

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
		Read: func(ctx context.Context, f func(q sqlcore.Querier) error) error { return f(dbQuerier{db}) },
	}
}

// dbQuerier runs statements on the database outside a transaction.
type dbQuerier struct{ db *sql.DB }

func (q dbQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q dbQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlcore.Row {
	return q.db.QueryRowContext(ctx, query, args...)
}

func (q dbQuerier) Query(ctx context.Context, query string, args ...any) (sqlcore.Rows, error) {
	rows, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rowsAdapter{rows}, nil
}

package sqlcore

import (
	"context"
	"database/sql"
	"errors"
)

// StdBackend is a Backend on a database/sql handle: the transactions are
// *sql.Tx, each statement one call of database/sql (no statement cache of
// its own; a driver may keep one per connection). Stores on database/sql
// use it as it is or embed it (SQLite adds prepared statements to Q).
type StdBackend struct {
	DB *sql.DB
	// Classify, if not nil, maps the errors of statements (marks the
	// database's refusals of one message's values as seam.DataError).
	Classify func(error) error
}

// Begin begins a transaction that ends only by Commit or Rollback:
// database/sql would roll it back when the context given to BeginTx ends,
// and a handler that succeeded must keep its effect although the caller's
// context ended before the commit (the inbox bounds the commit itself).
// The statements of the transaction still honour their own contexts.
func (b StdBackend) Begin(ctx context.Context) (*sql.Tx, error) {
	return b.DB.BeginTx(context.WithoutCancel(ctx), nil)
}

// Commit commits tx.
func (StdBackend) Commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

// Rollback rolls tx back; a finished transaction is not an error.
func (StdBackend) Rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// Q adapts tx.
func (b StdBackend) Q(tx *sql.Tx) Querier { return StdQuerier{On: tx, Classify: b.Classify} }

// StdQuerier runs statements on a *sql.Tx, or on a *sql.DB (each
// statement its own transaction) or *sql.Conn.
type StdQuerier struct {
	On interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	// Classify is StdBackend's.
	Classify func(error) error
}

func (q StdQuerier) classify(err error) error {
	if err == nil || q.Classify == nil {
		return err
	}
	return q.Classify(err)
}

// Exec runs a statement and returns the rows it affected.
func (q StdQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.On.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, q.classify(err)
	}
	return res.RowsAffected()
}

// QueryRow runs a query that returns at most one row.
func (q StdQuerier) QueryRow(ctx context.Context, query string, args ...any) Row {
	return stdRow{q.On.QueryRowContext(ctx, query, args...), q}
}

// Query runs a query.
func (q StdQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := q.On.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, q.classify(err)
	}
	return StdRows{rows}, nil
}

type stdRow struct {
	r *sql.Row
	q StdQuerier
}

func (r stdRow) Scan(dest ...any) error { return r.q.classify(r.r.Scan(dest...)) }

// StdRows adapts *sql.Rows to Rows.
type StdRows struct{ *sql.Rows }

// Close closes the rows.
func (r StdRows) Close() { _ = r.Rows.Close() }

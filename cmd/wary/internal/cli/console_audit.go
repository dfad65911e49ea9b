package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// auditLog is the record of operator actions, in a table of its own next
// to the store's (PREFIXoperator_audit in the store's schema), which the
// console creates when it starts; once it exists, the commands that change
// the store (parked replay and discard, outbox requeue and discard) record
// their actions in it too. It is the console's and not
// one of the store's migrations: the library's tables are the
// application's, migrated by the application, while the commands and the
// console only read and change rows in them (SkipMigrate); an operator's
// tool keeps its own records without changing the application's schema
// version.
type auditLog struct {
	pool  *pgxpool.Pool
	table string
}

// auditEntry is one operator action: who, when, what, how many.
type auditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	What   string    `json:"what"`
	Count  int       `json:"count"`
	Detail string    `json:"detail,omitempty"`
}

func auditTable(ctx context.Context, pool *pgxpool.Pool, f *storeFlags) (string, error) {
	schema, prefix, err := pgNames(ctx, pool, f)
	if err != nil {
		return "", err
	}
	return pgx.Identifier{schema, prefix + "operator_audit"}.Sanitize(), nil
}

// openAudit creates the audit table unless it exists.
func openAudit(ctx context.Context, pool *pgxpool.Pool, f *storeFlags) (*auditLog, error) {
	table, err := auditTable(ctx, pool, f)
	if err != nil {
		return nil, err
	}
	_, err = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at     timestamptz NOT NULL DEFAULT now(),
	who    text NOT NULL,
	action text NOT NULL,
	what   text NOT NULL,
	count  integer NOT NULL,
	detail text NOT NULL DEFAULT ''
)`)
	if err != nil {
		return nil, fmt.Errorf("create the audit table %s: %s", table, redactErr(err))
	}
	return &auditLog{pool: pool, table: table}, nil
}

// audited records what a command did in the audit table, when d is a
// PostgreSQL store where the console created one (it never creates it);
// a failure to record is said on stderr, since the action is done.
func (a *app) audited(ctx context.Context, d db, f *storeFlags, action, what string, n int) {
	pool := d.pgPool()
	if pool == nil {
		return
	}
	err := func() error {
		table, err := auditTable(ctx, pool, f)
		if err != nil {
			return err
		}
		var found bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&found); err != nil || !found {
			return err
		}
		return (&auditLog{pool: pool, table: table}).record(ctx, auditEntry{Who: operator() + " via wary " + action, Action: action, What: what, Count: n})
	}()
	if err != nil {
		fmt.Fprintf(a.io.Err, "note: done, but the audit log did not record it: %s\n", redactErr(err))
	}
}

func (l *auditLog) record(ctx context.Context, e auditEntry) error {
	_, err := l.pool.Exec(context.WithoutCancel(ctx), `INSERT INTO `+l.table+` (who, action, what, count, detail) VALUES ($1, $2, $3, $4, $5)`,
		e.Who, e.Action, e.What, e.Count, e.Detail)
	if err != nil {
		return fmt.Errorf("audit log: %s", redactErr(err))
	}
	return nil
}

func (l *auditLog) list(ctx context.Context, limit int) ([]auditEntry, error) {
	rows, err := l.pool.Query(ctx, `SELECT id, at, who, action, what, count, detail FROM `+l.table+` ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("audit log: %s", redactErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditEntry, error) {
		var e auditEntry
		err := r.Scan(&e.ID, &e.At, &e.Who, &e.Action, &e.What, &e.Count, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit log: %s", redactErr(err))
	}
	return out, nil
}

// quoteAll quotes each name, as Go does (strconv.Quote), and joins them:
// in the audit log "a, b" is one name and "a", "b" two, and a newline or a
// terminal escape in a name is written escaped.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

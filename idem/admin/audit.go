package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AuditEntry is one operator action in the audit table: who did what,
// when, to how many messages or rows.
type AuditEntry struct {
	// ID numbers the entries in the order they were recorded; At is when
	// (Record sets both).
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Who names the operator ("alice@host via wary parked replay").
	Who string `json:"who"`
	// Action is the verb ("parked replay", "outbox requeue"), What what
	// it acted on, Count how many messages or rows it changed.
	Action string `json:"action"`
	What   string `json:"what"`
	Count  int    `json:"count"`
	// Detail says what went wrong, if the action failed part way.
	Detail string `json:"detail,omitempty"`
}

// ErrNoAudit matches the errors of Record and Audit when there is no
// audit table (CreateAudit creates it), or no database to keep one in
// (a store that hands out neither a pool nor a database).
var ErrNoAudit = errors.New("idem/admin: no audit table")

// auditTimeout bounds Record's insert, which outlives the caller's
// cancellation: the action it records is done.
const auditTimeout = 30 * time.Second

// CreateAudit creates the audit table unless it exists.
func (a *Admin) CreateAudit(ctx context.Context) error {
	if a.db == nil {
		return ErrNoAudit
	}
	return a.db.createAudit(ctx)
}

// Record adds e to the audit table (its ID and At are set there). It fails
// with an error matching ErrNoAudit when the table does not exist: a
// command records what it did only where an operator wanted a record
// (the console created the table). The insert is not cut off when ctx is
// canceled, since the action is done.
func (a *Admin) Record(ctx context.Context, e AuditEntry) error {
	if a.db == nil {
		return ErrNoAudit
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	return a.db.record(ctx, e)
}

// Audit lists the latest limit entries of the audit table, newest first.
func (a *Admin) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	if a.db == nil {
		return nil, ErrNoAudit
	}
	return a.db.audit(ctx, limit)
}

// sqlDB is the store's database, for what is not the store's: the check
// that its tables exist and the audit table. One of pg, pgsql and lite
// is set; my: lite is a MySQL or MariaDB database (idem/mysql), not
// SQLite.
type sqlDB struct {
	pg *pgxpool.Pool
	// pgsql is PostgreSQL through database/sql (pgx's stdlib driver).
	pgsql          *sql.DB
	lite           *sql.DB
	my             bool
	schema, prefix string
}

// postgres reports whether the database is PostgreSQL.
func (db *sqlDB) postgres() bool { return db.pg != nil || db.pgsql != nil }

// pgRow runs a query of one row on PostgreSQL.
func (db *sqlDB) pgRow(ctx context.Context, q string, args ...any) interface{ Scan(...any) error } {
	if db.pg != nil {
		return db.pg.QueryRow(ctx, q, args...)
	}
	return db.pgsql.QueryRowContext(ctx, q, args...)
}

// pgExec runs a statement on PostgreSQL.
func (db *sqlDB) pgExec(ctx context.Context, q string, args ...any) error {
	var err error
	if db.pg != nil {
		_, err = db.pg.Exec(ctx, q, args...)
	} else {
		_, err = db.pgsql.ExecContext(ctx, q, args...)
	}
	return err
}

// myName quotes a MySQL name, qualified by schema (a database) if set.
func myName(schema, name string) string {
	q := "`" + strings.ReplaceAll(name, "`", "``") + "`"
	if schema == "" {
		return q
	}
	return "`" + strings.ReplaceAll(schema, "`", "``") + "`." + q
}

// table returns the qualified name of the table prefix+name, and the
// schema it is in (PostgreSQL: the search_path's first when none is set).
func (db *sqlDB) table(ctx context.Context, name string) (string, string, error) {
	schema := db.schema
	if db.my {
		if schema == "" {
			if err := db.lite.QueryRowContext(ctx, "SELECT COALESCE(DATABASE(), '')").Scan(&schema); err != nil {
				return "", "", fmt.Errorf("idem/admin: read the current database: %w", err)
			}
		}
		return myName(schema, db.prefix+name), schema, nil
	}
	if !db.postgres() {
		if schema == "" {
			return pgx.Identifier{db.prefix + name}.Sanitize(), "main", nil
		}
		return pgx.Identifier{schema, db.prefix + name}.Sanitize(), schema, nil
	}
	if schema == "" {
		if err := db.pgRow(ctx, "SELECT coalesce(current_schema(), '')").Scan(&schema); err != nil {
			return "", "", fmt.Errorf("idem/admin: read the current schema: %w", err)
		}
	}
	return pgx.Identifier{schema, db.prefix + name}.Sanitize(), schema, nil
}

// exists reports whether the table prefix+name exists, and its name.
func (db *sqlDB) exists(ctx context.Context, name string) (bool, string, string, error) {
	table, schema, err := db.table(ctx, name)
	if err != nil {
		return false, "", "", err
	}
	var found bool
	switch {
	case db.postgres():
		err = db.pgRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&found)
	case db.my:
		err = db.lite.QueryRowContext(ctx, "SELECT count(*) > 0 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
			schema, db.prefix+name).Scan(&found)
	default:
		master := "sqlite_master"
		if db.schema != "" {
			master = pgx.Identifier{db.schema}.Sanitize() + ".sqlite_master"
		}
		err = db.lite.QueryRowContext(ctx, "SELECT count(*) > 0 FROM "+master+" WHERE type = 'table' AND name = ?", db.prefix+name).Scan(&found)
	}
	if err != nil {
		return false, "", "", fmt.Errorf("idem/admin: look for %s: %w", table, err)
	}
	return found, table, schema, nil
}

// noStoreError is checkStore's error, which matches ErrNoStore.
type noStoreError struct{ msg string }

func (e noStoreError) Error() string      { return e.msg }
func (noStoreError) Is(target error) bool { return target == ErrNoStore }

// checkStore fails, naming the schema and the table it looked for, unless
// the store's tables are there: a wrong schema or prefix would otherwise
// surface as a bare "relation does not exist" from the first query.
func (db *sqlDB) checkStore(ctx context.Context) error {
	found, table, schema, err := db.exists(ctx, "migrations")
	if err != nil || found {
		return err
	}
	if db.my {
		return noStoreError{fmt.Sprintf("no wary store in database %q with prefix %q: table %q does not exist", schema, db.prefix, db.prefix+"migrations")}
	}
	where := fmt.Sprintf("schema %q", schema)
	switch {
	case db.postgres() && db.schema == "":
		where += " (the search_path's first)"
	case !db.postgres() && db.schema == "":
		where = "the main database"
	}
	return noStoreError{fmt.Sprintf("no wary store in %s with prefix %q: table %s does not exist", where, db.prefix, table)}
}

func (db *sqlDB) createAudit(ctx context.Context) error {
	table, _, err := db.table(ctx, "operator_audit")
	if err != nil {
		return err
	}
	switch {
	case db.my:
		// at: Unix microseconds, as the store's times.
		_, err = db.lite.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	at     BIGINT NOT NULL,
	who    TEXT NOT NULL,
	action TEXT NOT NULL,
	what   TEXT NOT NULL,
	count  INT NOT NULL,
	detail TEXT NOT NULL DEFAULT ('')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`)
	case db.postgres():
		err = db.pgExec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at     timestamptz NOT NULL DEFAULT now(),
	who    text NOT NULL,
	action text NOT NULL,
	what   text NOT NULL,
	count  integer NOT NULL,
	detail text NOT NULL DEFAULT ''
)`)
	default:
		// at: Unix microseconds.
		_, err = db.lite.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	at     INTEGER NOT NULL,
	who    TEXT NOT NULL,
	action TEXT NOT NULL,
	what   TEXT NOT NULL,
	count  INTEGER NOT NULL,
	detail TEXT NOT NULL DEFAULT ''
)`)
	}
	if err != nil {
		return fmt.Errorf("idem/admin: create the audit table %s: %w", table, err)
	}
	return nil
}

func (db *sqlDB) record(ctx context.Context, e AuditEntry) error {
	found, table, _, err := db.exists(ctx, "operator_audit")
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w %s", ErrNoAudit, table)
	}
	if db.postgres() {
		err = db.pgExec(ctx, `INSERT INTO `+table+` (who, action, what, count, detail) VALUES ($1, $2, $3, $4, $5)`,
			e.Who, e.Action, e.What, e.Count, e.Detail)
	} else {
		_, err = db.lite.ExecContext(ctx, `INSERT INTO `+table+` (at, who, action, what, count, detail) VALUES (?, ?, ?, ?, ?, ?)`,
			time.Now().UnixMicro(), e.Who, e.Action, e.What, e.Count, e.Detail)
	}
	if err != nil {
		return fmt.Errorf("idem/admin: audit log: %w", err)
	}
	return nil
}

func (db *sqlDB) audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	found, table, _, err := db.exists(ctx, "operator_audit")
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w %s", ErrNoAudit, table)
	}
	const cols = `id, at, who, action, what, count, detail`
	if db.pg != nil {
		rows, err := db.pg.Query(ctx, `SELECT `+cols+` FROM `+table+` ORDER BY id DESC LIMIT $1`, limit)
		if err != nil {
			return nil, fmt.Errorf("idem/admin: audit log: %w", err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
			var e AuditEntry
			err := r.Scan(&e.ID, &e.At, &e.Who, &e.Action, &e.What, &e.Count, &e.Detail)
			return e, err
		})
		if err != nil {
			return nil, fmt.Errorf("idem/admin: audit log: %w", err)
		}
		return out, nil
	}
	on, q := db.lite, `SELECT `+cols+` FROM `+table+` ORDER BY id DESC LIMIT ?`
	if db.pgsql != nil {
		on, q = db.pgsql, `SELECT `+cols+` FROM `+table+` ORDER BY id DESC LIMIT $1`
	}
	rows, err := on.QueryContext(ctx, q, limit)
	if err != nil {
		return nil, fmt.Errorf("idem/admin: audit log: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at int64 // SQLite: Unix microseconds
		when := any(&at)
		if db.pgsql != nil {
			when = &e.At
		}
		if err := rows.Scan(&e.ID, when, &e.Who, &e.Action, &e.What, &e.Count, &e.Detail); err != nil {
			return nil, fmt.Errorf("idem/admin: audit log: %w", err)
		}
		if db.lite != nil {
			e.At = time.UnixMicro(at)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idem/admin: audit log: %w", err)
	}
	return out, nil
}

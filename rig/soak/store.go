package soak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// The stores a run can use (workerSpec.Store).
const (
	storePostgres = "postgres"
	storeMySQL    = "mysql"
)

// database is the run's store seen from the parent: it holds the outbox the
// producer adds to, the effects table the check reads, and the run's own
// schema (PostgreSQL) or database (MySQL), dropped by close. The parent
// reaches the server directly; the workers reach it through the proxy in
// front of upstream, with workerDSN.
type database interface {
	// kind is storePostgres or storeMySQL; name names the server in
	// messages.
	kind() string
	// upstream is the server's HOST:PORT; workerDSN is the DSN of the
	// run's schema or database through a proxy listening at addr.
	upstream() string
	workerDSN(addr string) string
	// schema names the run's schema (PostgreSQL) or database (MySQL).
	schema() string
	// describe names the server, its version and the store's package.
	describe(ctx context.Context) string
	// add commits msgs to the outbox in one transaction.
	add(ctx context.Context, msgs []*outbox.Message) error
	// count runs a query of one integer.
	count(ctx context.Context, query string) (int, error)
	// effects calls f for each row of the effects table in commit order.
	effects(ctx context.Context, f func(id, agg string, version int)) error
	close()
}

// openDatabase creates the run's schema or database on the server the
// configuration names, the store's tables and the soak's own there, and
// returns it.
func openDatabase(ctx context.Context, cfg Config) (database, error) {
	switch {
	case cfg.Postgres != "" && cfg.MySQL != "":
		return nil, errors.New("soak: Config.Postgres and Config.MySQL are both set; a run uses one store")
	case cfg.MySQL != "":
		return openMySQLDatabase(ctx, cfg.MySQL)
	case cfg.Postgres != "":
		return openPostgresDatabase(ctx, cfg.Postgres)
	}
	return nil, errors.New("soak: Config.Postgres or Config.MySQL must name the store's server")
}

// pgDatabase is a run's schema on PostgreSQL.
type pgDatabase struct {
	u     *url.URL
	name  string
	admin *pgx.Conn
	st    *postgres.Store
	ob    *outbox.Outbox[pgx.Tx]
}

func openPostgresDatabase(ctx context.Context, raw string) (_ *pgDatabase, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, errors.New("soak: the PostgreSQL URL must be postgres://HOST:PORT/DB")
	}
	d := &pgDatabase{u: u, name: "wary_soak_" + newSuffix()}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.admin, err = pgx.Connect(ctx, raw); err != nil {
		return nil, err
	}
	if _, err := d.admin.Exec(ctx, "CREATE SCHEMA "+d.name); err != nil {
		d.admin.Close(ctx)
		d.admin = nil
		return nil, err
	}
	if d.st, err = openPostgresStore(ctx, raw, d.name, 8); err != nil {
		return nil, err
	}
	for _, q := range []string{
		"CREATE TABLE " + stateTable + " (id text PRIMARY KEY, version bigint NOT NULL)",
		"CREATE TABLE " + effectsTable + " (seq bigserial PRIMARY KEY, msg_id text NOT NULL, agg text NOT NULL, version bigint NOT NULL)",
	} {
		if _, err := d.st.Pool().Exec(ctx, q); err != nil {
			return nil, err
		}
	}
	if d.ob, err = outbox.New(d.st, nil); err != nil {
		return nil, err
	}
	return d, nil
}

func (*pgDatabase) kind() string       { return storePostgres }
func (d *pgDatabase) upstream() string { return d.u.Host }
func (d *pgDatabase) schema() string   { return d.name }

func (d *pgDatabase) describe(ctx context.Context) string {
	var v string
	if err := d.st.Pool().QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		v = "(version unknown: " + err.Error() + ")"
	}
	return "PostgreSQL " + v + " (idem/postgres)"
}

func (d *pgDatabase) workerDSN(addr string) string {
	wu := *d.u
	wu.Host = addr
	return wu.String()
}

func (d *pgDatabase) add(ctx context.Context, msgs []*outbox.Message) error {
	return pgx.BeginFunc(ctx, d.st.Pool(), func(tx pgx.Tx) error {
		_, err := d.ob.Add(ctx, tx, msgs...)
		return err
	})
}

func (d *pgDatabase) count(ctx context.Context, query string) (int, error) {
	var n int
	err := d.st.Pool().QueryRow(ctx, query).Scan(&n)
	return n, err
}

func (d *pgDatabase) effects(ctx context.Context, f func(id, agg string, version int)) error {
	rows, err := d.st.Pool().Query(ctx, "SELECT msg_id, agg, version FROM "+effectsTable+" ORDER BY seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	return scanEffects(rows, f)
}

func (d *pgDatabase) close() {
	if d.st != nil {
		d.st.Pool().Close()
	}
	if d.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = d.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+d.name+" CASCADE")
		d.admin.Close(ctx)
	}
}

// openPostgresStore opens a pool on the run's schema and the idem store on
// it.
func openPostgresStore(ctx context.Context, rawURL, schema string, maxConns int32) (*postgres.Store, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return st, nil
}

// myDatabase is a run's database on MySQL or MariaDB.
type myDatabase struct {
	cfg   *gomysql.Config // the server's DSN, on the run's database
	admin *sql.DB         // the server's DSN as given
	st    *mysql.Store
	ob    *outbox.Outbox[*sql.Tx]
}

func openMySQLDatabase(ctx context.Context, dsn string) (_ *myDatabase, err error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("soak: the MySQL DSN: %w", err) // the driver's parse errors quote no password
	}
	if cfg.Net != "tcp" {
		return nil, fmt.Errorf("soak: the MySQL DSN must reach the server over tcp(HOST:PORT), not %s: the workers reach it through a TCP proxy", cfg.Net)
	}
	d := &myDatabase{cfg: cfg}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.admin, err = sql.Open("mysql", dsn); err != nil {
		return nil, err
	}
	d.admin.SetMaxOpenConns(1) // the session's lock_wait_timeout in close
	cfg.DBName = "wary_soak_" + newSuffix()
	if _, err := d.admin.ExecContext(ctx, "CREATE DATABASE "+cfg.DBName); err != nil {
		d.cfg = nil // nothing to drop
		return nil, err
	}
	if d.st, err = openMySQLStore(ctx, cfg.FormatDSN(), 8, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	for _, q := range []string{
		"CREATE TABLE " + stateTable + " (id VARCHAR(64) PRIMARY KEY, version BIGINT NOT NULL)",
		"CREATE TABLE " + effectsTable + " (seq BIGINT AUTO_INCREMENT PRIMARY KEY, msg_id VARCHAR(64) NOT NULL, agg VARCHAR(64) NOT NULL, version BIGINT NOT NULL)",
	} {
		if _, err := d.st.DB().ExecContext(ctx, q); err != nil {
			return nil, err
		}
	}
	if d.ob, err = outbox.New(d.st, nil); err != nil {
		return nil, err
	}
	return d, nil
}

func (*myDatabase) kind() string       { return storeMySQL }
func (d *myDatabase) upstream() string { return d.cfg.Addr }
func (d *myDatabase) schema() string   { return d.cfg.DBName }

func (d *myDatabase) describe(ctx context.Context) string {
	var v string
	if err := d.st.DB().QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "MySQL (version unknown: " + err.Error() + ") (idem/mysql)"
	}
	if strings.Contains(v, "MariaDB") {
		return "MariaDB " + v + " (idem/mysql)"
	}
	return "MySQL " + v + " (idem/mysql)"
}

func (d *myDatabase) workerDSN(addr string) string {
	c := d.cfg.Clone()
	c.Addr = addr
	return c.FormatDSN()
}

// add tries again, a few times, a transaction that lost a deadlock or a
// lock wait to a relay's claim (mysql.ErrConflict), as a program's own
// transactions on MySQL must.
func (d *myDatabase) add(ctx context.Context, msgs []*outbox.Message) error {
	var err error
	for range 10 {
		if err = d.addOnce(ctx, msgs); !errors.Is(err, mysql.ErrConflict) {
			return err
		}
	}
	return err
}

func (d *myDatabase) addOnce(ctx context.Context, msgs []*outbox.Message) error {
	tx, err := d.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := d.ob.Add(ctx, tx, msgs...); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (d *myDatabase) count(ctx context.Context, query string) (int, error) {
	var n int
	err := d.st.DB().QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

func (d *myDatabase) effects(ctx context.Context, f func(id, agg string, version int)) error {
	rows, err := d.st.DB().QueryContext(ctx, "SELECT msg_id, agg, version FROM "+effectsTable+" ORDER BY seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	return scanEffects(rows, f)
}

func (d *myDatabase) close() {
	if d.st != nil {
		_ = d.st.Close()
	}
	if d.admin == nil {
		return
	}
	if d.cfg != nil && d.cfg.DBName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A worker killed mid-transaction may leave one open on the
		// server for a moment: the DROP waits for its metadata lock at
		// most 10 s.
		_, _ = d.admin.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10")
		_, _ = d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.cfg.DBName)
	}
	_ = d.admin.Close()
}

// openMySQLStore opens the idem store on dsn (the run's database), with at
// most maxConns connections.
func openMySQLStore(ctx context.Context, dsn string, maxConns int, logger *slog.Logger) (*mysql.Store, error) {
	st, err := mysql.Open(ctx, dsn, &mysql.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	st.DB().SetMaxOpenConns(maxConns)
	return st, nil
}

// workerDB is a worker's store: the idem store over transactions of type
// Tx, and how the consumer writes the soak's rows in the inbox's
// transaction (or, when unsafe, outside any).
type workerDB[Tx any] struct {
	st idem.Store[Tx]
	// exec runs a statement in tx; execNoTx outside a transaction.
	exec     func(ctx context.Context, tx Tx, query string, args ...any) error
	execNoTx func(ctx context.Context, query string, args ...any) error
	// insertState and insertEffect are the statements, in the store's
	// placeholders, of a new aggregate's row (id) and of an effect (msg_id,
	// agg, version).
	insertState, insertEffect string
	close                     func()
}

func postgresWorkerDB(ctx context.Context, spec workerSpec) (*workerDB[pgx.Tx], error) {
	st, err := openPostgresStore(ctx, spec.DSN, spec.Schema, int32(spec.Concurrency)+4)
	if err != nil {
		return nil, err
	}
	return &workerDB[pgx.Tx]{
		st: st,
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		execNoTx: func(ctx context.Context, q string, args ...any) error {
			_, err := st.Pool().Exec(ctx, q, args...)
			return err
		},
		insertState:  "INSERT INTO " + stateTable + " (id, version) VALUES ($1, 1)",
		insertEffect: "INSERT INTO " + effectsTable + " (msg_id, agg, version) VALUES ($1, $2, $3)",
		close:        st.Pool().Close,
	}, nil
}

func mysqlWorkerDB(ctx context.Context, spec workerSpec, logger *slog.Logger) (*workerDB[*sql.Tx], error) {
	st, err := openMySQLStore(ctx, spec.DSN, spec.Concurrency+4, logger)
	if err != nil {
		return nil, err
	}
	return &workerDB[*sql.Tx]{
		st: st,
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
		execNoTx: func(ctx context.Context, q string, args ...any) error {
			_, err := st.DB().ExecContext(ctx, q, args...)
			return err
		},
		insertState:  "INSERT INTO " + stateTable + " (id, version) VALUES (?, 1)",
		insertEffect: "INSERT INTO " + effectsTable + " (msg_id, agg, version) VALUES (?, ?, ?)",
		close:        func() { _ = st.Close() },
	}, nil
}

// effectRows is what scanEffects reads of pgx.Rows and *sql.Rows.
type effectRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanEffects calls f with each effect row of rows (msg_id, agg, version).
func scanEffects(rows effectRows, f func(id, agg string, version int)) error {
	for rows.Next() {
		var id, agg string
		var v int
		if err := rows.Scan(&id, &agg, &v); err != nil {
			return err
		}
		f(id, agg, v)
	}
	return rows.Err()
}

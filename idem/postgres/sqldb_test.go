package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

// sqlTestDB is testDB through database/sql: a *sql.DB on pgx's stdlib
// driver, with newPool's fresh schema as its search_path.
type sqlTestDB struct{ db *sql.DB }

func (d sqlTestDB) Open(ctx context.Context, prefix string) (idem.Store[*sql.Tx], error) {
	return postgres.OpenDB(ctx, d.db, &postgres.Options{Prefix: prefix})
}

func (sqlTestDB) Exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

func (sqlTestDB) QueryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) interface{ Scan(...any) error } {
	return tx.QueryRowContext(ctx, q, args...)
}

// ClaimAll implements idemtest.ClaimAllDB, as testDB does.
func (sqlTestDB) ClaimAll(ctx context.Context, tx *sql.Tx, table, consumer string, ids []string, at time.Time) (int, error) {
	rows, err := tx.QueryContext(ctx, claimAllSQL(table), consumer, ids, at)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// newSQLDB returns a *sql.DB (pgx's stdlib) on a fresh schema, dropped when
// t ends; set, if not nil, changes its connections' configuration first.
func newSQLDB(t testing.TB, set func(*pgx.ConnConfig)) *sql.DB {
	t.Helper()
	var cfg *pgx.ConnConfig
	newPoolConfig(t, func(c *pgxpool.Config) { cfg = c.ConnConfig.Copy() })
	if set != nil {
		set(cfg)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newSQLTestDB(t testing.TB) idemtest.DB[*sql.Tx] { return sqlTestDB{newSQLDB(t, nil)} }

func TestSQLStore(t *testing.T) {
	idemtest.Run(t, newSQLTestDB)
}

func TestSQLStoreWithMemoryBroker(t *testing.T) {
	idemtest.RunBroker(t, newSQLTestDB, memoryBroker)
}

func TestSQLStoreOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newSQLTestDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true})
}

// OpenDB refuses, with ErrNeedsPgx, a *sql.DB of another driver and the
// options that need the pool, and an inbox a Store made sliced.
func TestOpenDBRefuses(t *testing.T) {
	ctx := context.Background()
	other := sql.OpenDB(otherDriver{})
	defer other.Close()
	if _, err := postgres.OpenDB(ctx, other, nil); !errors.Is(err, postgres.ErrNeedsPgx) {
		t.Errorf("OpenDB on another driver: %v, want ErrNeedsPgx", err)
	}
	db := newSQLDB(t, nil)
	for _, o := range []postgres.Options{{InboxSlice: time.Hour}, {OutboxSlice: time.Hour}, {Source: postgres.SourceOptions{Stream: true}}} {
		if _, err := postgres.OpenDB(ctx, db, &o); !errors.Is(err, postgres.ErrNeedsPgx) {
			t.Errorf("OpenDB(%+v): %v, want ErrNeedsPgx", o, err)
		}
	}
	if _, err := postgres.OpenDB(ctx, db, &postgres.Options{Prefix: "bad-prefix"}); !errors.Is(err, idem.ErrInvalidName) {
		t.Errorf("bad prefix: %v", err)
	}
}

// BenchmarkInboxSQL is BenchmarkInbox through database/sql (OpenDB), the
// round trips counted by a pgx tracer on the *sql.DB's connections.
func BenchmarkInboxSQL(b *testing.B) {
	var n atomic.Int64
	idemtest.BenchCounted(b, func(t testing.TB) idemtest.DB[*sql.Tx] {
		return sqlTestDB{newSQLDB(t, func(c *pgx.ConnConfig) { c.Tracer = counter{&n} })}
	}, n.Load)
}

// otherDriver is a database/sql driver that is not pgx's: its connections
// do nothing.
type otherDriver struct{}

func (otherDriver) Connect(context.Context) (driver.Conn, error) { return otherConn{}, nil }
func (d otherDriver) Driver() driver.Driver                      { return d }
func (otherDriver) Open(string) (driver.Conn, error)             { return otherConn{}, nil }

type otherConn struct{}

func (otherConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("other driver") }
func (otherConn) Close() error                        { return nil }
func (otherConn) Begin() (driver.Tx, error)           { return nil, errors.New("other driver") }

// The relays' LISTEN connections get the *sql.DB's connection
// configuration without the notification buffer of the connection it was
// read from: with it, every LISTEN connection buffered its notifications
// in that pooled connection (growing for ever, and racing, as -race found
// in TestSQLStoreOutbox/ThreeRelays).
func TestOpenDBListenConfig(t *testing.T) {
	db := newSQLDB(t, nil)
	st, err := postgres.OpenDB(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := postgres.ListenConfig(st), postgres.ListenConfig(st)
	if a == b {
		t.Error("two LISTEN connections share one configuration")
	}
	if a.OnNotification != nil {
		t.Error("the LISTEN configuration buffers notifications in another connection")
	}
	if a.Host == "" || a.Database == "" || a.RuntimeParams["search_path"] == "" {
		t.Errorf("LISTEN configuration lost the *sql.DB's: host %q, database %q, search_path %q", a.Host, a.Database, a.RuntimeParams["search_path"])
	}
}

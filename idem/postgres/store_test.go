package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	reachOnce sync.Once
	reachErr  error
)

// serverURL returns the PostgreSQL URL, or skips t (fails it, with
// WARY_REQUIRE_SERVICES=1) when the server cannot be reached.
func serverURL(t testing.TB) string {
	t.Helper()
	url, set := os.LookupEnv("WARY_POSTGRES_URL")
	if !set {
		url = defaultURL
	}
	reachOnce.Do(func() { reachErr = ping(url) })
	if reachErr != nil {
		if set || os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("PostgreSQL at WARY_POSTGRES_URL unreachable: %v", reachErr)
		}
		t.Skipf("PostgreSQL unreachable at %s (set WARY_POSTGRES_URL, or WARY_REQUIRE_SERVICES=1 to fail): %v", defaultURL, reachErr)
	}
	return url
}

// newPool returns a pool whose search_path is a fresh schema, dropped when
// t ends, so that parallel test packages do not collide.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return newPoolParams(t, nil)
}

// newPoolParams is newPool with extra run-time parameters for its sessions.
func newPoolParams(t testing.TB, params map[string]string) *pgxpool.Pool {
	t.Helper()
	return newPoolConfig(t, func(cfg *pgxpool.Config) {
		for k, v := range params {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	})
}

// newPoolConfig is newPool with its configuration passed to set first.
func newPoolConfig(t testing.TB, set func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	url := serverURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemtest_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	set(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		admin.Close(ctx)
	})
	return pool
}

type testDB struct{ pool *pgxpool.Pool }

func (d testDB) Open(ctx context.Context, prefix string) (idem.Store[pgx.Tx], error) {
	return postgres.New(ctx, d.pool, &postgres.Options{Prefix: prefix})
}

func (testDB) Exec(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
	_, err := tx.Exec(ctx, q, args...)
	return err
}

func (testDB) QueryRow(ctx context.Context, tx pgx.Tx, q string, args ...any) interface{ Scan(...any) error } {
	return tx.QueryRow(ctx, q, args...)
}

// ClaimAll implements idemtest.ClaimAllDB: one INSERT over the IDs as a
// text array, the cheapest form of a claim that answers per ID.
func (testDB) ClaimAll(ctx context.Context, tx pgx.Tx, table, consumer string, ids []string, at time.Time) (int, error) {
	rows, err := tx.Query(ctx, claimAllSQL(table), consumer, ids, at)
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// claimAllSQL is ClaimAll's statement on table: $1 the consumer, $2 the
// IDs, $3 the time.
func claimAllSQL(table string) string {
	return `INSERT INTO ` + pgx.Identifier{table}.Sanitize() + ` (consumer, message_id, processed_at)
		SELECT $1, id, $3 FROM unnest($2::text[]) AS ids(id)
		ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`
}

// WithSource implements idemtest.SourceDB.
func (testDB) WithSource(p idem.Store[pgx.Tx], s idemtest.Source) (idem.Store[pgx.Tx], error) {
	return p.(*postgres.Store).WithSource(postgres.SourceOptions{Pipeline: s.Pipeline, PerAggregate: s.PerAggregate, Stream: s.Stream})
}

func newDB(t testing.TB) idemtest.DB[pgx.Tx] { return testDB{newPool(t)} }

func TestStore(t *testing.T) {
	idemtest.Run(t, newDB)
}

func TestSchemaOption(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "idem_schema_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema, Prefix: "x_"})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'x\_%'`, schema).Scan(&n); err != nil || n != 13 {
		t.Errorf("tables in %s: %d, %v; want 13 (the inbox and its previous table; the outbox, its previous table and its rotation time; the early events; the outbox stream's slots)", schema, n, err)
	}
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idemtest.D(st).Rollback(ctx, tx)
	if ok, err := claimOne(ctx, st, tx, "c", "m", time.Now()); !ok || err != nil {
		t.Errorf("claim: %v %v", ok, err)
	}
	if _, err := postgres.New(ctx, pool, &postgres.Options{Schema: `bad"schema`}); !errors.Is(err, idem.ErrInvalidName) {
		t.Errorf("bad schema: %v", err)
	}
}

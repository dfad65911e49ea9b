package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/sqlite"
)

// busyTimeout is the database's in SQLite: the kit runs one transaction at
// a time, so a wait for the write lock is a write outside the handler's
// transaction.
const busyTimeout = 50 * time.Millisecond

var busyPragma = regexp.MustCompile(`busy_timeout\(\d+\)`)

// SQLite returns a fresh SQLite store for t, in a database file in
// t.TempDir() with the store's tables, closed when t ends: the
// zero-configuration store of a Kit (New(t, SQLite(t), nil)). Create the
// test's own tables through its DB. Its busy timeout is short, so that a
// handler that writes through the *sql.DB instead of its tx fails at once
// (see the package doc). SQLite fails t (FailNow) if the database cannot
// be set up.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	dsn := sqlite.DSN(filepath.Join(t.TempDir(), "testkit.db"))
	if !busyPragma.MatchString(dsn) {
		t.Fatalf("testkit: sqlite.DSN sets no busy_timeout to shorten: %s", dsn)
	}
	dsn = busyPragma.ReplaceAllString(dsn, fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatalf("testkit: open the database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlite.New(t.Context(), db, nil)
	if err != nil {
		t.Fatalf("testkit: migrate the database: %v", err)
	}
	return st
}

// Postgres returns a PostgreSQL store for t in a fresh schema of the
// database at url (a test database: "postgres://…/test"), with the store's
// tables; the pool's search_path is that schema, so the test's own tables,
// created through its Pool, go there too. The schema is dropped and the
// pool closed when t ends, so that tests running at the same time, or
// after a failed run, never meet each other's rows. Postgres fails t
// (FailNow) if the database cannot be reached or set up: a test that skips
// when it has no database checks first.
func Postgres(t testing.TB, url string) *postgres.Store {
	t.Helper()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := pgx.Identifier{"testkit_" + hex.EncodeToString(b[:])}.Sanitize()
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		t.Fatalf("testkit: create a schema: %v", err)
	}
	t.Cleanup(func() {
		defer pool.Close()
		// t's context is canceled by now: the cleanup's own, bounded.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("testkit: drop the test's schema %s: %v", schema, err)
		}
	})
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatalf("testkit: migrate the database: %v", err)
	}
	return st
}

// MySQL returns a MySQL or MariaDB store for t in a fresh database on the
// server of dsn (go-sql-driver/mysql's format: "root@tcp(127.0.0.1:3306)/test";
// its database is left alone), with the store's tables; the store's DB
// is on that database, so the test's own tables, created through it, go
// there too. The database is dropped and the store closed when t ends.
// MySQL fails t (FailNow) if the server cannot be reached or set up: a
// test that skips when it has no server checks first.
func MySQL(t testing.TB, dsn string) *mysql.Store {
	t.Helper()
	ctx := t.Context()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "testkit_" + hex.EncodeToString(b[:])
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("testkit: create a database: %v", err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("testkit: drop the test's database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	st, err := mysql.Open(ctx, cfg.FormatDSN(), nil)
	if err != nil {
		t.Fatalf("testkit: migrate the database: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// queryFunc runs a query on the kit's database and returns its rows, each
// column as text ("NULL" for a null).
type queryFunc func(ctx context.Context, q string, args ...any) ([][]string, error)

// queryOf returns the query function of st's database: the *sql.DB of an
// SQLite or MySQL store, the pool of a PostgreSQL store.
func queryOf(st any) (queryFunc, error) {
	switch st := st.(type) {
	case interface{ DB() *sql.DB }:
		if _, ok := st.DB().Driver().(*stdlib.Driver); ok { // *postgres.SQLStore
			return pgSQLQuery(st.DB()), nil
		}
		return sqlQuery(st.DB()), nil
	case interface{ Pool() *pgxpool.Pool }:
		return pgQuery(st.Pool()), nil
	}
	return nil, fmt.Errorf("a store of type %T: the kit reads the database of an *sqlite.Store, a *mysql.Store, a *postgres.Store or a *postgres.SQLStore", st)
}

// pgSQLQuery is pgQuery on a connection of db, a *sql.DB of pgx's stdlib
// driver, so that the kit shows PostgreSQL's values alike through either
// handle.
func pgSQLQuery(db *sql.DB) queryFunc {
	return func(ctx context.Context, q string, args ...any) ([][]string, error) {
		c, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		var out [][]string
		err = c.Raw(func(dc any) error {
			out, err = pgQuery(dc.(*stdlib.Conn).Conn())(ctx, q, args...)
			return err
		})
		return out, err
	}
}

func sqlQuery(db *sql.DB) queryFunc {
	return func(ctx context.Context, q string, args ...any) ([][]string, error) {
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		if len(cols) == 0 {
			return nil, fmt.Errorf("the query returns no column")
		}
		var out [][]string
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			row := make([]string, len(cols))
			for i, v := range vals {
				switch v := v.(type) {
				case nil:
					row[i] = "NULL"
				case []byte:
					row[i] = string(v)
				default:
					row[i] = fmt.Sprint(v)
				}
			}
			out = append(out, row)
		}
		return out, rows.Err()
	}
}

// pgQuery reads every column in PostgreSQL's text format, as psql shows
// it.
func pgQuery(on interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) queryFunc {
	return func(ctx context.Context, q string, args ...any) ([][]string, error) {
		rows, err := on.Query(ctx, q, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		if len(rows.FieldDescriptions()) == 0 {
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("the query returns no column")
		}
		var out [][]string
		for rows.Next() {
			raw := rows.RawValues()
			row := make([]string, len(raw))
			for i, v := range raw {
				if v == nil {
					row[i] = "NULL"
				} else {
					row[i] = string(v)
				}
			}
			out = append(out, row)
		}
		return out, rows.Err()
	}
}

package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/internal/mysqltest"
)

// newDatabase creates a fresh database for t, dropped when t ends, and
// returns a DSN on it with interpolateParams (as Open sets it) and the
// test's session settings: PIPES_AS_CONCAT for the suite's "||".
func newDatabase(t testing.TB, params map[string]string) string {
	t.Helper()
	dsn := mysqltest.Server(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idemtest_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1) // the session's lock_wait_timeout below
	t.Cleanup(func() {
		// A failed test may leave a transaction open (a relay's held
		// claim): the DROP waits for its metadata lock at most 10 s.
		_, _ = admin.Exec("SET SESSION lock_wait_timeout = 10")
		_, _ = admin.Exec("DROP DATABASE " + name)
		admin.Close()
	})
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = "'STRICT_TRANS_TABLES,PIPES_AS_CONCAT,NO_ENGINE_SUBSTITUTION'"
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// openDB opens a fresh database for t.
func openDB(t testing.TB, params map[string]string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", newDatabase(t, params))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}

// testDB is a test's database (db). Its stores are opened with Open on
// dsn, with their transaction pools, or, where dsn is empty, with New on
// db; portable forces the statements' portable forms (MySQL's). bare is
// the options the benchmarks' bare transactions begin with on db.
type testDB struct {
	t        testing.TB
	db       *sql.DB
	dsn      string
	portable bool
	bare     *sql.TxOptions
}

// newTestDB opens dsn for t, its stores opened with Open on dsn.
func newTestDB(t testing.TB, dsn string) testDB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return testDB{t: t, db: db, dsn: dsn, bare: bareOptions(t, db)}
}

// bareOptions are the options of a bare transaction on db at READ
// COMMITTED, as a program on database/sql writes it: none if db's
// connections are READ COMMITTED already (MariaDB's variable).
func bareOptions(t testing.TB, db *sql.DB) *sql.TxOptions {
	var level string
	if err := db.QueryRow("SELECT @@SESSION.tx_isolation").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level == "READ-COMMITTED" {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

func (d testDB) Open(ctx context.Context, prefix string) (idem.Store[*sql.Tx], error) {
	o := &mysql.Options{Prefix: prefix, Logger: quiet}
	if d.portable {
		mysql.ForcePortable(o)
	}
	if d.dsn == "" {
		return mysql.New(ctx, d.db, o)
	}
	s, err := mysql.Open(ctx, d.dsn, o)
	if err != nil {
		return nil, err
	}
	d.t.Cleanup(func() { s.Close() })
	return s, nil
}

// BeginBare implements idemtest.BareDB: the benchmarks' bare
// transactions begin on db, as a program on database/sql begins its own,
// not on a store's transaction pool.
func (d testDB) BeginBare(ctx context.Context) (*sql.Tx, error) {
	return d.db.BeginTx(ctx, d.bare)
}

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	// The suite's domain tables: a TEXT key needs a length in MySQL, and
	// IDs compare byte for byte.
	textKey = strings.NewReplacer("TEXT PRIMARY KEY", "VARCHAR(255) COLLATE utf8mb4_bin PRIMARY KEY", "TIMESTAMPTZ", "DATETIME(6)", " AS TEXT)", " AS BINARY)",
		// The benchmarks' hand-written inbox: its key columns, and its
		// claim in MySQL's words (the benchmark sends no duplicate).
		"consumer TEXT NOT NULL, message_id TEXT NOT NULL", "consumer VARBINARY(255) NOT NULL, message_id VARBINARY(1024) NOT NULL",
		"ON CONFLICT (consumer, message_id) DO NOTHING RETURNING 1", "ON DUPLICATE KEY UPDATE consumer = consumer RETURNING 1")
)

// positional rewrites the suite's $N placeholders to ?, with the
// arguments in their order.
func positional(q string, args []any) (string, []any) {
	var out []any
	q = placeholder.ReplaceAllStringFunc(q, func(p string) string {
		var n int
		for _, c := range p[1:] {
			n = n*10 + int(c-'0')
		}
		out = append(out, args[n-1])
		return "?"
	})
	return textKey.Replace(q), out
}

func (d testDB) Exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	q, args = positional(q, args)
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

func (d testDB) QueryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) interface{ Scan(...any) error } {
	q, args = positional(q, args)
	return tx.QueryRowContext(ctx, q, args...)
}

// ClaimAll implements idemtest.ClaimAllDB (the interleaved benchmark's
// ceiling100): one INSERT IGNORE over the IDs as a JSON array
// (JSON_TABLE), the statement the store claims a shared transaction's
// IDs with.
func (d testDB) ClaimAll(ctx context.Context, tx *sql.Tx, table, consumer string, ids []string, at time.Time) (int, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO `+table+` (consumer, message_id, processed_at)
		SELECT ?, j.id, ? FROM JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(1024) PATH '$')) j`, consumer, at, string(list))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// WithSource implements idemtest.SourceDB.
func (testDB) WithSource(p idem.Store[*sql.Tx], s idemtest.Source) (idem.Store[*sql.Tx], error) {
	return p.(*mysql.Store).WithSource(mysql.SourceOptions{PerAggregate: s.PerAggregate})
}

// newDB opens a fresh database for t, its stores opened with Open.
func newDB(t testing.TB) idemtest.DB[*sql.Tx] { return newTestDB(t, newDatabase(t, nil)) }

// newDBOfNew opens a fresh database for t, its stores opened with New
// on the test's *sql.DB (no transaction pool).
func newDBOfNew(t testing.TB) idemtest.DB[*sql.Tx] { return testDB{t: t, db: openDB(t, nil)} }

func TestStore(t *testing.T) {
	idemtest.Run(t, newDB)
}

// TestStoreOfNew is the suite on stores of New, which begin their
// transactions on the program's database.
func TestStoreOfNew(t *testing.T) {
	idemtest.Run(t, newDBOfNew)
}

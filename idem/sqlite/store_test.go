package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/sqlite"
)

type testDB struct {
	db *sql.DB
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

func (d testDB) Open(ctx context.Context, prefix string) (idem.Store[*sql.Tx], error) {
	return sqlite.New(ctx, d.db, &sqlite.Options{Prefix: prefix})
}

func (d testDB) Exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := tx.ExecContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
	return err
}

func (d testDB) QueryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) interface{ Scan(...any) error } {
	return tx.QueryRowContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
}

// ClaimAll implements idemtest.ClaimAllDB: one INSERT over the IDs as a
// JSON array (json_each), as the store claims a shared transaction's IDs.
// The WHERE keeps SQLite's parser from reading ON CONFLICT as a join's ON.
func (d testDB) ClaimAll(ctx context.Context, tx *sql.Tx, table, consumer string, ids []string, at time.Time) (int, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, `INSERT INTO `+table+` (consumer, message_id, processed_at)
		SELECT ?1, value, ?3 FROM json_each(?2) WHERE true
		ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`, consumer, string(list), at)
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

// WithSource implements idemtest.SourceDB.
func (testDB) WithSource(p idem.Store[*sql.Tx], s idemtest.Source) (idem.Store[*sql.Tx], error) {
	return p.(*sqlite.Store).WithSource(sqlite.SourceOptions{Lease: s.Lease, PerAggregate: s.PerAggregate})
}

// newDB opens a fresh database file for t.
func newDB(t testing.TB) idemtest.DB[*sql.Tx] {
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "test.db"))+"&_pragma=synchronous(NORMAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return testDB{db}
}

func TestStore(t *testing.T) {
	idemtest.Run(t, newDB)
}

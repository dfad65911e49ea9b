package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/sqlite"
)

// FuzzIdentifiers: the name validators never panic, and every name they
// accept, quoted as the stores quote it, is one identifier to SQLite that
// comes back unchanged (it cannot end the quotes and add SQL).
func FuzzIdentifiers(f *testing.F) {
	for _, s := range []string{"wary_", "orders", "app.orders", "a.b.c", `a"b`, "a'b", "x; DROP TABLE t; --", "a\x00b", "é", "",
		strings.Repeat("n", 64), `"`, `""`, "a.", ".a", "a b", "A-b.c:d", "\xff", "sp_1"} {
		f.Add(s)
	}
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(f.TempDir(), "fuzz.db")))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	roundTrip := func(t *testing.T, what, name string) {
		t.Helper()
		rows, err := db.Query("SELECT 1 AS " + names.QuoteIdentifier(name))
		if err != nil {
			t.Fatalf("%s %q accepted, but its quoted form fails: %v", what, name, err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil || len(cols) != 1 || cols[0] != name {
			t.Fatalf("%s %q accepted, but quoted it reads as %q (%v)", what, name, cols, err)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		if names.ValidateIdentifier("name", s) == nil {
			roundTrip(t, "identifier", s)
		}
		if names.ValidateConsumer(s) == nil {
			roundTrip(t, "consumer", s)
		}
		if names.ValidatePrefix(s) == nil {
			roundTrip(t, "prefix", s+"parked_aggregate_idx")
		}
		if parts, err := names.ValidateTableName(s); err == nil {
			if strings.Join(parts, ".") != s || len(parts) > 2 {
				t.Fatalf("table name %q split into %q", s, parts)
			}
			for _, p := range parts {
				roundTrip(t, "table name part", p)
			}
		}
		_ = names.ValidateKey(s)
		_ = names.ValidateProvider(s)
	})
}

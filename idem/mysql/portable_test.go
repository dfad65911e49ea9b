package mysql_test

import (
	"database/sql"

	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/mysql"
)

// The store's suites again with the statements' portable forms forced:
// what MySQL 8 runs (no INSERT ... RETURNING or DELETE ... RETURNING),
// here on MariaDB, which runs both forms. MySQL 8 itself is not run.

// newPortableDB opens a fresh database for t whose stores use the
// portable forms.
func newPortableDB(t testing.TB) idemtest.DB[*sql.Tx] {
	d := newTestDB(t, newDatabase(t, nil))
	d.portable = true
	return d
}

func TestPortableStore(t *testing.T) {
	idemtest.Run(t, newPortableDB)
}

func TestPortableStoreWithMemoryBroker(t *testing.T) {
	idemtest.RunBroker(t, newPortableDB, memoryBroker)
}

func TestPortableOutbox(t *testing.T) {
	idemtest.RunOutbox(t, newPortableDB, outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true, Polls: true})
}

// TestPortableChosen: the forms follow the server's version, and the
// option forces the portable ones.
func TestPortableChosen(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"10.11.6-MariaDB-0+deb12u1", true},
		{"10.6.0-MariaDB", true},
		{"11.4.2-MariaDB-ubu2404", true},
		{"5.5.5-10.11.6-MariaDB", true},
		{"10.5.23-MariaDB", false},
		{"10.4.1-MariaDB-log", false},
		{"8.0.36", false},
		{"8.4.0-commercial", false},
		{"9.1.0", false},
		{"", false},
		{"MariaDB", false},
	} {
		if got := mysql.HasReturning(c.version); got != c.want {
			t.Errorf("HasReturning(%q) = %v, want %v", c.version, got, c.want)
		}
	}
	db := openDB(t, nil)
	var version string
	if err := db.QueryRowContext(t.Context(), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	s, err := mysql.New(t.Context(), db, &mysql.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mysql.Portable(s), !mysql.HasReturning(version); got != want {
		t.Errorf("server %s: portable forms %v, want %v", version, got, want)
	}
	o := &mysql.Options{Logger: quiet}
	mysql.ForcePortable(o)
	if s, err = mysql.New(t.Context(), db, o); err != nil {
		t.Fatal(err)
	}
	if !mysql.Portable(s) {
		t.Errorf("forced: RETURNING forms")
	}
}

// BenchmarkInboxPortable is BenchmarkInbox with the portable forms forced:
// its batch100 is the group claim behind a savepoint (two statements, no
// RETURNING) where BenchmarkInbox's is one statement with RETURNING.
func BenchmarkInboxPortable(b *testing.B) { idemtest.Bench(b, newPortableDB) }

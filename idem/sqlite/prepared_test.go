package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/sqlite"
)

// TestClaimPreparedAfterMigrate: a store made with SkipMigrate on an
// empty database (nothing to prepare the claim on) claims once Migrate
// has made the tables, new IDs and duplicates alike, one ID or several;
// closing a store whose database it does not own releases its prepared
// claims and leaves the database to a second store.
func TestClaimPreparedAfterMigrate(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "p.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	claim := func(st *sqlite.Store, ids ...string) []seam.Claimed {
		t.Helper()
		tx, began, got, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids, At: time.Now()})
		if err != nil || !began {
			t.Fatalf("BeginClaim %v: began %v, %v", ids, began, err)
		}
		if err := idemtest.D(st).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		return got
	}
	st, err := sqlite.New(ctx, db, &sqlite.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := claim(st, "m1"); !got[0].New {
		t.Errorf("m1: %+v, want new", got)
	}
	if got := claim(st, "m1"); got[0].New {
		t.Errorf("m1 again: %+v, want a duplicate", got)
	}
	if got := claim(st, "m1", "m2"); got[0].New || !got[1].New {
		t.Errorf("m1, m2: %+v, want m2 only", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := claim(other, "m2", "m3"); got[0].New || !got[1].New {
		t.Errorf("m2, m3 on a second store: %+v, want m3 only", got)
	}
}

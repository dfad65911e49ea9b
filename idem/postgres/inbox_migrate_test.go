package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/postgres"
)

// The claims of earlier binaries, as they send them: before migration 009
// (a plain INSERT sent with BEGIN; ON CONFLICT for batches and held
// checks) and from 009 to 013 (the claim function, strict with BEGIN).
const (
	claimPre009      = `INSERT INTO wary_inbox (consumer, message_id, processed_at) VALUES ($1, $2, $3)`
	claimManyPre009  = `INSERT INTO wary_inbox (consumer, message_id, processed_at) SELECT $1, id, $3 FROM unnest($2::text[]) AS ids(id) ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`
	claimStrict009   = `SELECT FROM wary_inbox_claim($1, ARRAY[$2::text], $3, true)`
	claimMany009     = `SELECT id FROM wary_inbox_claim($1, $2::text[], $3, false) AS id`
	violatesUnique   = "23505"
	violatesCheck    = "23514"
	failsToSerialize = "40001"
)

// pgCode returns err's SQLSTATE ("" for none).
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// claimMany runs an earlier binary's batch claim of ids on pool and
// returns the IDs it claimed.
func claimMany(t *testing.T, pool *pgxpool.Pool, q string, ids ...string) ([]string, error) {
	t.Helper()
	rows, err := pool.Query(t.Context(), q, "c", ids, t0)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	slices.Sort(got)
	return got, err
}

// TestOldBinariesBesideDefaultInbox: the claims of binaries before 009 and
// of 009 to 013 work on the plain inbox of 014, and agree with this
// version's on which messages are duplicates.
func TestOldBinariesBesideDefaultInbox(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !claimAt(t, st, "c", "m", t0) {
		t.Fatal("m not claimed")
	}
	if _, err := pool.Exec(ctx, claimPre009, "c", "m", t0); pgCode(err) != violatesUnique {
		t.Errorf("pre-009 claim of a claimed message: %v; want a unique violation", err)
	}
	if _, err := pool.Exec(ctx, claimPre009, "c", "a", t0); err != nil {
		t.Errorf("pre-009 claim of a new message: %v", err)
	}
	if got, err := claimMany(t, pool, claimManyPre009, "m", "a", "b"); err != nil || fmt.Sprint(got) != "[b]" {
		t.Errorf("pre-009 batch claim of m, a, b: %v, %v; want b", got, err)
	}
	if _, err := pool.Exec(ctx, claimStrict009, "c", "m", t0); pgCode(err) != violatesUnique {
		t.Errorf("009 strict claim of a claimed message: %v; want a unique violation", err)
	}
	if got, err := claimMany(t, pool, claimMany009, "m", "b", "k"); err != nil || fmt.Sprint(got) != "[k]" {
		t.Errorf("009 claim of m, b, k: %v, %v; want k", got, err)
	}
	for _, id := range []string{"a", "b", "k"} {
		if claimAt(t, st, "c", id, t0) {
			t.Errorf("%s, claimed by an earlier binary, claimed again", id)
		}
	}
}

// TestOldBinariesBesideSlicedInbox: on a sliced inbox, a binary before 009
// (whose claim would not look in the previous table) fails with an error
// naming migration 014, whether the message is new or not; the claim
// function of 009 to 013 looks in both tables, and under SERIALIZABLE
// fails as a serialization failure when its snapshot predates a rotation.
// No message is claimed twice.
func TestOldBinariesBesideSlicedInbox(t *testing.T) {
	const w = time.Minute
	pool, st := slicedStore(t, w)
	ctx := t.Context()
	if !claimAt(t, st, "c", "old", t0) {
		t.Fatal("old not claimed")
	}
	expire(t, st, "c", t0, w) // old goes to the previous table
	if !claimAt(t, st, "c", "hot", t0) {
		t.Fatal("hot not claimed")
	}
	for _, id := range []string{"old", "hot", "new"} {
		_, err := pool.Exec(ctx, claimPre009, "c", id, t0)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || id != "hot" && (pe.Code != violatesCheck || !strings.Contains(pe.Error(), "migration_014")) {
			t.Errorf("pre-009 claim of %s: %v; want the check naming migration 014", id, err)
		}
	}
	if _, err := claimMany(t, pool, claimManyPre009, "old", "new"); pgCode(err) != violatesCheck {
		t.Errorf("pre-009 batch claim: %v; want the check naming migration 014", err)
	}
	for _, id := range []string{"old", "hot"} {
		if _, err := pool.Exec(ctx, claimStrict009, "c", id, t0); pgCode(err) != violatesUnique {
			t.Errorf("009 strict claim of %s: %v; want a unique violation", id, err)
		}
	}
	if got, err := claimMany(t, pool, claimMany009, "old", "hot", "k"); err != nil || fmt.Sprint(got) != "[k]" {
		t.Errorf("009 claim of old, hot, k: %v, %v; want k", got, err)
	}
	if claimAt(t, st, "c", "new", t0) != true || claimAt(t, st, "c", "k", t0) {
		t.Error("the earlier binaries' claims left the wrong records")
	}

	// A 009 binary's transaction whose snapshot predates a rotation.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if !claimAt(t, st, "c", "late", t0.Add(w)) {
		t.Fatal("late not claimed")
	}
	expire(t, st, "c", t0.Add(w), w) // late goes to the previous table
	if _, err := tx.Exec(ctx, claimStrict009, "c", "late", t0.Add(w)); pgCode(err) != failsToSerialize {
		t.Errorf("009 claim under a snapshot older than the rotation: %v; want a serialization failure", err)
	}
}

// TestMigrateToPlainInbox: records under 009's partitioned inbox, in slice
// 0 and in a slice of their own, and records under the schema before 009,
// are all in the plain inbox after migration 014 and still deduplicate;
// the inbox then becomes sliced with its records, which deduplicate from
// the previous table after a rotation.
func TestMigrateToPlainInbox(t *testing.T) {
	for _, from := range []int{9, 14} {
		t.Run(fmt.Sprintf("before %03d", from), func(t *testing.T) {
			pool := newPool(t)
			ctx := t.Context()
			st, err := postgres.New(ctx, pool, &postgres.Options{SkipMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := postgres.MigrateBefore(ctx, st, from); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO wary_inbox (consumer, message_id, processed_at)
				SELECT 'c', 'old' || g, $1 FROM generate_series(1, 1000) AS g`, t0); err != nil {
				t.Fatal(err)
			}
			want := 1000
			if from == 14 { // a slice of 009 with its records, as its expiry created them
				var id int64
				if err := pool.QueryRow(ctx, "INSERT INTO wary_inbox_slices (consumer, lo, hi) VALUES ('c', $1, $2) RETURNING id",
					t0, t0.Add(time.Hour)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("wary_inbox_s%d", id)
				for _, q := range []string{
					fmt.Sprintf(`CREATE TABLE %s (consumer TEXT NOT NULL, message_id TEXT NOT NULL, processed_at TIMESTAMPTZ NOT NULL,
						slice BIGINT NOT NULL CHECK (slice = %d), PRIMARY KEY (consumer, message_id))`, name, id),
					fmt.Sprintf("ALTER TABLE wary_inbox ATTACH PARTITION %s FOR VALUES IN (%d)", name, id),
					fmt.Sprintf(`INSERT INTO wary_inbox (consumer, message_id, processed_at, slice)
						SELECT 'c', 'sliced' || g, '%s', %d FROM generate_series(1, 500) AS g`, t0.Format(time.RFC3339), id),
				} {
					if _, err := pool.Exec(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				want += 500
			}
			if err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var kind string
			var n int
			if err := pool.QueryRow(ctx, "SELECT relkind::text, (SELECT count(*) FROM wary_inbox) FROM pg_class WHERE oid = 'wary_inbox'::regclass").Scan(&kind, &n); err != nil || kind != "r" || n != want {
				t.Fatalf("wary_inbox after the migration: relkind %q, %d records, %v; want a plain table (r) with %d", kind, n, err, want)
			}
			var gone *string
			if err := pool.QueryRow(ctx, "SELECT to_regclass('wary_inbox_slices')::text").Scan(&gone); err != nil || gone != nil {
				t.Errorf("the slices catalog after the migration: %v, %v", gone, err)
			}
			dup := []string{"old1", "old1000"}
			if from == 14 {
				dup = append(dup, "sliced1", "sliced500")
			}
			for _, id := range dup {
				if claimAt(t, st, "c", id, t0) {
					t.Errorf("%s claimed again after the migration", id)
				}
			}
			if !claimAt(t, st, "c", "new", t0) {
				t.Error("a new message not claimed after the migration")
			}
			sliced, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			expire(t, sliced, "c", t0, time.Hour) // the records go to the previous table
			for _, id := range append(dup, "new") {
				if claimAt(t, sliced, "c", id, t0) {
					t.Errorf("%s claimed again in the sliced inbox", id)
				}
			}
		})
	}
}

package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/postgres"
)

// The outbox statements of earlier binaries, as they send them: the add
// of every version (the row insert; before the one-statement add, with
// the counter upsert before it) and the sliced purge of 010 to 014.
const (
	addPre015 = `INSERT INTO wary_outbox (message_id, aggregate_id, version, sequence, type, headers, payload, created_at, next_attempt)
		VALUES ($1, $2, 0, (SELECT last_sequence FROM wary_outbox_aggregates WHERE aggregate_id = $2), 't', '', 'x', $3, $3)`
	counterPre015 = `INSERT INTO wary_outbox_aggregates AS a (aggregate_id, last_sequence) VALUES ($1, 1)
		ON CONFLICT (aggregate_id) DO UPDATE SET last_sequence = a.last_sequence + 1`
	slicedPurge010 = `DELETE FROM wary_outbox WHERE slice = 0 AND id IN (SELECT id FROM wary_outbox
		WHERE slice = 0 AND state IN (1, 3) AND sent_at < $1 LIMIT $2)`
	undefinedColumn = "42703"
)

// TestOldBinariesBesideOutbox: on the default and on the sliced outbox
// of 015, the adds and claims of earlier binaries (whose SQL has no slice
// in it: a binary of 010 to 014 added and claimed through the partitioned
// parent with the same statements) work beside this version's: on the
// sliced outbox, a rotation moves every unsent row into the table they
// use, so no row is left where an older claim would not look, and each
// row is claimed once. The sliced purge of 010 to 014 fails (the slice
// column is gone) instead of deleting anything.
func TestOldBinariesBesideOutbox(t *testing.T) {
	for _, sliced := range []bool{false, true} {
		t.Run(fmt.Sprint("sliced=", sliced), func(t *testing.T) {
			pool := newPrivatePool(t)
			ctx := t.Context()
			var o postgres.Options
			if sliced {
				o.OutboxSlice = time.Minute
			}
			st, err := postgres.New(ctx, pool, &o)
			if err != nil {
				t.Fatal(err)
			}
			// An earlier binary: the two statements of its add, with its
			// own connection, and the claims of the shared SQL on a store
			// that does not migrate.
			old, err := postgres.New(ctx, pool, &postgres.Options{SkipMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			oldAdd := func(id, agg string, at time.Time) {
				t.Helper()
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, counterPre015, agg); err != nil {
					t.Fatalf("an earlier binary's counter: %v", err)
				}
				if _, err := tx.Exec(ctx, addPre015, id, agg, at); err != nil {
					t.Fatalf("an earlier binary's add: %v", err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			oldAdd("o1", "a", t0)
			addRows(t, st, t0, "a", "b")
			oldAdd("o2", "b", t0)
			var claimed []string
			take := func(s *postgres.Store, at time.Time, n int) {
				t.Helper()
				b, err := postgres.ClaimOutbox(ctx, s, sqlcore.Claim{Owner: "t", Now: at, Limit: n, PerAggregate: 1})
				if err != nil {
					t.Fatal(err)
				}
				var ids []int64
				for _, r := range b.Rows() {
					ids = append(ids, r.RowID)
					claimed = append(claimed, fmt.Sprintf("%s%d", r.AggregateID, r.Sequence))
				}
				if err := b.Complete(ctx, ids, nil, at); err != nil {
					t.Fatal(err)
				}
			}
			take(old, t0, 1) // a1, the earlier binary's row
			if sliced {
				// The rotation moves a2, b1 and b2 into the new current
				// table, where the earlier binary claims.
				rotate(t, st, t0, t0.Add(-time.Hour))
				if tb, _ := rowTable(t, pool, 1); tb != "wary_outbox_prev" {
					t.Fatalf("a1, sent, is in %q after the rotation; want the previous table", tb)
				}
			}
			take(old, t0, 10) // a2, b1
			oldAdd("o3", "a", t0)
			take(st, t0, 10) // a3, b2
			take(old, t0, 10)
			take(st, t0, 10)
			slices.Sort(claimed)
			if fmt.Sprint(claimed) != "[a1 a2 a3 b1 b2]" {
				t.Errorf("claimed %v; want a1 a2 a3 b1 b2, each once", claimed)
			}
			if _, err := pool.Exec(ctx, slicedPurge010, t0.Add(time.Hour), 1000); pgCode(err) != undefinedColumn {
				t.Errorf("the sliced purge of 010 to 014: %v; want it to fail on the slice column", err)
			}
		})
	}
}

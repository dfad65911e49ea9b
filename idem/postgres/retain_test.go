package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/idemtest"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/store"
)

// slicedDB opens stores that expire the inbox by whole slices.
type slicedDB struct {
	testDB
	slice time.Duration
}

func (d slicedDB) Open(ctx context.Context, prefix string) (store.Provider[pgx.Tx], error) {
	return postgres.New(ctx, d.pool, &postgres.Options{Prefix: prefix, InboxSlice: d.slice})
}

// TestSlicedStore: the whole suite on a store whose inbox expires by
// slices of an hour (the suite's retentions are an hour and more), each
// test on a database of its own.
func TestSlicedStore(t *testing.T) {
	idemtest.Run(t, func(t testing.TB) idemtest.DB[pgx.Tx] { return slicedDB{testDB{newPrivatePool(t)}, time.Hour} })
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// sliceOf returns the slice holding consumer's record of id (-1: none).
func sliceOf(t *testing.T, pool *pgxpool.Pool, consumer, id string) int64 {
	t.Helper()
	var s int64 = -1
	err := pool.QueryRow(t.Context(), "SELECT slice FROM wary_inbox WHERE consumer = $1 AND message_id = $2", consumer, id).Scan(&s)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return s
}

// claimAt claims id for consumer at at in its own transaction, committed,
// and reports whether it was new.
func claimAt(t *testing.T, st *postgres.Store, consumer, id string, at time.Time) bool {
	t.Helper()
	ctx := t.Context()
	tx, ok, err := beginClaim(ctx, st, consumer, id, at)
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	if ok {
		if err := st.Driver().Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	return ok
}

func expire(t *testing.T, st *postgres.Store, consumer string, now time.Time, retention time.Duration) int {
	t.Helper()
	n, err := postgres.Expire(t.Context(), st, consumer, now, retention)
	if err != nil {
		t.Fatalf("expire at %s: %v", now.Sub(t0), err)
	}
	return n
}

// TestSliceRotation: records go to the slice of their claim time, are
// deduplicated across slices (by each kind of claim) while inside the
// retention, and their slice is dropped, as a table, once its end is
// older than the retention.
func TestSliceRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, retention = time.Minute, 2 * time.Minute
	st, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	if n := expire(t, st, "c", t0, retention); n != 0 {
		t.Fatalf("first expiry: %d", n)
	}
	// Before its first slice begins, a consumer's claims go to slice 0.
	if !claimAt(t, st, "c", "early", t0.Add(30*time.Second)) || sliceOf(t, pool, "c", "early") != 0 {
		t.Errorf("early claim: slice %d, want 0", sliceOf(t, pool, "c", "early"))
	}
	at := t0.Add(90 * time.Second)
	if !claimAt(t, st, "c", "m1", at) {
		t.Fatal("m1 not claimed")
	}
	first := sliceOf(t, pool, "c", "m1")
	if first <= 0 {
		t.Fatalf("m1 in slice %d, want a slice of its own", first)
	}
	expire(t, st, "c", at, retention) // creates the slices ahead
	at = t0.Add(150 * time.Second)
	if !claimAt(t, st, "c", "m2", at) || sliceOf(t, pool, "c", "m2") == first {
		t.Fatalf("m2 in slice %d, want the next one after %d", sliceOf(t, pool, "c", "m2"), first)
	}
	// Duplicates of m1 and early, in other slices, by each claim path.
	if claimAt(t, st, "c", "m1", at) || claimAt(t, st, "c", "early", at) {
		t.Error("BeginClaim claimed a record of an earlier slice again")
	}
	tx, err := st.Driver().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Driver().Claim(ctx, tx, store.ClaimRequest{Consumer: "c", IDs: []string{"early", "m1", "m3"}, At: at})
	if err != nil || got[0].New || got[1].New || !got[2].New {
		t.Errorf("Claim of early, m1, m3: %+v, %v; want only m3", got, err)
	}
	held, err := st.Driver().Claim(ctx, tx, store.ClaimRequest{Consumer: "c", IDs: []string{"m1"}, Aggregates: []string{"a"}, At: at})
	if err != nil || held[0].New {
		t.Errorf("Claim with held check of m1: %+v, %v; want a duplicate", held, err)
	}
	if err := st.Driver().Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// The same message ID of another consumer is another record.
	if !claimAt(t, st, "d", "m1", at) {
		t.Error("consumer d could not claim m1")
	}
	name := fmt.Sprintf("wary_inbox_s%d", first)
	// m1 is 2m29s old at 3m59s, past the retention, but its slice ends
	// at 2m: it is kept until 4m.
	if n := expire(t, st, "c", t0.Add(3*time.Minute+59*time.Second), retention); n != 1 {
		t.Errorf("expiry before the slice's end is past the retention removed %d, want 1 (early, from slice 0)", n)
	}
	if claimAt(t, st, "c", "m1", t0.Add(3*time.Minute+59*time.Second)) {
		t.Error("m1 claimed again while its slice is kept")
	}
	if n := expire(t, st, "c", t0.Add(4*time.Minute), retention); n != 1 {
		t.Errorf("expiry of the first slice removed %d, want 1 (m1, with its slice)", n)
	}
	var reg *string
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1)::text", name).Scan(&reg); err != nil || reg != nil {
		t.Errorf("table %s after its expiry: %v, %v; want dropped", name, reg, err)
	}
	if c := sliceOf(t, pool, "c", "m2"); c <= first {
		t.Errorf("m2: slice %d after the first slice's expiry", c)
	}
	if sliceOf(t, pool, "d", "m1") != 0 {
		t.Error("another consumer's record in slice 0 was removed")
	}
	var catalog int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM wary_inbox_slices WHERE id = $1", first).Scan(&catalog); err != nil || catalog != 0 {
		t.Errorf("catalog rows of the dropped slice: %d, %v", catalog, err)
	}
}

// TestMigrateKeepsRecords: a store with records under the schema before
// migration 009 is migrated; the records are all there and still
// deduplicate, and they expire by rows as before.
func TestMigrateKeepsRecords(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, &postgres.Options{SkipMigrate: true, InboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.MigrateBefore(ctx, st, 9); err != nil {
		t.Fatal(err)
	}
	// Records as the earlier version's claims wrote them.
	if _, err := pool.Exec(ctx, `INSERT INTO wary_inbox (consumer, message_id, processed_at)
		SELECT 'c', 'old' || g, $1 FROM generate_series(1, 1000) AS g`, t0); err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM wary_inbox WHERE consumer = 'c' AND slice = 0").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("records after the migration: %d, %v; want 1000 in slice 0", n, err)
	}
	var kind string
	if err := pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = 'wary_inbox'::regclass").Scan(&kind); err != nil || kind != "p" {
		t.Errorf("wary_inbox: relkind %q, %v; want p (partitioned)", kind, err)
	}
	expire(t, st, "c", t0, time.Hour)
	for _, id := range []string{"old1", "old500", "old1000"} {
		if claimAt(t, st, "c", id, t0.Add(90*time.Second)) {
			t.Errorf("%s claimed again after the migration", id)
		}
	}
	if !claimAt(t, st, "c", "new", t0.Add(90*time.Second)) || sliceOf(t, pool, "c", "new") <= 0 {
		t.Error("a new record after the migration did not go to a slice")
	}
	if n := expire(t, st, "c", t0.Add(2*time.Hour), time.Hour); n != 1001 {
		t.Errorf("expiry of the migrated records: %d, want 1001 (1000 by row deletes in slice 0, new with its slice)", n)
	}
}

// TestClaimsDuringRotation: claimers race on the same message IDs while
// slices are created, retired, detached and dropped under them; every
// message inside the retention takes effect once.
func TestClaimsDuringRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, retention, rounds, ids, claimers = time.Minute, 2 * time.Minute, 12, 15, 4
	st, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (message_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		now := t0.Add(time.Duration(r) * w / 2)
		var wg sync.WaitGroup
		wg.Go(func() { // the expiry, while the claims run
			if _, err := postgres.Expire(ctx, st, "c", now, retention); err != nil {
				t.Errorf("expiry during the claims: %v", err)
			}
		})
		for c := range claimers {
			wg.Go(func() {
				var batch []string // this round's messages and the last round's again
				for i := range ids {
					batch = append(batch, fmt.Sprintf("r%d-%d", r, i), fmt.Sprintf("r%d-%d", max(r-1, 0), i))
				}
				rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
				for _, id := range batch {
					if err := claimEffect(ctx, st, id, now); err != nil {
						t.Errorf("claimer %d, %s: %v", c, id, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	rows, err := pool.Query(ctx, "SELECT message_id FROM effects GROUP BY 1 HAVING count(*) <> 1")
	if err != nil {
		t.Fatal(err)
	}
	twice, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var total int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT message_id) FROM effects").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if len(twice) > 0 || total != rounds*ids {
		t.Errorf("%d messages took effect, want %d; not exactly once: %v", total, rounds*ids, twice)
	}
	var first, live int
	if err := pool.QueryRow(ctx, "SELECT min(id), count(*) FROM wary_inbox_slices").Scan(&first, &live); err != nil {
		t.Fatal(err)
	}
	if first <= 2 {
		t.Errorf("the first slice left is %d: the first two were not dropped while the claims ran", first)
	}
	t.Logf("slices %d and later live (%d)", first, live)
}

// claimEffect claims id at at and, if new, records its effect in the same
// transaction.
func claimEffect(ctx context.Context, st *postgres.Store, id string, at time.Time) error {
	tx, began, c, err := st.Driver().BeginClaim(ctx, store.ClaimRequest{Consumer: "c", IDs: []string{id}, At: at})
	if err != nil || !began {
		return err
	}
	if c[0].New {
		if _, err := tx.Exec(ctx, "INSERT INTO effects (message_id) VALUES ($1)", id); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
	}
	return tx.Commit(ctx)
}

// TestRetentionDeadTuples: the same claims expired by rows and by slices.
// pg_stat_user_tables counts a deleted, dead tuple for each record the row
// deletes removed; dropping slices leaves none (nor does it delete any).
func TestRetentionDeadTuples(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, retention, steps, per = time.Minute, 2 * time.Minute, 8, 250
	sliced, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := postgres.New(ctx, pool, &postgres.Options{Prefix: "rows_"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*postgres.Store{sliced, rows} {
		removed := expire(t, st, "c", t0.Add(-w), retention)
		for k := range steps {
			now := t0.Add(time.Duration(k) * w / 2)
			removed += expire(t, st, "c", now, retention)
			ids := make([]string, per)
			for i := range ids {
				ids[i] = fmt.Sprintf("m%d-%03d", k, i)
			}
			tx, err := st.Driver().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Driver().Claim(ctx, tx, store.ClaimRequest{Consumer: "c", IDs: ids, At: now}); err != nil {
				t.Fatal(err)
			}
			if err := st.Driver().Commit(ctx, tx); err != nil {
				t.Fatal(err)
			}
		}
		for {
			n := expire(t, st, "c", t0.Add(time.Hour), retention)
			if removed += n; n == 0 {
				break
			}
		}
		if removed != steps*per {
			t.Fatalf("removed %d records, want %d", removed, steps*per)
		}
	}
	waitDeleted(t, pool, `^rows_inbox`, steps*per)
	rdel, rdead := tupleStats(t, pool, `^rows_inbox`)
	sdel, sdead := tupleStats(t, pool, `^wary_inbox_s[0-9]+$`)
	cdel, cdead := tupleStats(t, pool, `^wary_inbox_slices$`)
	t.Logf("by rows: %d deleted, %d dead; by slices: %d deleted, %d dead; slice catalog: %d deleted, %d dead", rdel, rdead, sdel, sdead, cdel, cdead)
	if sdel != 0 || sdead != 0 {
		t.Errorf("expiry by slices: %d tuples deleted and %d dead in the inbox, want none", sdel, sdead)
	}
	if cdead > 2*steps {
		t.Errorf("the slice catalog has %d dead tuples, want about one per slice", cdead)
	}
}

// TestDetachWaitsForOldTransactions: a transaction older than a slice's
// retirement holds its detach; the purge gives up after its wait, leaves
// the slice detaching, and a later purge, once that transaction ended,
// finishes the detach and drops it.
func TestDetachWaitsForOldTransactions(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, retention = time.Minute, 2 * time.Minute
	st, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	expire(t, st, "c", t0, retention)
	if !claimAt(t, st, "c", "m1", t0.Add(90*time.Second)) {
		t.Fatal("m1 not claimed")
	}
	slice := sliceOf(t, pool, "c", "m1")
	old, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(context.WithoutCancel(ctx))
	var n int
	if err := old.QueryRow(ctx, "SELECT count(*) FROM wary_inbox").Scan(&n); err != nil { // takes its snapshot
		t.Fatal(err)
	}
	if n, err := postgres.Expire(ctx, st, "c", t0.Add(5*time.Minute), retention); err == nil || n != 1 {
		t.Fatalf("expiry with an older transaction open: %d, %v; want 1 retired and the detach's lock timeout", n, err)
	}
	var pending bool
	if err := pool.QueryRow(ctx, "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass($1)",
		fmt.Sprintf("wary_inbox_s%d", slice)).Scan(&pending); err != nil || !pending {
		t.Fatalf("slice %d: detach pending %v, %v; want pending", slice, pending, err)
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := expire(t, st, "c", t0.Add(5*time.Minute), retention); n != 0 {
		t.Errorf("the second expiry counted %d records again", n)
	}
	var reg *string
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1)::text", fmt.Sprintf("wary_inbox_s%d", slice)).Scan(&reg); err != nil || reg != nil {
		t.Errorf("slice %d after the second expiry: %v, %v; want dropped", slice, reg, err)
	}
	if claimAt(t, st, "c", "m2", t0.Add(5*time.Minute)) != true {
		t.Error("claims failed after the finished detach")
	}
}

// tupleStats returns the deleted and dead tuples pg_stat_user_tables
// counts in the tables whose names match re.
func tupleStats(t *testing.T, pool *pgxpool.Pool, re string) (del, dead int64) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(n_tup_del), 0), coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables
		WHERE relname ~ $1`, re).Scan(&del, &dead)
	if err != nil {
		t.Fatal(err)
	}
	return del, dead
}

// waitDeleted waits until pg_stat_user_tables counts n deleted tuples in
// the tables whose names match re. The statistics reach it when each
// backend flushes them (within a second or so of its transaction).
func waitDeleted(t *testing.T, pool *pgxpool.Pool, re string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if del, _ := tupleStats(t, pool, re); del >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the row deletes never showed in pg_stat_user_tables")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newPrivatePool returns a pool on a database of its own, dropped when t
// ends. Detaching a slice waits for the transactions of its database that
// are older than the detach: on a database of its own, other tests' long
// transactions do not hold it.
func newPrivatePool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := serverURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("wary_retain_%x", rand.Uint64())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	return pool
}

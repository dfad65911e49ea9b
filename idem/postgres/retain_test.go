package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/postgres"
)

// slicedDB opens stores whose inbox expires by whole tables.
type slicedDB struct {
	testDB
	slice time.Duration
}

func (d slicedDB) Open(ctx context.Context, prefix string) (idem.Store[pgx.Tx], error) {
	return postgres.New(ctx, d.pool, &postgres.Options{Prefix: prefix, InboxSlice: d.slice})
}

// ExpiresByTables tells the suite that records go by rotation, kept
// between one and two InboxSlices, not by the row deletes whose counts
// its retention scenarios check (TestRotation checks these).
func (slicedDB) ExpiresByTables() bool { return true }

// TestSlicedStore: the whole suite on a sliced inbox (slices of 72 hours:
// the suite's retentions are up to 48 hours).
func TestSlicedStore(t *testing.T) {
	idemtest.Run(t, func(t testing.TB) idemtest.DB[pgx.Tx] { return slicedDB{testDB{newPool(t)}, 72 * time.Hour} })
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// slicedStore returns a pool on a schema of its own and a store on it
// with InboxSlice w.
func slicedStore(t *testing.T, w time.Duration) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool := newPool(t)
	st, err := postgres.New(t.Context(), pool, &postgres.Options{InboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	return pool, st
}

// claimAt claims id for consumer at at in its own transaction, committed,
// and reports whether it was new.
func claimAt(t *testing.T, st *postgres.Store, consumer, id string, at time.Time) bool {
	t.Helper()
	ctx := t.Context()
	tx, ok, c, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: consumer, IDs: []string{id}, At: at})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	if ok {
		if err := idemtest.D(st).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	return ok && c[0].New
}

func expire(t *testing.T, st *postgres.Store, consumer string, now time.Time, retention time.Duration) int {
	t.Helper()
	n, err := postgres.Expire(t.Context(), st, consumer, now, retention)
	if err != nil {
		t.Fatalf("expire at %s: %v", now.Sub(t0), err)
	}
	return n
}

// where returns the table holding consumer's record of id: "inbox",
// "prev" or "".
func where(t *testing.T, pool *pgxpool.Pool, consumer, id string) string {
	t.Helper()
	var in string
	err := pool.QueryRow(t.Context(), `SELECT 'inbox' FROM wary_inbox WHERE consumer = $1 AND message_id = $2
		UNION ALL SELECT 'prev' FROM wary_inbox_prev WHERE consumer = $1 AND message_id = $2`, consumer, id).Scan(&in)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return in
}

// TestRotation: a rotation moves the records to the previous table, where
// every kind of claim still finds them, and the next one, InboxSlice
// later, drops them; a retention longer than InboxSlice is refused.
func TestRotation(t *testing.T) {
	const w = time.Minute
	pool, st := slicedStore(t, w)
	ctx := t.Context()
	if !claimAt(t, st, "c", "m1", t0) || where(t, pool, "c", "m1") != "inbox" {
		t.Fatal("m1 not claimed in the current table")
	}
	if n := expire(t, st, "c", t0, w); n != 0 { // the first rotation: nothing to drop yet
		t.Fatalf("first rotation dropped %d", n)
	}
	if where(t, pool, "c", "m1") != "prev" {
		t.Fatalf("m1 in %q after a rotation, want prev", where(t, pool, "c", "m1"))
	}
	if n := expire(t, st, "c", t0.Add(w-time.Second), w); n != 0 || where(t, pool, "c", "m1") != "prev" {
		t.Fatalf("a rotation before InboxSlice passed: dropped %d", n)
	}
	at := t0.Add(30 * time.Second)
	if claimAt(t, st, "c", "m1", at) {
		t.Error("BeginClaim claimed a record of the previous table again")
	}
	if !claimAt(t, st, "c", "m2", at) {
		t.Fatal("m2 not claimed")
	}
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idemtest.D(st).Claim(ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m3", "m1", "m2"}, At: at})
	if err != nil || !got[0].New || got[1].New || got[2].New {
		t.Errorf("Claim of m3, m1, m2: %+v, %v; want only m3", got, err)
	}
	one, err := idemtest.D(st).Claim(ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m1"}, At: at})
	if err != nil || one[0].New {
		t.Errorf("Claim of m1: %+v, %v; want a duplicate", one, err)
	}
	held, err := idemtest.D(st).Claim(ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m1"}, Aggregates: []string{"a"}, At: at})
	if err != nil || held[0].New {
		t.Errorf("Claim with held check of m1: %+v, %v; want a duplicate", held, err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// Several IDs with BEGIN: m1 is in the previous table; then m2 in the
	// current one.
	for _, ids := range [][]string{{"m1", "m4", "m5"}, {"m2", "m6"}} {
		tx, began, got, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids, At: at})
		if err != nil || !began || got[0].New || !got[1].New || len(ids) > 2 && !got[2].New {
			t.Errorf("BeginClaim of %v: %v, %+v, %v; want all but %s", ids, began, got, err, ids[0])
		}
		if began {
			if err := idemtest.D(st).Commit(ctx, tx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !claimAt(t, st, "d", "m1", at) { // another consumer's record
		t.Error("consumer d could not claim m1")
	}
	if _, err := postgres.Expire(ctx, st, "c", t0.Add(2*w), 2*w); err == nil {
		t.Error("a retention longer than InboxSlice was accepted")
	}
	if n := expire(t, st, "c", t0.Add(w), w); n != 1 { // m1 dropped with the previous table
		t.Errorf("the second rotation dropped %d records, want 1", n)
	}
	if where(t, pool, "c", "m1") != "" || where(t, pool, "c", "m2") != "prev" {
		t.Errorf("after the second rotation: m1 in %q, m2 in %q; want gone, prev", where(t, pool, "c", "m1"), where(t, pool, "c", "m2"))
	}
	if !claimAt(t, st, "c", "m1", t0.Add(w)) {
		t.Error("m1 not claimable after its expiry")
	}
	tx, err = idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := idemtest.D(st).Unclaim(ctx, tx, "c", "m2"); err != nil || !ok {
		t.Errorf("Unclaim of m2 in the previous table: %v, %v", ok, err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if where(t, pool, "c", "m2") != "" {
		t.Error("Unclaim left m2")
	}
}

// TestSlicedLayoutRefused: a store without InboxSlice refuses an inbox
// that another one made sliced, since its claims would not look in the
// previous table.
func TestSlicedLayoutRefused(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	if _, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.New(ctx, pool, nil); err == nil {
		t.Error("a store without InboxSlice opened a sliced inbox")
	}
}

// TestClaimsRacingRotation: claimers race on the same message IDs, this
// round's and the last round's, while the inbox rotates under them every
// other round (the clock moves half an InboxSlice a round, so the last
// round's records are inside the retention); every message takes effect
// once, under READ COMMITTED and under SERIALIZABLE (where a claim whose
// snapshot predates the rotation fails as a serialization failure and is
// tried again).
func TestClaimsRacingRotation(t *testing.T) {
	for _, iso := range []string{"read committed", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			pool := newPoolParams(t, map[string]string{"default_transaction_isolation": iso})
			ctx := t.Context()
			const w, rounds, ids, claimers = time.Minute, 20, 20, 4
			st, err := postgres.New(ctx, pool, &postgres.Options{InboxSlice: w})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "CREATE TABLE effects (message_id TEXT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			var retried int
			var mu sync.Mutex
			for r := range rounds {
				now := t0.Add(time.Duration(r) * w / 2)
				var wg sync.WaitGroup
				start := make(chan struct{})
				wg.Go(func() { // the rotation, while the claims run
					<-start
					if _, err := postgres.Expire(ctx, st, "c", now, w); err != nil {
						t.Errorf("rotation during the claims: %v", err)
					}
				})
				for c := range claimers {
					wg.Go(func() {
						var batch []string
						for i := range ids {
							batch = append(batch, fmt.Sprintf("r%d-%d", r, i), fmt.Sprintf("r%d-%d", max(r-1, 0), i))
						}
						rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
						for k, id := range batch {
							if c == 0 && k == len(batch)/4 {
								close(start)
							}
							n, err := claimEffect(ctx, st, id, now)
							if err != nil {
								t.Errorf("claimer %d, %s: %v", c, id, err)
								return
							}
							mu.Lock()
							retried += n
							mu.Unlock()
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
			var last time.Time
			if err := pool.QueryRow(ctx, "SELECT processed_at FROM wary_inbox WHERE consumer = ''").Scan(&last); err != nil || !last.Equal(t0.Add((rounds-2)*w/2)) {
				t.Errorf("the current table's mark: %v, %v; want the last round's rotation", last, err)
			}
			t.Logf("%d claims tried again after a conflict", retried)
		})
	}
}

// claimEffect claims id at at and, if new, records its effect in the same
// transaction, trying again after a serialization failure or deadlock; it
// returns how many times it tried again.
func claimEffect(ctx context.Context, st *postgres.Store, id string, at time.Time) (int, error) {
	for tried := 0; ; tried++ {
		err := claimEffectOnce(ctx, st, id, at)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "40001" && pe.Code != "40P01" {
			return tried, err
		}
	}
}

func claimEffectOnce(ctx context.Context, st *postgres.Store, id string, at time.Time) error {
	tx, began, c, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: []string{id}, At: at})
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

// TestStaleSnapshotClaim: under REPEATABLE READ or SERIALIZABLE, a claim
// in a transaction whose snapshot predates a rotation fails as a conflict
// (the inbox tries it again) instead of missing the record the rotation
// moved to the previous table.
func TestStaleSnapshotClaim(t *testing.T) {
	pool, st := slicedStore(t, time.Minute)
	ctx := t.Context()
	expire(t, st, "c", t0, time.Minute)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	if !claimAt(t, st, "c", "m", t0) {
		t.Fatal("m not claimed")
	}
	expire(t, st, "c", t0.Add(time.Minute), time.Minute) // m goes to the previous table
	_, err = idemtest.D(st).Claim(ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m"}, At: t0})
	if c, ok := st.Driver().Impl().(interface{ Conflict(error) bool }); err == nil || !ok || !c.Conflict(err) {
		t.Errorf("a claim under a snapshot older than the rotation: %v; want a conflict", err)
	}
}

// newPrivatePool returns a pool on a database of its own, dropped when t
// ends. Detaching an outbox slice waits for the transactions of its database that
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

// TestRotationDropsAfterCommit: a rotation renames the previous table
// inbox_old under its lock and drops it after the commit; an inbox_old a
// crash left between the two goes before the next rotation. The records
// dropped are counted exactly in a table never analysed, and estimated
// from the statistics in one that was.
func TestRotationDropsAfterCommit(t *testing.T) {
	const w = time.Minute
	pool, st := slicedStore(t, w)
	ctx := t.Context()
	if n := expire(t, st, "c", t0, w); n != 0 {
		t.Fatalf("first rotation dropped %d", n)
	}
	// 3,000 records in the previous table, analysed.
	if _, err := pool.Exec(ctx, `INSERT INTO wary_inbox_prev (consumer, message_id, processed_at, v)
		SELECT 'c', 'p' || g, $1, 1 FROM generate_series(1, 3000) g`, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE wary_inbox_prev"); err != nil {
		t.Fatal(err)
	}
	// What a crash after a rotation's commit leaves.
	if _, err := pool.Exec(ctx, "CREATE TABLE wary_inbox_old (x int)"); err != nil {
		t.Fatal(err)
	}
	if !claimAt(t, st, "c", "m1", t0.Add(w/2)) {
		t.Fatal("m1 not claimed")
	}
	n := expire(t, st, "c", t0.Add(w), w)
	if n < 2700 || n > 3300 {
		t.Errorf("the rotation of an analysed table reported %d records dropped, want about 3000", n)
	}
	var tables []string
	rows, err := pool.Query(ctx, "SELECT relname::text FROM pg_class WHERE relname LIKE 'wary_inbox%' AND relkind = 'r' AND relnamespace = current_schema()::regnamespace ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tables, []string{"wary_inbox", "wary_inbox_prev"}) {
		t.Errorf("tables after the rotation: %v, want wary_inbox and wary_inbox_prev", tables)
	}
	if where(t, pool, "c", "p1") != "" || where(t, pool, "c", "m1") != "prev" {
		t.Error("the rotation did not drop the previous table's records, or lost m1")
	}
	// Never analysed: counted exactly.
	if n := expire(t, st, "c", t0.Add(2*w), w); n != 1 {
		t.Errorf("the rotation of a table never analysed reported %d records dropped, want 1 (m1)", n)
	}
}

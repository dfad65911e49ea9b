package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// slicedOutboxDB opens stores whose outbox expires by whole tables, a
// rotation due at every purge: the suite's relays run on fake clocks, and
// the previous table is dropped once every row in it was sent before the
// relay's KeepSent.
type slicedOutboxDB struct{ testDB }

func (d slicedOutboxDB) Open(ctx context.Context, prefix string) (idem.Store[pgx.Tx], error) {
	return postgres.New(ctx, d.pool, &postgres.Options{Prefix: prefix, OutboxSlice: time.Nanosecond})
}

// TestSlicedOutbox: the outbox suite on stores whose relays' purges
// rotate the outbox's tables (and drop the previous one past the
// retention).
func TestSlicedOutbox(t *testing.T) {
	idemtest.RunOutbox(t, func(t testing.TB) idemtest.DB[pgx.Tx] { return slicedOutboxDB{testDB{newPool(t)}} },
		outboxBroker, idemtest.OutboxCaps{ConcurrentWriters: true})
}

// addRows adds one row per aggregate in aggs (in that order), committed,
// to a store of prefix wary_, and returns their row IDs.
func addRows(t *testing.T, st *postgres.Store, at time.Time, aggs ...string) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range addAt(t, st, at, aggs) {
		var id int64
		if err := st.Pool().QueryRow(t.Context(), "SELECT id FROM wary_outbox WHERE message_id = $1", m).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// sendAll claims every due row at at and marks the rows of the aggregates
// in only (all if empty) sent at at; the others are released. It returns
// the rows sent, in the claims' order.
func sendAll(t *testing.T, st *postgres.Store, at time.Time, only ...string) []outbox.Row {
	t.Helper()
	ctx := t.Context()
	var sent []outbox.Row
	for {
		b, err := postgres.ClaimOutbox(ctx, st, sqlcore.Claim{Owner: "t", Now: at, Limit: 100, PerAggregate: 100})
		if err != nil {
			t.Fatal(err)
		}
		if b == nil || len(b.Rows()) == 0 {
			if b != nil {
				_ = b.Release(ctx)
			}
			return sent
		}
		var ids []int64
		for _, r := range b.Rows() {
			if len(only) == 0 || containsStr(only, r.AggregateID) {
				ids = append(ids, r.RowID)
				sent = append(sent, r)
			}
		}
		if len(ids) == 0 {
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return sent
		}
		if err := b.Complete(ctx, ids, nil, at); err != nil {
			t.Fatal(err)
		}
	}
}

// quarantine sets row id quarantined, as a relay does after its last
// failure.
func quarantine(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	if tag, err := pool.Exec(t.Context(), "UPDATE wary_outbox SET state = 2, attempts = 10 WHERE id = $1 AND state = 0", id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("quarantine row %d: %v, %v", id, tag, err)
	}
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func rotate(t testing.TB, st *postgres.Store, now, before time.Time) int {
	t.Helper()
	n, err := postgres.RotateOutbox(t.Context(), st, now, before)
	if err != nil {
		t.Fatalf("rotation at %s: %v", now.Sub(t0), err)
	}
	return n
}

// rowTable returns the table holding row id ("wary_outbox" or
// "wary_outbox_prev"; "" for none) and whether it is for the claims only.
func rowTable(t *testing.T, pool *pgxpool.Pool, id int64) (string, bool) {
	t.Helper()
	var table string
	var only bool
	err := pool.QueryRow(t.Context(), `SELECT 'wary_outbox', claims_only FROM wary_outbox WHERE id = $1
		UNION ALL SELECT 'wary_outbox_prev', claims_only FROM wary_outbox_prev WHERE id = $1`, id).Scan(&table, &only)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return table, only
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var reg *string
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1)::text", name).Scan(&reg); err != nil {
		t.Fatal(err)
	}
	return reg != nil
}

// TestOutboxSliceRotation: rows are added to the current table; a
// rotation makes it the previous one and moves its pending and
// quarantined rows, with their IDs, into a new current table, where they
// are claimed in their aggregate's order; the previous table is dropped
// by the next rotation once every row in it was sent before the
// retention, and not before; a discarded row in it can be requeued.
func TestOutboxSliceRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, keep = time.Minute, 2 * time.Minute
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	first := addRows(t, st, t0, "a", "a", "b", "b", "q", "d")
	if tb, _ := rowTable(t, pool, first[0]); tb != "wary_outbox" {
		t.Fatalf("the first row is in %q, want wary_outbox", tb)
	}
	at := t0.Add(30 * time.Second)
	if got := sendAll(t, st, at, "a"); len(got) != 2 {
		t.Fatalf("sent %d rows of a, want 2", len(got))
	}
	// b's first row sent, its second left pending; q quarantined; d
	// discarded.
	b, err := postgres.ClaimOutbox(ctx, st, sqlcore.Claim{Owner: "t", Now: at, Limit: 100, PerAggregate: 1})
	if err != nil {
		t.Fatal(err)
	}
	var bHead int64
	for _, r := range b.Rows() {
		if r.AggregateID == "b" {
			bHead = r.RowID
		}
	}
	if err := b.Complete(ctx, []int64{bHead}, nil, at); err != nil {
		t.Fatal(err)
	}
	quarantine(t, pool, first[4])
	if ok, err := idemtest.D(st).SetOutboxState(ctx, first[5], outbox.Discarded, at, outbox.Pending); !ok || err != nil {
		t.Fatalf("discard: %v, %v", ok, err)
	}
	// The first rotation (none before): the finished rows go to the
	// previous table, the unsent ones to the new current table.
	if n := rotate(t, st, at, at.Add(-keep)); n != 0 {
		t.Fatalf("the first rotation dropped %d rows, want 0 (the previous table was empty)", n)
	}
	for i, want := range []string{"wary_outbox_prev", "wary_outbox_prev", "wary_outbox_prev", "wary_outbox", "wary_outbox", "wary_outbox_prev"} {
		tb, only := rowTable(t, pool, first[i])
		if tb != want || only != (want == "wary_outbox") {
			t.Errorf("row %d: in %q, claims only %v; want %s", i, tb, only, want)
		}
	}
	second := addRows(t, st, at, "b", "c")
	if second[0] <= first[len(first)-1] {
		t.Errorf("a row added after the rotation has ID %d, not after %d", second[0], first[len(first)-1])
	}
	// Not OutboxSlice yet since the rotation: nothing happens.
	if n := rotate(t, st, at.Add(w/2), at.Add(-keep)); n != 0 {
		t.Fatalf("a rotation before OutboxSlice dropped %d rows", n)
	}
	if tb, _ := rowTable(t, pool, first[0]); tb != "wary_outbox_prev" {
		t.Fatalf("a sent row went to %q before the rotation was due", tb)
	}
	// Due, but the previous table holds rows sent inside the retention.
	if n := rotate(t, st, at.Add(w), at.Add(w-keep)); n != 0 {
		t.Fatalf("a rotation inside the retention dropped %d rows", n)
	}
	// The discarded row, in the previous table, is requeued.
	if ok, err := idemtest.D(st).SetOutboxState(ctx, first[5], outbox.Pending, at, outbox.Discarded); !ok || err != nil {
		t.Fatalf("requeue of a discarded row in the previous table: %v, %v", ok, err)
	}
	if tb, _ := rowTable(t, pool, first[5]); tb != "wary_outbox" {
		t.Fatalf("the requeued row is in %q, want wary_outbox", tb)
	}
	// Past the retention: the previous table (a, a, b's first) goes.
	late := at.Add(keep + time.Second)
	if n := rotate(t, st, late, late.Add(-keep)); n != 3 {
		t.Errorf("rotation past the retention dropped %d rows, want 3 (a, a, b's first)", n)
	}
	if tb, _ := rowTable(t, pool, first[0]); tb != "" {
		t.Errorf("a sent row past the retention is still in %q", tb)
	}
	if ok, err := idemtest.D(st).SetOutboxState(ctx, first[4], outbox.Pending, late, outbox.Quarantined); !ok || err != nil {
		t.Fatalf("requeue of the moved quarantined row: %v, %v", ok, err)
	}
	got := sendAll(t, st, late)
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("%s%d", r.AggregateID, r.Sequence))
	}
	if fmt.Sprint(order) != "[b2 b3 c1 d1 q1]" {
		t.Errorf("claims after the rotations: %v; want b2 b3 c1 d1 q1", order)
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM wary_outbox WHERE state IN (0, 2)").Scan(&left); err != nil || left != 0 {
		t.Errorf("unsent rows left: %d, %v", left, err)
	}
	all, err := idemtest.D(st).ListOutbox(ctx, outbox.Filter{})
	if err != nil || len(all) != 5 {
		t.Errorf("listed %d rows, %v; want the 5 sent since the retention, in both tables", len(all), err)
	}
}

// TestOutboxRetentionDeadTuples: the same rows, sent, expired by row
// deletes and by whole tables. pg_stat_user_tables counts a deleted
// tuple for each row the deletes removed; dropping tables deletes none.
func TestOutboxRetentionDeadTuples(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, keep, steps, per = time.Minute, 2 * time.Minute, 8, 250
	sliced, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := postgres.New(ctx, pool, &postgres.Options{Prefix: "rows_"})
	if err != nil {
		t.Fatal(err)
	}
	aggs := make([]string, per)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("a%d", i%50)
	}
	for _, st := range []*postgres.Store{sliced, rows} {
		removed := 0
		purge := func(now time.Time) {
			for {
				n, err := idemtest.D(st).PurgeOutbox(ctx, now.Add(-keep), 1000)
				if err != nil {
					t.Fatal(err)
				}
				if st == sliced {
					m := rotate(t, st, now, now.Add(-keep))
					n += m
				}
				if removed += n; n < 1000 {
					return
				}
			}
		}
		for k := range steps {
			now := t0.Add(time.Duration(k) * w / 2)
			purge(now)
			addAt(t, st, now, aggs)
			if got := len(sendAll(t, st, now)); got != per {
				t.Fatalf("sent %d rows, want %d", got, per)
			}
		}
		purge(t0.Add(time.Hour))     // the last slice stops being current
		purge(t0.Add(2 * time.Hour)) // and is past the retention
		if removed != steps*per {
			t.Fatalf("removed %d rows, want %d", removed, steps*per)
		}
	}
	waitDeleted(t, pool, `^rows_outbox`, steps*per)
	rdel, rdead := tupleStats(t, pool, `^rows_outbox$`)
	sdel, sdead := tupleStats(t, pool, `^wary_outbox(_prev)?$`)
	t.Logf("by rows: %d deleted, %d dead; by tables: %d deleted, %d dead (the dead ones: marked sent)", rdel, rdead, sdel, sdead)
	if sdel != 0 {
		t.Errorf("expiry by slices: %d tuples deleted in the outbox, want none", sdel)
	}
}

// addAt adds one row per aggregate in aggs at at, in one transaction,
// and returns their message IDs.
func addAt(t testing.TB, st *postgres.Store, at time.Time, aggs []string) []string {
	t.Helper()
	ctx := t.Context()
	tx, err := idemtest.D(st).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, len(aggs))
	ids := make([]string, len(aggs))
	for i, a := range aggs {
		ids[i] = fmt.Sprintf("%s-%d-%d", a, at.UnixNano(), i)
		msgs[i] = outbox.Message{ID: ids[i], AggregateID: a, Type: "t", Payload: []byte("x")}
	}
	if _, err := idemtest.D(st).AddOutbox(ctx, tx, msgs, at); err != nil {
		t.Fatal(err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// outboxRow is a row as the migration tests compare them.
type outboxRow struct {
	ID    int64
	State int
	Seq   int64
}

func outboxRows(t *testing.T, pool *pgxpool.Pool) []outboxRow {
	t.Helper()
	rs, err := pool.Query(t.Context(), "SELECT id, state, sequence FROM wary_outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowToStructByPos[outboxRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// publishes reports whether publication pub publishes the outbox table,
// and which columns ("" for all).
func publishes(t *testing.T, pool *pgxpool.Pool, pub string) (bool, string) {
	t.Helper()
	var ok bool
	var cols string
	err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
			WHERE p.pubname = $1 AND r.prrelid = 'wary_outbox'::regclass),
		coalesce((SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
			JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = ANY (r.prattrs)
			WHERE p.pubname = $1 AND r.prrelid = 'wary_outbox'::regclass), '')`, pub).Scan(&ok, &cols)
	if err != nil {
		t.Fatal(err)
	}
	return ok, cols
}

// storeBefore returns a pool on a database of its own and a store on it
// under the schema before migration v.
func storeBefore(t testing.TB, v int) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool := newPrivatePool(t)
	st, err := postgres.New(t.Context(), pool, &postgres.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.MigrateBefore(t.Context(), st, v); err != nil {
		t.Fatal(err)
	}
	return pool, st
}

// TestMigrateOutboxKeepsRows: an outbox with pending, quarantined and
// sent rows under the schema before migration 010 (and a publication on
// it) is migrated through 010 and 015: it is a plain table again, every
// row is there with its ID and state; new rows follow the old IDs; claims
// keep each aggregate's order; the publication publishes the table; sent
// rows expire by row deletes.
func TestMigrateOutboxKeepsRows(t *testing.T) {
	pool, st := storeBefore(t, 10)
	ctx := t.Context()
	old := addRows(t, st, t0, "p", "p", "q", "s", "s")
	if got := sendAll(t, st, t0, "s"); len(got) != 2 {
		t.Fatalf("sent %d rows of s before the migration, want 2", len(got))
	}
	quarantine(t, pool, old[2])
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION wary_pub FOR TABLE wary_outbox WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	before := outboxRows(t, pool)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkPlainOutbox(t, st, pool, before, old, "wary_pub", "")
}

// TestMigrateSlicedOutboxToPlain: an outbox under 010's layout, with rows
// in slice 0 (from before 010), in slice 1 and in a later slice, and the
// stream's publication on it with its column list, is migrated by 015:
// the rows of every slice are in the plain table with their IDs and
// states, and the publication publishes the table with the same columns.
func TestMigrateSlicedOutboxToPlain(t *testing.T) {
	pool, st := storeBefore(t, 10)
	ctx := t.Context()
	old := addRows(t, st, t0, "p", "q", "s") // slice 0
	if err := postgres.MigrateBefore(ctx, st, 15); err != nil {
		t.Fatal(err)
	}
	old = append(old, addRows(t, st, t0.Add(time.Millisecond), "p", "s")...) // slice 1
	if _, err := pool.Exec(ctx, "SELECT setval('wary_outbox_slice_seq', wary_outbox_slice_add())"); err != nil {
		t.Fatal(err)
	}
	old = append(old, addRows(t, st, t0.Add(2*time.Millisecond), "p", "q", "s")...) // slice 2
	var slices int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT slice) FROM wary_outbox").Scan(&slices); err != nil || slices != 3 {
		t.Fatalf("rows in %d slices, %v; want 3", slices, err)
	}
	if got := sendAll(t, st, t0, "s"); len(got) != 3 {
		t.Fatalf("sent %d rows of s before the migration, want 3", len(got))
	}
	quarantine(t, pool, old[1])
	if _, err := pool.Exec(ctx, `CREATE PUBLICATION wary_pub FOR TABLE wary_outbox (id, message_id, aggregate_id, version, sequence, type, headers, payload, created_at)
		WITH (publish = 'insert', publish_via_partition_root = true)`); err != nil {
		t.Fatal(err)
	}
	before := outboxRows(t, pool)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkPlainOutbox(t, st, pool, before, old, "wary_pub", "id,message_id,aggregate_id,version,sequence,type,headers,payload,created_at")
	for _, gone := range []string{"wary_outbox_s0", "wary_outbox_s1", "wary_outbox_s2", "wary_outbox_slices"} {
		if tableExists(t, pool, gone) {
			t.Errorf("%s is still there", gone)
		}
	}
}

// checkPlainOutbox checks a migrated outbox: a plain table holding the
// rows before (old their IDs, p and q aggregates pending, q's head
// quarantined, the s ones sent), published by pub with cols.
func checkPlainOutbox(t *testing.T, st *postgres.Store, pool *pgxpool.Pool, before []outboxRow, old []int64, pub, cols string) {
	t.Helper()
	ctx := t.Context()
	if after := outboxRows(t, pool); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows after the migration: %v; before: %v", after, before)
	}
	var kind string
	if err := pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = 'wary_outbox'::regclass").Scan(&kind); err != nil || kind != "r" {
		t.Errorf("wary_outbox: relkind %q, %v; want r (a plain table)", kind, err)
	}
	if !tableExists(t, pool, "wary_outbox_left_idx") {
		t.Error("no index wary_outbox_left_idx after the migration")
	}
	if ok, c := publishes(t, pool, pub); !ok || c != cols {
		t.Errorf("publication after the migration: on the outbox %v, columns %q; want %q", ok, c, cols)
	}
	var max int64
	for _, id := range old {
		max = id
	}
	added := addRows(t, st, t0.Add(time.Second), "p", "q")
	if added[0] <= max {
		t.Errorf("a new row's ID %d does not follow the old ones (last %d)", added[0], max)
	}
	var quarantined int64
	if err := pool.QueryRow(ctx, "SELECT id FROM wary_outbox WHERE state = 2").Scan(&quarantined); err != nil {
		t.Fatal(err)
	}
	if ok, err := idemtest.D(st).SetOutboxState(ctx, quarantined, outbox.Pending, t0, outbox.Quarantined); !ok || err != nil {
		t.Fatalf("requeue: %v, %v", ok, err)
	}
	var order []string
	for _, r := range sendAll(t, st, t0.Add(time.Second)) {
		order = append(order, fmt.Sprintf("%s%d", r.AggregateID, r.Sequence))
	}
	for i := 1; i < len(order); i++ {
		if order[i][0] == order[i-1][0] && order[i] < order[i-1] {
			t.Errorf("claims after the migration: %v; want each aggregate in order", order)
		}
	}
	if len(order) != len(before)-countState(before, 1)+2 {
		t.Errorf("claimed %v after the migration; want every unsent row and the 2 new ones", order)
	}
	n, err := idemtest.D(st).PurgeOutbox(ctx, t0.Add(time.Hour), 1000)
	if err != nil || n != len(order)+countState(before, 1) {
		t.Errorf("purge: %d, %v; want every row deleted (%d)", n, err, len(order)+countState(before, 1))
	}
}

func countState(rows []outboxRow, state int) int {
	n := 0
	for _, r := range rows {
		if r.State == state {
			n++
		}
	}
	return n
}

// TestClaimsDuringOutboxRotation: relays claim and send while adds go on
// and the outbox is rotated under them, its unsent rows moved into each
// new current table (some rows quarantined and requeued meanwhile):
// every row is sent once, each aggregate's rows in sequence order, and
// none is lost.
func TestClaimsDuringOutboxRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const rounds, per, relays = 10, 60, 3
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]int64{} // each aggregate's last sequence sent
	sent := map[int64]int{}
	var bad []string
	dropped := 0
	for r := range rounds {
		now := t0.Add(time.Duration(r) * time.Minute)
		aggs := make([]string, per)
		for i := range aggs {
			aggs[i] = fmt.Sprintf("a%d", i%12)
		}
		addAt(t, st, now, aggs)
		// A straggler: one aggregate's head quarantined for a round.
		var head int64
		if err := pool.QueryRow(ctx, "SELECT id FROM wary_outbox WHERE state = 0 ORDER BY id LIMIT 1").Scan(&head); err != nil {
			t.Fatal(err)
		}
		quarantine(t, pool, head)
		var wg sync.WaitGroup
		wg.Go(func() {
			n, err := postgres.RotateOutbox(ctx, st, now, now.Add(-90*time.Second))
			if err != nil {
				t.Errorf("rotation during the claims: %v", err)
			}
			mu.Lock()
			dropped += n
			mu.Unlock()
		})
		for range relays {
			wg.Go(func() {
				for {
					b, err := postgres.ClaimOutbox(ctx, st, sqlcore.Claim{Owner: "t", Now: now, Limit: 10, PerAggregate: 3})
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					if b == nil || len(b.Rows()) == 0 {
						if b != nil {
							_ = b.Release(ctx)
						}
						return
					}
					ids := make([]int64, len(b.Rows()))
					mu.Lock()
					for i, row := range b.Rows() {
						ids[i] = row.RowID
						if row.Sequence <= last[row.AggregateID] {
							bad = append(bad, fmt.Sprintf("%s%d after %d", row.AggregateID, row.Sequence, last[row.AggregateID]))
						}
						last[row.AggregateID] = row.Sequence
						sent[row.RowID]++
					}
					mu.Unlock()
					if err := b.Complete(ctx, ids, nil, now); err != nil {
						t.Errorf("complete: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if _, err := idemtest.D(st).SetOutboxState(ctx, head, outbox.Pending, now, outbox.Quarantined); err != nil {
			t.Fatal(err)
		}
	}
	final := t0.Add(rounds * time.Minute)
	sendAll(t, st, final)
	var total, unsent, moved int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state IN (0, 2)), count(*) FILTER (WHERE claims_only)
		FROM (SELECT state, claims_only FROM wary_outbox UNION ALL SELECT state, claims_only FROM wary_outbox_prev) o`).
		Scan(&total, &unsent, &moved); err != nil {
		t.Fatal(err)
	}
	// The first round's quarantined head is the lowest pending row at
	// every round's start: quarantined, it is moved into each new
	// current table, with the rows of its aggregate after it.
	if moved == 0 {
		t.Error("no row was moved by a rotation")
	}
	twice := 0
	for _, n := range sent {
		if n > 1 {
			twice++
		}
	}
	if len(bad) > 0 || twice > 0 || unsent != 0 {
		t.Errorf("out of order: %v; sent twice: %d; unsent left: %d", bad, twice, unsent)
	}
	if dropped == 0 {
		t.Error("no rotation dropped a previous table while the claims ran")
	}
	t.Logf("%d rows sent during the rounds, %d left in the tables (%d moved), %d dropped", len(sent), total, moved, dropped)
}

// TestStreamLeavesMovedRows: on a sliced outbox, a rotation moves the
// pending and quarantined rows into the new current table; the move
// reaches the stream as inserts (the rotation adds the new table to the
// publication), and Publishable leaves those rows, and their first
// inserts, to the claims: none is published twice. The stream marks the
// moved rows' commit (Left: the windows from it on are checked, also when
// the table was clear), and not the others. A row added to the new current
// table streams as before.
func TestStreamLeavesMovedRows(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	requireStream(t, st)
	slot, err := st.StreamSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.OpenStream(ctx, st, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close(context.Background())
		// The database is dropped after this: its slot first.
		for range 100 {
			if _, err := pool.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // the walsender is exiting
		}
	})
	next := func(left bool) []outbox.Row {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			ev, err := s.Recv(rctx)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(ev.Rows) > 0 {
				if ev.Left != left {
					t.Errorf("a commit of %d rows streamed with Left %v, want %v", len(ev.Rows), ev.Left, left)
				}
				return ev.Rows
			}
		}
	}
	// a: a quarantined head and a row behind it; b: a row still pending
	// (the stream passed over it), which nothing else holds back.
	ids := addRows(t, st, t0, "a", "a", "b")
	first := next(false)
	if len(first) != 3 || first[0].RowID != ids[0] || first[2].RowID != ids[2] || first[2].AggregateID != "b" {
		t.Fatalf("streamed %+v, want rows %v", first, ids)
	}
	quarantine(t, pool, ids[0])
	if n := rotate(t, st, t0, t0.Add(-time.Hour)); n != 0 {
		t.Errorf("the rotation dropped %d rows, want 0", n)
	}
	moved := next(true)
	if len(moved) != 3 || moved[0].RowID != ids[0] || moved[2].RowID != ids[2] {
		t.Fatalf("streamed after the move %+v, want rows %v again", moved, ids)
	}
	for _, rows := range [][]outbox.Row{moved, first} {
		keep, held, err := s.Publishable(ctx, rows, nil)
		if err != nil || len(keep) != 0 || held != 3 {
			t.Errorf("Publishable: %d rows to publish, %d held, %v; want none to publish, 3 held", len(keep), held, err)
		}
	}
	c := addRows(t, st, t0, "c")
	fresh := next(false)
	if len(fresh) != 1 || fresh[0].RowID != c[0] {
		t.Fatalf("streamed after the rotation %+v, want row %d", fresh, c[0])
	}
	if keep, held, err := s.Publishable(ctx, fresh, nil); err != nil || len(keep) != 1 || held != 0 {
		t.Errorf("Publishable of a row added after the rotation: %d to publish, %d held, %v; want it published", len(keep), held, err)
	}
}

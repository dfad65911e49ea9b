package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/idemtest"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/store"
)

// slicedOutboxDB opens stores whose outbox expires by whole slices, a
// new one current at every purge: the suite's relays run on fake clocks,
// and a slice is dropped once every row in it was sent before the
// relay's KeepSent.
type slicedOutboxDB struct{ testDB }

func (d slicedOutboxDB) Open(ctx context.Context, prefix string) (store.Provider[pgx.Tx], error) {
	st, err := postgres.New(ctx, d.pool, &postgres.Options{Prefix: prefix, OutboxSlice: time.Nanosecond})
	if err == nil {
		postgres.SliceReady(st, 0)
	}
	return st, err
}

// TestSlicedOutbox: the outbox suite on stores whose relays' purges
// rotate the outbox's slices (and drop them past the retention).
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
func sendAll(t *testing.T, st *postgres.Store, at time.Time, only ...string) []store.OutboxRow {
	t.Helper()
	ctx := t.Context()
	var sent []store.OutboxRow
	for {
		b, err := st.Driver().ClaimOutbox(ctx, store.OutboxClaim{Owner: "t", Now: at, Limit: 100, PerAggregate: 100})
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

// rowSlice returns the slice of row id and whether the purge moved it
// (-1: no such row).
func rowSlice(t *testing.T, pool *pgxpool.Pool, id int64) (int64, bool) {
	t.Helper()
	var s int64 = -1
	var moved bool
	err := pool.QueryRow(t.Context(), "SELECT slice, claims_only FROM wary_outbox WHERE id = $1", id).Scan(&s, &moved)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return s, moved
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var reg *string
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1)::text", name).Scan(&reg); err != nil {
		t.Fatal(err)
	}
	return reg != nil
}

// TestOutboxSliceRotation: rows go to the current slice; a past slice
// whose rows are all sent before the retention is dropped as a table,
// after its pending and quarantined rows were moved to the current slice
// with their IDs, and they are then claimed in their aggregate's order.
// A slice with a row sent inside the retention stays.
func TestOutboxSliceRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, keep = time.Minute, 2 * time.Minute
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	postgres.SliceReady(st, 0)
	rotate(t, st, t0, t0.Add(-keep)) // creates a slice ahead
	first := addRows(t, st, t0, "a", "a", "b", "b", "q")
	s1, _ := rowSlice(t, pool, first[0])
	if s1 != 1 {
		t.Fatalf("the first rows went to slice %d, want 1 (current since the migration)", s1)
	}
	rotate(t, st, t0, t0.Add(-keep)) // slice 1 has been current for w: the next one takes over
	second := addRows(t, st, t0, "b", "c")
	if s, _ := rowSlice(t, pool, second[0]); s <= s1 {
		t.Fatalf("rows after the switch went to slice %d, want one after %d", s, s1)
	}
	at := t0.Add(30 * time.Second)
	if got := sendAll(t, st, at, "a", "c"); len(got) != 3 {
		t.Fatalf("sent %d rows of a and c, want 3", len(got))
	}
	// b's first row sent, its second left pending; q quarantined.
	b, err := st.Driver().ClaimOutbox(ctx, store.OutboxClaim{Owner: "t", Now: at, Limit: 100, PerAggregate: 1})
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
	// Inside the retention: nothing is dropped, nothing is moved.
	if n := rotate(t, st, at, at.Add(-keep)); n != 0 {
		t.Fatalf("rotation inside the retention retired %d rows", n)
	}
	if s, moved := rowSlice(t, pool, first[3]); s != s1 || moved {
		t.Fatalf("b's pending row in slice %d (moved %v) inside the retention", s, moved)
	}
	// Past the retention: slice 1 is dropped whole; b's second row and q
	// are moved first.
	late := at.Add(keep + time.Second)
	if n := rotate(t, st, late, late.Add(-keep)); n != 3 {
		t.Errorf("rotation past the retention retired %d rows, want 3 (a, a, b's first)", n)
	}
	if tableExists(t, pool, fmt.Sprintf("wary_outbox_s%d", s1)) {
		t.Errorf("slice %d's table is still there", s1)
	}
	for _, id := range []int64{first[3], first[4]} {
		if s, moved := rowSlice(t, pool, id); s <= s1 || !moved {
			t.Errorf("row %d: slice %d, moved %v; want moved to the current slice", id, s, moved)
		}
	}
	if ok, err := st.Driver().SetOutboxState(ctx, first[4], store.OutboxPending, late, store.OutboxQuarantined); !ok || err != nil {
		t.Fatalf("requeue of the moved quarantined row: %v, %v", ok, err)
	}
	got := sendAll(t, st, late)
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("%s%d", r.AggregateID, r.Sequence))
	}
	if fmt.Sprint(order) != "[b2 b3 q1]" && fmt.Sprint(order) != "[q1 b2 b3]" {
		t.Errorf("claims after the rotation: %v; want b2 b3 (in order) and q1", order)
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM wary_outbox WHERE state IN (0, 2)").Scan(&left); err != nil || left != 0 {
		t.Errorf("unsent rows left: %d, %v", left, err)
	}
}

// TestOutboxRetentionDeadTuples: the same rows, sent, expired by row
// deletes and by slices. pg_stat_user_tables counts a deleted tuple for
// each row the deletes removed; dropping slices deletes none.
func TestOutboxRetentionDeadTuples(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const w, keep, steps, per = time.Minute, 2 * time.Minute, 8, 250
	sliced, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: w})
	if err != nil {
		t.Fatal(err)
	}
	postgres.SliceReady(sliced, 0)
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
				n, err := st.Driver().PurgeOutbox(ctx, now.Add(-keep), 1000)
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
	rdel, rdead := tupleStats(t, pool, `^rows_outbox(_s[0-9]+)?$`)
	sdel, sdead := tupleStats(t, pool, `^wary_outbox_s[0-9]+$`)
	t.Logf("by rows: %d deleted, %d dead; by slices: %d deleted, %d dead (the dead ones: marked sent)", rdel, rdead, sdel, sdead)
	if sdel != 0 {
		t.Errorf("expiry by slices: %d tuples deleted in the outbox, want none", sdel)
	}
}

// addAt adds one row per aggregate in aggs at at, in one transaction,
// and returns their message IDs.
func addAt(t testing.TB, st *postgres.Store, at time.Time, aggs []string) []string {
	t.Helper()
	ctx := t.Context()
	tx, err := st.Driver().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]store.OutboxMessage, len(aggs))
	ids := make([]string, len(aggs))
	for i, a := range aggs {
		ids[i] = fmt.Sprintf("%s-%d-%d", a, at.UnixNano(), i)
		msgs[i] = store.OutboxMessage{ID: ids[i], AggregateID: a, Type: "t", Payload: []byte("x")}
	}
	if _, err := st.Driver().AddOutbox(ctx, tx, msgs, at); err != nil {
		t.Fatal(err)
	}
	if err := st.Driver().Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestMigrateOutboxKeepsRows: an outbox with pending, quarantined and
// sent rows under the schema before migration 010 (and the stream's
// publication on it) is migrated: every row is there with its ID and
// state, in slice 0; new rows follow the old IDs in slice 1; claims keep
// each aggregate's order across the two; the publication publishes the
// partitioned outbox through its root; old sent rows expire by row
// deletes.
func TestMigrateOutboxKeepsRows(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, &postgres.Options{SkipMigrate: true, OutboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.MigrateBefore(ctx, st, 10); err != nil {
		t.Fatal(err)
	}
	postgres.SliceReady(st, 0)
	old := addRows(t, st, t0, "p", "p", "q", "s", "s")
	if got := sendAll(t, st, t0, "s"); len(got) != 2 {
		t.Fatalf("sent %d rows of s before the migration, want 2", len(got))
	}
	quarantine(t, pool, old[2])
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION wary_pub FOR TABLE wary_outbox WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID    int64
		State int
		Seq   int64
	}
	snapshot := func(q string) []row {
		rs, err := pool.Query(ctx, "SELECT id, state, sequence FROM wary_outbox "+q+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rs, pgx.RowToStructByPos[row])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := snapshot("")
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after := snapshot("WHERE slice = 0"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows after the migration: %v; before: %v", after, before)
	}
	var kind string
	if err := pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = 'wary_outbox'::regclass").Scan(&kind); err != nil || kind != "p" {
		t.Errorf("wary_outbox: relkind %q, %v; want p (partitioned)", kind, err)
	}
	var viaRoot, published bool
	if err := pool.QueryRow(ctx, `SELECT p.pubviaroot, EXISTS (SELECT 1 FROM pg_publication_rel r WHERE r.prpubid = p.oid
		AND r.prrelid = 'wary_outbox'::regclass) FROM pg_publication p WHERE p.pubname = 'wary_pub'`).Scan(&viaRoot, &published); err != nil || !viaRoot || !published {
		t.Errorf("publication after the migration: via root %v, on the outbox %v, %v", viaRoot, published, err)
	}
	added := addRows(t, st, t0.Add(time.Second), "p", "q")
	if added[0] <= old[len(old)-1] {
		t.Errorf("a new row's ID %d does not follow the old ones (last %d)", added[0], old[len(old)-1])
	}
	if s, _ := rowSlice(t, pool, added[0]); s != 1 {
		t.Errorf("a new row went to slice %d, want 1", s)
	}
	if ok, err := st.Driver().SetOutboxState(ctx, old[2], store.OutboxPending, t0, store.OutboxQuarantined); !ok || err != nil {
		t.Fatalf("requeue: %v, %v", ok, err)
	}
	var order []string
	for _, r := range sendAll(t, st, t0.Add(time.Second)) {
		order = append(order, fmt.Sprintf("%s%d", r.AggregateID, r.Sequence))
	}
	got := fmt.Sprint(order)
	if got != "[p1 p2 p3 q1 q2]" && got != "[q1 q2 p1 p2 p3]" {
		t.Errorf("claims across slice 0 and slice 1: %v; want each aggregate in order", order)
	}
	n, err := st.Driver().PurgeOutbox(ctx, t0.Add(time.Hour), 1000)
	if err != nil || n != 5 {
		t.Errorf("purge of the old rows: %d, %v; want the 5 sent rows of slice 0 deleted", n, err)
	}
}

// TestClaimsDuringOutboxRotation: relays claim and send while adds go on
// and slices are switched, their stragglers moved and dropped under them
// (some rows quarantined and requeued meanwhile): every row is sent once,
// each aggregate's rows in sequence order, and none is lost.
func TestClaimsDuringOutboxRotation(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	const rounds, per, relays = 10, 60, 3
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	postgres.SliceReady(st, 0)
	var mu sync.Mutex
	last := map[string]int64{} // each aggregate's last sequence sent
	sent := map[int64]int{}
	var bad []string
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
			if _, err := postgres.RotateOutbox(ctx, st, now, now.Add(-90*time.Second)); err != nil {
				t.Errorf("rotation during the claims: %v", err)
			}
		})
		for range relays {
			wg.Go(func() {
				for {
					b, err := st.Driver().ClaimOutbox(ctx, store.OutboxClaim{Owner: "t", Now: now, Limit: 10, PerAggregate: 3})
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
		if _, err := st.Driver().SetOutboxState(ctx, head, store.OutboxPending, now, store.OutboxQuarantined); err != nil {
			t.Fatal(err)
		}
	}
	final := t0.Add(rounds * time.Minute)
	sendAll(t, st, final)
	var total, unsent, moved int
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state IN (0, 2)), count(*) FILTER (WHERE claims_only) FROM wary_outbox").
		Scan(&total, &unsent, &moved); err != nil {
		t.Fatal(err)
	}
	// The first round's quarantined head is the lowest pending row at
	// every round's start: quarantined again, it is moved out of each
	// slice retired under it, with the rows of its aggregate after it.
	if moved == 0 {
		t.Error("no row was moved out of a retired slice")
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
	var slices, first int
	if err := pool.QueryRow(ctx, "SELECT count(*), min(id) FROM wary_outbox_slices").Scan(&slices, &first); err != nil {
		t.Fatal(err)
	}
	if first <= 2 {
		t.Errorf("the first slice left is %d: none was dropped while the claims ran", first)
	}
	t.Logf("%d rows sent during the rounds, %d left in the table (%d moved), slices from %d (%d live)", len(sent), total, moved, first, slices)
}

// TestStreamLeavesMovedRows: the stream decodes rows added to a slice as
// the outbox's (the publication publishes through the partitioned root);
// when the purge moves pending and quarantined rows out of a slice it
// drops, the move reaches the stream as inserts, and Publishable leaves
// those rows, and their first inserts, to the claims: none is published
// twice.
func TestStreamLeavesMovedRows(t *testing.T) {
	pool := newPrivatePool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, &postgres.Options{OutboxSlice: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	postgres.SliceReady(st, 0)
	requireStream(t, st)
	slot, err := st.StreamSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Driver().(store.Streamer).OpenOutboxStream(ctx, "t")
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
	next := func() []store.OutboxRow {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			ev, err := s.Recv(rctx)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if len(ev.Rows) > 0 {
				return ev.Rows
			}
		}
	}
	rotate(t, st, t0, t0.Add(-time.Hour)) // a slice ahead
	// a: a quarantined head and a row behind it; b: a row still pending
	// (the stream passed over it), which nothing else holds back.
	ids := addRows(t, st, t0, "a", "a", "b")
	first := next()
	if len(first) != 3 || first[0].RowID != ids[0] || first[2].RowID != ids[2] || first[2].AggregateID != "b" {
		t.Fatalf("streamed %+v, want rows %v", first, ids)
	}
	quarantine(t, pool, ids[0])
	rotate(t, st, t0, t0.Add(-time.Hour)) // slice 1 stops taking rows
	if n := rotate(t, st, t0.Add(time.Hour), t0.Add(time.Minute)); n != 0 {
		t.Errorf("retired %d rows, want 0 (all moved out)", n)
	}
	moved := next()
	if len(moved) != 3 || moved[0].RowID != ids[0] || moved[2].RowID != ids[2] {
		t.Fatalf("streamed after the move %+v, want rows %v again", moved, ids)
	}
	for _, rows := range [][]store.OutboxRow{moved, first} {
		keep, held, err := s.Publishable(ctx, rows, nil)
		if err != nil || len(keep) != 0 || held != 3 {
			t.Errorf("Publishable: %d rows to publish, %d held, %v; want none to publish, 3 held", len(keep), held, err)
		}
	}
}

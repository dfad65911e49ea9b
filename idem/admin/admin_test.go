package admin

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	_ "github.com/wary-go/wary/drivers/memory" // mem:// URLs
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/internal/servicetest"
	"github.com/wary-go/wary/testkit"
)

var quiet = slog.New(slog.DiscardHandler)

// world is a store under test, and how to run a transaction on it.
type world[Tx any] struct {
	st idem.Store[Tx]
	// inTx runs f in a transaction and commits it.
	inTx func(ctx context.Context, f func(Tx) error) error
	// exec runs one statement.
	exec func(q string) error
}

func sqliteWorld(t *testing.T) world[*sql.Tx] {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "shop.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return sqlWorld(st, st.DB())
}

// sqlWorld is the world of a store on db, a *sql.DB.
func sqlWorld(st idem.Store[*sql.Tx], db *sql.DB) world[*sql.Tx] {
	return world[*sql.Tx]{st: st, inTx: sqlInTx(db, nil), exec: func(q string) error { _, err := db.Exec(q); return err }}
}

// sqlInTx runs f in a transaction of db with o, committed if f succeeds.
func sqlInTx(db *sql.DB, o *sql.TxOptions) func(ctx context.Context, f func(*sql.Tx) error) error {
	return func(ctx context.Context, f func(*sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, o)
		if err != nil {
			return err
		}
		if err := f(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// pgSQLWorld is pgWorld's database through database/sql: a
// *postgres.SQLStore on a *sql.DB of pgx's stdlib driver.
func pgSQLWorld(t *testing.T) world[*sql.Tx] {
	db := stdlib.OpenDBFromPool(pgPool(t))
	t.Cleanup(func() { _ = db.Close() })
	st, err := postgres.OpenDB(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sqlWorld(st, db)
}

// pgWorld is a PostgreSQL store in a fresh schema, dropped when t ends;
// it skips t (fails it, with WARY_REQUIRE_SERVICES=1 or WARY_POSTGRES_URL
// set) when the server cannot be reached.
func pgWorld(t *testing.T) world[pgx.Tx] {
	pool := pgPool(t)
	st, err := postgres.New(t.Context(), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return world[pgx.Tx]{st: st, inTx: func(ctx context.Context, f func(pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, pool, f)
	}, exec: func(q string) error { _, err := pool.Exec(context.Background(), q); return err }}
}

// pgPool is a pool whose search_path is a fresh schema, dropped when t
// ends (see pgWorld).
func pgPool(t *testing.T) *pgxpool.Pool {
	url := servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "admintest_" + hex.EncodeToString(b[:])
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return pool
}

// mysqlWorld is a MySQL store in a fresh database (testkit.MySQL),
// dropped when t ends; it skips t (fails it, with WARY_REQUIRE_SERVICES=1
// or WARY_MYSQL_URL set) when the server cannot be reached. Its exec gives
// a TEXT key the length MySQL needs.
func mysqlWorld(t *testing.T) world[*sql.Tx] {
	st := testkit.MySQL(t, mysqltest.Server(t))
	return world[*sql.Tx]{st: st, inTx: sqlInTx(st.DB(), &sql.TxOptions{Isolation: sql.LevelReadCommitted}), exec: func(q string) error {
		_, err := st.DB().Exec(strings.ReplaceAll(q, "TEXT PRIMARY KEY", "VARCHAR(255) PRIMARY KEY"))
		return err
	}}
}

var usedNames sync.Map

// unique returns a name no other test of this process uses.
func unique(prefix string) string {
	for i := 0; ; i++ {
		n := prefix + "-" + strconv.Itoa(i)
		if _, taken := usedNames.LoadOrStore(n, true); !taken {
			return n
		}
	}
}

func openTopic(t *testing.T, url string) *broker.Topic {
	t.Helper()
	top, err := broker.OpenTopic(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	return top
}

func openSub(t *testing.T, url string) *broker.Subscription {
	t.Helper()
	s, err := broker.OpenSubscription(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func event(id, agg string, version int64) *broker.Message {
	return &broker.Message{ID: id, Key: agg, Body: []byte("body of " + id), Headers: broker.Headers{
		{broker.HeaderAggregateID, agg}, {broker.HeaderAggregateVersion, strconv.FormatInt(version, 10)}, {"traceparent", "00-" + id}}}
}

func newAdmin[Tx any](t *testing.T, w world[Tx]) *Admin {
	t.Helper()
	a, err := New(t.Context(), w.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSQLiteReplayParked(t *testing.T)      { testReplayParked(t, sqliteWorld(t)) }
func TestPostgresReplayParked(t *testing.T)    { testReplayParked(t, pgWorld(t)) }
func TestPostgresSQLReplayParked(t *testing.T) { testReplayParked(t, pgSQLWorld(t)) }
func TestMySQLReplayParked(t *testing.T)       { testReplayParked(t, mysqlWorld(t)) }

// testReplayParked: messages parked by an inbox are listed, replayed to
// the topic (in order, with their IDs, bodies and a wary-replayed-by
// header, gone from the park, their claims forgotten, so that the inbox
// applies them), and a replay whose publish fails leaves its aggregate
// parked and claimed.
func testReplayParked[Tx any](t *testing.T, w world[Tx]) {
	ctx := t.Context()
	const consumer = "billing"
	name := "mem://" + unique("orders")
	top, sub := openTopic(t, name), openSub(t, name+"/"+consumer)
	in, err := idem.NewInbox(w.st, consumer, sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	parking := true
	h := func(context.Context, Tx, *broker.Delivery) error {
		if parking {
			return &idem.ParkError{Reason: "gap", Now: true}
		}
		return nil
	}
	msgs := []*broker.Message{event("o1/v1", "order-1", 1), event("o1/v2", "order-1", 2), event("o2/v1", "order-2", 1), event("o1/v3", "order-1", 3)}
	for _, m := range msgs {
		if r, err := in.Handle(ctx, broker.NewDetachedDelivery(m, 1), h); r != idem.ResultParked && r != idem.ResultHeld {
			t.Fatalf("handle %s: %v %v, want parked or held", m.ID, r, err)
		}
	}

	a := newAdmin(t, w)
	if m, err := a.ParkedConsumers(ctx); err != nil || m[consumer] != 4 || len(m) != 1 {
		t.Fatalf("parked consumers %v (%v), want billing: 4", m, err)
	}
	ps, err := a.Parked(ctx, "", idem.ParkedFilter{NoBody: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.MessageID)
		if p.Body != nil || p.Consumer != consumer {
			t.Errorf("parked %s: consumer %q, body %q; want billing and none read", p.MessageID, p.Consumer, p.Body)
		}
	}
	if want := []string{"o1/v1", "o1/v2", "o1/v3", "o2/v1"}; !slices.Equal(ids, want) {
		t.Fatalf("parked %v, want %v (by aggregate, in replay order)", ids, want)
	}
	if p, ok, err := a.FindParked(ctx, "", ps[3].ID); err != nil || !ok || p.MessageID != "o2/v1" || string(p.Body) != "body of o2/v1" {
		t.Fatalf("find parked %d: %+v %v %v", ps[3].ID, p, ok, err)
	}
	if _, ok, err := a.FindParked(ctx, "shipping", ps[3].ID); err != nil || ok {
		t.Fatalf("find another consumer's parked message: %v %v, want none", ok, err)
	}
	if aggs, err := a.ParkedAggregates(ctx, consumer, idem.ParkedFilter{}); err != nil || !slices.Equal(aggs, []string{"order-1", "order-2"}) {
		t.Fatalf("parked aggregates %v (%v)", aggs, err)
	}

	var done []string
	got, err := a.ReplayParked(ctx, top, consumer, []string{"order-1"}, &ReplayOptions{By: "tester",
		Replayed: func(agg string, ps []idem.Parked) { done = append(done, agg+":"+strconv.Itoa(len(ps))) }})
	if err != nil || len(got) != 3 || !slices.Equal(done, []string{"order-1:3"}) {
		t.Fatalf("replay: %d replayed, callbacks %v, %v", len(got), done, err)
	}
	if n, err := a.CountParked(ctx, consumer, idem.ParkedFilter{}); err != nil || n != 1 {
		t.Fatalf("after the replay: %d parked (%v), want 1", n, err)
	}
	parking = false
	ds, err := sub.Receive(ctx, 3)
	if err != nil || len(ds) != 3 {
		t.Fatalf("received %d (%v), want the 3 replayed", len(ds), err)
	}
	for i, d := range ds {
		m := d.Message
		if want := msgs[[]int{0, 1, 3}[i]]; m.ID != want.ID || string(m.Body) != string(want.Body) || m.Headers.Get("traceparent") != want.Headers.Get("traceparent") {
			t.Errorf("replayed %d: %s %q, want %s in order, as parked", i, m.ID, m.Body, want.ID)
		}
		if by := m.Headers.Get(driver.HeaderReplayedBy); i == 0 && by != "tester: gap" || len(by) < 6 || by[:6] != "tester" {
			t.Errorf("replayed %s: %s %q", m.ID, driver.HeaderReplayedBy, by)
		}
		if r, err := in.Handle(ctx, d, h); r != idem.ResultApplied {
			t.Errorf("handle replayed %s: %v %v, want applied (its claim forgotten)", m.ID, r, err)
		}
	}

	// A publish the broker refuses leaves the aggregate parked, its claim
	// kept.
	small := openTopic(t, "mem://"+unique("small")+"?maxsize=10")
	if _, err := a.ReplayParked(ctx, small, consumer, []string{"order-2"}, nil); err == nil {
		t.Fatal("replay to a topic that refuses the message: no error")
	}
	if ps, err := a.Parked(ctx, consumer, idem.ParkedFilter{}); err != nil || len(ps) != 1 || ps[0].MessageID != "o2/v1" || string(ps[0].Body) != "body of o2/v1" {
		t.Fatalf("after a failed replay: parked %+v (%v), want o2/v1 whole", ps, err)
	}
	if r, err := in.Handle(ctx, broker.NewDetachedDelivery(msgs[2], 1), h); r != idem.ResultDuplicate {
		t.Fatalf("o2/v1 again after a failed replay: %v %v, want a duplicate (its claim kept)", r, err)
	}

	if n, err := a.DiscardParked(ctx, consumer, idem.ParkedFilter{AggregateID: "order-2", HasAggregate: true}); err != nil || n != 1 {
		t.Fatalf("discard: %d (%v), want 1", n, err)
	}
	if m, err := a.ParkedConsumers(ctx); err != nil || len(m) != 0 {
		t.Fatalf("parked consumers after the discard: %v (%v), want none", m, err)
	}
}

func TestSQLiteAudit(t *testing.T)      { testAudit(t, sqliteWorld(t)) }
func TestPostgresAudit(t *testing.T)    { testAudit(t, pgWorld(t)) }
func TestPostgresSQLAudit(t *testing.T) { testAudit(t, pgSQLWorld(t)) }
func TestMySQLAudit(t *testing.T)       { testAudit(t, mysqlWorld(t)) }

// testAudit: Record refuses until CreateAudit made the table, which then
// keeps each entry, listed newest first.
func testAudit[Tx any](t *testing.T, w world[Tx]) {
	ctx := t.Context()
	a := newAdmin(t, w)
	if err := a.Record(ctx, AuditEntry{Who: "me", Action: "parked replay", What: "x", Count: 1}); !errors.Is(err, ErrNoAudit) {
		t.Fatalf("record without the table: %v, want ErrNoAudit", err)
	}
	if _, err := a.Audit(ctx, 10); !errors.Is(err, ErrNoAudit) {
		t.Fatalf("list without the table: %v, want ErrNoAudit", err)
	}
	for range 2 { // again: it exists
		if err := a.CreateAudit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().Add(-time.Minute)
	for i, e := range []AuditEntry{{Who: "me", Action: "parked replay", What: `consumer "billing"`, Count: 3},
		{Who: "you", Action: "outbox requeue", What: "rows [42]", Count: 0, Detail: "gone"}} {
		if err := a.Record(ctx, e); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	es, err := a.Audit(ctx, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("audit: %+v (%v)", es, err)
	}
	if es[0].Who != "you" || es[0].Detail != "gone" || es[1].Who != "me" || es[1].Count != 3 || es[0].ID <= es[1].ID || es[1].At.Before(before) {
		t.Errorf("audit %+v: want the newest first, as recorded", es)
	}
	if es, err := a.Audit(ctx, 1); err != nil || len(es) != 1 || es[0].Who != "you" {
		t.Errorf("audit, limit 1: %+v (%v)", es, err)
	}
}

func TestSQLiteNoStore(t *testing.T)      { testNoStore(t, sqliteWorld(t)) }
func TestPostgresNoStore(t *testing.T)    { testNoStore(t, pgWorld(t)) }
func TestPostgresSQLNoStore(t *testing.T) { testNoStore(t, pgSQLWorld(t)) }
func TestMySQLNoStore(t *testing.T)       { testNoStore(t, mysqlWorld(t)) }

// testNoStore: New names the table it did not find for a wrong prefix.
func testNoStore[Tx any](t *testing.T, w world[Tx]) {
	_, err := New(t.Context(), w.st, &Options{Prefix: "other_"})
	if !errors.Is(err, ErrNoStore) {
		t.Fatalf("a wrong prefix: %v, want ErrNoStore", err)
	}
	if want := `"other_migrations" does not exist`; !contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestSQLiteOutbox(t *testing.T)      { testOutbox(t, sqliteWorld(t)) }
func TestPostgresOutbox(t *testing.T)    { testOutbox(t, pgWorld(t)) }
func TestPostgresSQLOutbox(t *testing.T) { testOutbox(t, pgSQLWorld(t)) }
func TestMySQLOutbox(t *testing.T)       { testOutbox(t, mysqlWorld(t)) }

// testOutbox: rows a relay quarantined are listed, requeued (then
// pending) or discarded, and the status counts them.
func testOutbox[Tx any](t *testing.T, w world[Tx]) {
	ctx := t.Context()
	box, err := outbox.New(w.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = w.inTx(ctx, func(tx Tx) error {
		_, err := box.Add(ctx, tx, &outbox.Message{AggregateID: "order-1", Version: 1, Type: "t", Payload: []byte("too large for the topic")},
			&outbox.Message{AggregateID: "order-2", Version: 1, Type: "t", Payload: []byte("too large for the topic")},
			&outbox.Message{AggregateID: "order-3", Version: 1, Type: "t", Payload: []byte("{}")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(w.st, openTopic(t, "mem://"+unique("small")+"?maxsize=120"), &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, w)
	rows, err := a.Outbox(ctx, outbox.Filter{States: []outbox.State{outbox.Quarantined}, NoPayload: true})
	if err != nil || len(rows) != 2 || rows[0].AggregateID != "order-1" || rows[1].AggregateID != "order-2" || len(rows[0].Payload) != 0 || rows[0].LastError == "" {
		t.Fatalf("quarantined rows %v (%v), want order-1's and order-2's, without payloads, with their errors", rows, err)
	}
	st, err := a.OutboxStatus(ctx)
	if err != nil || st.Quarantined != 2 || st.Backlog != 0 || st.OldestUnsent.IsZero() || st.Stream != nil {
		t.Fatalf("status %+v (%v), want 2 quarantined, no backlog, no stream", st, err)
	}
	done, skipped, err := a.RequeueOutbox(ctx, rows[0].RowID, 999)
	if err != nil || !slices.Equal(done, []int64{rows[0].RowID}) || !slices.Equal(skipped, []int64{999}) {
		t.Fatalf("requeue: done %v, skipped %v (%v)", done, skipped, err)
	}
	done, skipped, err = a.DiscardOutbox(ctx, rows[0].RowID, rows[1].RowID)
	if err != nil || len(done) != 2 || len(skipped) != 0 {
		t.Fatalf("discard: done %v, skipped %v (%v)", done, skipped, err)
	}
	if rows, err := a.Outbox(ctx, outbox.Filter{States: []outbox.State{outbox.Discarded}}); err != nil || len(rows) != 2 || string(rows[0].Payload) != "too large for the topic" {
		t.Fatalf("discarded rows %+v (%v)", rows, err)
	}
	if st, err := a.OutboxStatus(ctx); err != nil || st.Quarantined != 0 || st.Backlog != 0 {
		t.Fatalf("status after the discard %+v (%v)", st, err)
	}
}

func TestSQLiteKeys(t *testing.T)      { testKeys(t, sqliteWorld(t)) }
func TestPostgresKeys(t *testing.T)    { testKeys(t, pgWorld(t)) }
func TestPostgresSQLKeys(t *testing.T) { testKeys(t, pgSQLWorld(t)) }
func TestMySQLKeys(t *testing.T)       { testKeys(t, mysqlWorld(t)) }

// testKeys: a call whose outcome is unknown is listed as unresolved; a
// succeeded one by its state.
func testKeys[Tx any](t *testing.T, w world[Tx]) {
	ctx := t.Context()
	c, err := keys.New(w.st, keys.Contract{Provider: "payments"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = w.inTx(ctx, func(tx Tx) error {
		for _, k := range []string{"k1", "k2"} {
			if _, err := c.Stage(ctx, tx, k, []byte("charge "+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "k1", func(context.Context, string, []byte) ([]byte, error) { return nil, errors.New("timeout") }); err == nil {
		t.Fatal("k1: no error")
	}
	if _, err := c.Call(ctx, "k2", func(context.Context, string, []byte) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, w)
	if ks, err := a.Keys(ctx, keys.Filter{Provider: "payments", Unresolved: true}); err != nil || len(ks) != 1 || ks[0].Key != "k1" || ks[0].State != keys.Unknown {
		t.Fatalf("unresolved keys %+v (%v), want k1, unknown", ks, err)
	}
	if ks, err := a.Keys(ctx, keys.Filter{Provider: "payments", States: []keys.State{keys.Succeeded}}); err != nil || len(ks) != 1 || ks[0].Key != "k2" || string(ks[0].Result) != "ok" {
		t.Fatalf("succeeded keys %+v (%v), want k2 with its result", ks, err)
	}
	if ks, err := a.Keys(ctx, keys.Filter{Provider: "payments"}); err != nil || len(ks) != 2 || string(ks[0].Intent) != "charge k1" {
		t.Fatalf("keys %+v (%v), want both, oldest first", ks, err)
	}
}

func TestSQLiteEarly(t *testing.T)      { testEarly(t, sqliteWorld(t)) }
func TestPostgresEarly(t *testing.T)    { testEarly(t, pgWorld(t)) }
func TestPostgresSQLEarly(t *testing.T) { testEarly(t, pgSQLWorld(t)) }
func TestMySQLEarly(t *testing.T)       { testEarly(t, mysqlWorld(t)) }

// testEarly: an event ahead of its aggregate, which an inbox holds in the
// store, is listed with the version it awaits, until that one comes.
func testEarly[Tx any](t *testing.T, w world[Tx]) {
	ctx := t.Context()
	if err := w.exec("CREATE TABLE ship_versions (id TEXT PRIMARY KEY, version BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := w.exec("INSERT INTO ship_versions (id, version) VALUES ('order-1', 1)"); err != nil {
		t.Fatal(err)
	}
	sub := openSub(t, "mem://"+unique("early")+"/shipping") // no order: gaps are held in the store
	in, err := idem.NewInbox(w.st, "shipping", sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet},
		Versions: idem.VersionTable{Table: "ship_versions", IDColumn: "id", VersionColumn: "version"}})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, Tx, *broker.Delivery) error { return nil }
	if r, err := in.Handle(ctx, broker.NewDetachedDelivery(event("o1/v3", "order-1", 3), 1), h); r != idem.ResultEarly {
		t.Fatalf("v3 at version 1: %v (%v), want early", r, err)
	}
	a := newAdmin(t, w)
	es, err := a.Early(ctx, "", 0)
	if err != nil || len(es) != 1 || es[0].Consumer != "shipping" || es[0].AggregateID != "order-1" || es[0].Awaited != 2 ||
		es[0].Held != 1 || es[0].FirstVersion != 3 || es[0].OldestHeldAt.IsZero() {
		t.Fatalf("early %+v (%v), want order-1 awaiting v2, v3 held", es, err)
	}
	if r, err := in.Handle(ctx, broker.NewDetachedDelivery(event("o1/v2", "order-1", 2), 1), h); r != idem.ResultApplied {
		t.Fatalf("v2: %v (%v), want applied", r, err)
	}
	if es, err := a.Early(ctx, "shipping", 0); err != nil || len(es) != 0 {
		t.Fatalf("early after v2 %+v (%v), want none", es, err)
	}
}

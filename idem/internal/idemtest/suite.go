// Package idemtest is the store test suite of package idem: Run proves, on
// any store, the inbox's effect-once guarantee under concurrent
// duplicates, crashes between commit and ack and handler failures, version
// checks, state-transition guards, parking and replay, retention, and name
// validation. Stores call it from their tests; Queue is the scripted broker
// it drives them with.
package idemtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
)

// DB is one test's isolated database, as a store package provides it. A
// DB whose store expires inbox records by whole tables (it expires records by whole tables),
// keeping them longer than the retention, has a method ExpiresByTables()
// bool that returns true: the suite then skips the scenarios that count
// the records each purge deletes row by row.
type DB[Tx any] interface {
	// Open returns a store using table prefix (the store's default when
	// empty), creating its tables. Invalid prefixes must fail.
	Open(ctx context.Context, prefix string) (idem.Store[Tx], error)
	// Exec runs a statement, written with $1, $2, ... placeholders, in tx.
	Exec(ctx context.Context, tx Tx, q string, args ...any) error
	// QueryRow runs a query in tx.
	QueryRow(ctx context.Context, tx Tx, q string, args ...any) interface{ Scan(...any) error }
}

// Factory returns a fresh, isolated database for t (cleaned up by t).
type Factory[Tx any] func(t testing.TB) DB[Tx]

// Run runs the suite.
func Run[Tx any](t *testing.T, f Factory[Tx]) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory[Tx])
	}{
		{"Names", testNames[Tx]},
		{"Migrate", testMigrate[Tx]},
		{"Claim", testClaim[Tx]},
		{"Inbox", testInbox[Tx]},
		{"HandlerError", testHandlerError[Tx]},
		{"PoisonID", testPoisonID[Tx]},
		{"ParkedHeaders", testParkedHeaders[Tx]},
		{"ParkedWithoutBodies", testParkedWithoutBodies[Tx]},
		{"AckAfterCommit", testAckAfterCommit[Tx]},
		{"ConcurrentDuplicates", testConcurrent[Tx]},
		{"Group", testGroup[Tx]},
		{"GroupErrors", testGroupErrors[Tx]},
		{"GroupVersioned", testGroupVersioned[Tx]},
		{"GroupConcurrent", testGroupConcurrent[Tx]},
		{"VersionCheck", testVersionCheck[Tx]},
		{"Versioned", testVersioned[Tx]},
		{"Early", testEarly[Tx]},
		{"EarlyGroup", testEarlyGroup[Tx]},
		{"EarlyFails", testEarlyFails[Tx]},
		{"EarlyExpiry", testEarlyExpiry[Tx]},
		{"EarlyShuffled", testEarlyShuffled[Tx]},
		{"Transition", testTransition[Tx]},
		{"Parking", testParking[Tx]},
		{"Retention", testRetention[Tx]},
		{"PurgeSchedule", testPurgeSchedule[Tx]},
		{"ReplayAll", testReplayAll[Tx]},
		{"GroupResults", testGroupResults[Tx]},
		{"Property", testProperty[Tx]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

// Caps are the capabilities of the Queue the suite uses.
var Caps = capability.Subscription{DeliveryCount: true, DeadLetter: true, NackDelay: true, RedeliveryHorizon: time.Hour}

// Env is a test's database, store and domain tables: effects (a log with
// no unique constraint), counter (one row "c", not idempotent), aggs
// (id, version, state) and orders (id, status).
type Env[Tx any] struct {
	T     testing.TB
	Ctx   context.Context
	DB    DB[Tx]
	Store idem.Store[Tx]
	// Driver is Store's driver, whose methods the scenarios call directly.
	Driver Driver[Tx]
}

// Setup opens a store with prefix on a fresh database and creates the
// domain tables.
func Setup[Tx any](t testing.TB, f Factory[Tx], prefix string) *Env[Tx] {
	t.Helper()
	ctx := t.Context()
	db := f(t)
	st, err := db.Open(ctx, prefix)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	e := &Env[Tx]{T: t, Ctx: ctx, DB: db, Store: st, Driver: D(st)}
	e.Exec(`CREATE TABLE effects (message_id TEXT NOT NULL, note TEXT NOT NULL)`)
	e.Exec(`CREATE TABLE counter (id TEXT PRIMARY KEY, n BIGINT NOT NULL)`)
	e.Exec(`INSERT INTO counter (id, n) VALUES ('c', 0)`)
	e.Exec(`CREATE TABLE aggs (id TEXT PRIMARY KEY, version BIGINT NOT NULL, state TEXT NOT NULL)`)
	e.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`)
	return e
}

// Exec runs q in its own transaction.
func (e *Env[Tx]) Exec(q string, args ...any) {
	e.T.Helper()
	e.InTx(func(tx Tx) error { return e.DB.Exec(e.Ctx, tx, q, args...) })
}

// InTx runs f in a transaction and commits.
func (e *Env[Tx]) InTx(f func(tx Tx) error) {
	e.T.Helper()
	tx, err := e.Driver.Begin(e.Ctx)
	if err != nil {
		e.T.Fatalf("begin: %v", err)
	}
	if err := f(tx); err != nil {
		_ = e.Driver.Rollback(e.Ctx, tx)
		e.T.Fatalf("in tx: %v", err)
	}
	if err := e.Driver.Commit(e.Ctx, tx); err != nil {
		e.T.Fatalf("commit: %v", err)
	}
}

// Int runs a query returning one integer.
func (e *Env[Tx]) Int(q string, args ...any) int64 {
	e.T.Helper()
	var n int64
	e.InTx(func(tx Tx) error { return e.DB.QueryRow(e.Ctx, tx, q, args...).Scan(&n) })
	return n
}

// String runs a query returning one string.
func (e *Env[Tx]) String(q string, args ...any) string {
	e.T.Helper()
	var s string
	e.InTx(func(tx Tx) error { return e.DB.QueryRow(e.Ctx, tx, q, args...).Scan(&s) })
	return s
}

// Effect is a handler that appends to effects and increments the counter.
func (e *Env[Tx]) Effect() idem.Handler[Tx] {
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		if err := e.DB.Exec(ctx, tx, `INSERT INTO effects (message_id, note) VALUES ($1, $2)`, d.Message.ID, string(d.Message.Body)); err != nil {
			return err
		}
		return e.DB.Exec(ctx, tx, `UPDATE counter SET n = n + 1 WHERE id = 'c'`)
	}
}

// CheckEffects fails unless every ID has exactly one effect row, no other
// rows exist, and the counter equals the number of IDs.
func (e *Env[Tx]) CheckEffects(ids ...string) {
	e.T.Helper()
	if n := e.Int(`SELECT count(*) FROM effects`); n != int64(len(ids)) {
		e.T.Errorf("effects: %d rows, want %d", n, len(ids))
	}
	if n := e.Int(`SELECT count(DISTINCT message_id) FROM effects`); n != int64(len(ids)) {
		e.T.Errorf("effects: %d distinct messages, want %d", n, len(ids))
	}
	if n := e.Int(`SELECT n FROM counter WHERE id = 'c'`); n != int64(len(ids)) {
		e.T.Errorf("counter: %d, want %d", n, len(ids))
	}
	for _, id := range ids {
		if n := e.Int(`SELECT count(*) FROM effects WHERE message_id = $1`, id); n != 1 {
			e.T.Errorf("message %s: %d effects, want 1", id, n)
		}
	}
}

// Inbox returns an inbox on the env's store.
func (e *Env[Tx]) Inbox(consumer string, o *idem.Options) *idem.Inbox[Tx] {
	e.T.Helper()
	in, err := idem.NewInbox(e.Store, consumer, Caps, Quiet(o))
	if err != nil {
		e.T.Fatalf("NewInbox: %v", err)
	}
	return in
}

// Quiet returns o (or new Options) with a logger that discards.
func Quiet(o *idem.Options) *idem.Options {
	if o == nil {
		o = &idem.Options{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func receive(t testing.TB, q *Queue, sub *broker.Subscription) *broker.Delivery {
	t.Helper()
	d, err := q.Receive(t.Context(), sub)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return d
}

var badNames = []string{
	"", `a"b`, "a'b", "a;b", "x; DROP TABLE effects; --", "a\x00b", "a b", "a\nb", "é", "a/b", "a`b",
	strings.Repeat("c", idem.MaxNameLen+1),
}

func testNames[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	for _, name := range badNames {
		_, err := idem.NewInbox(e.Store, name, Caps, nil)
		if !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("NewInbox(%q): err = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"orders", "orders-v2.eu:1", strings.Repeat("c", idem.MaxNameLen)} {
		if _, err := idem.NewInbox(e.Store, name, Caps, nil); err != nil {
			t.Errorf("NewInbox(%q): %v", name, err)
		}
	}
	for _, prefix := range append(badNames[1:], "1abc_", "a-b_", strings.Repeat("p", idem.MaxNameLen-5)) {
		if _, err := e.DB.Open(e.Ctx, prefix); !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("Open(prefix %q): err = %v, want ErrInvalidName", prefix, err)
		}
	}
	for _, table := range []idem.VersionTable{
		{Table: `aggs"; DROP TABLE effects; --`, IDColumn: "id", VersionColumn: "version"},
		{Table: "aggs", IDColumn: "id\x00", VersionColumn: "version"},
		{Table: "aggs", IDColumn: "id", VersionColumn: strings.Repeat("v", 64)},
		{Table: "a.b.c", IDColumn: "id", VersionColumn: "version"},
	} {
		if _, err := idem.NewInbox(e.Store, "names", Caps, Quiet(&idem.Options{Versions: table})); !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("NewInbox with Versions %+v: err = %v, want ErrInvalidName", table, err)
		}
		e.InTx(func(tx Tx) error {
			if _, err := e.Driver.CheckVersion(e.Ctx, tx, idem.VersionTable(table), "a", 1); !errors.Is(err, idem.ErrInvalidName) {
				t.Errorf("CheckVersion(%+v): err = %v, want ErrInvalidName", table, err)
			}
			return nil
		})
	}
	e.InTx(func(tx Tx) error {
		_, err := e.Driver.Transition(e.Ctx, tx, idem.StateTable{Table: "orders", IDColumn: "id", StateColumn: `status"`}, "a", "x")
		if !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("Transition with a quote in a column: err = %v, want ErrInvalidName", err)
		}
		return nil
	})
	if n := e.Int(`SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("effects table touched")
	}
}

// Migrations is the number of migrations every store applies at least
// (PostgreSQL has one more: the relay's wake flag).
const Migrations = 4

func testMigrate[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "mig_")
	want := e.Int(`SELECT count(*) FROM mig_migrations`)
	if want < Migrations {
		t.Errorf("migrations recorded: %d, want at least %d", want, Migrations)
	}
	for range 2 {
		if _, err := e.DB.Open(e.Ctx, "mig_"); err != nil {
			t.Fatalf("open again: %v", err)
		}
	}
	if n := e.Int(`SELECT count(*) FROM mig_migrations`); n != want {
		t.Errorf("migrations recorded after opening again: %d, want %d", n, want)
	}
	// Concurrent migrators of a new prefix.
	errs := make(chan error, 4)
	for range 4 {
		go func() { _, err := e.DB.Open(e.Ctx, "conc_"); errs <- err }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
	if n := e.Int(`SELECT count(*) FROM conc_migrations`); n != want {
		t.Errorf("migrations recorded by concurrent migrators: %d, want %d", n, want)
	}
	// Two prefixes are independent inboxes.
	other, err := e.DB.Open(e.Ctx, "other_")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []Driver[Tx]{e.Driver, D(other)} {
		e.InTx(func(tx Tx) error {
			c, err := st.Claim(e.Ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m1"}, At: time.Now()})
			if err == nil && !c[0].New {
				err = fmt.Errorf("claim in a fresh inbox failed")
			}
			return err
		})
	}
}

// skipTableExpiry skips the test if e's store expires inbox records by
// whole tables (see DB).
func (e *Env[Tx]) skipTableExpiry() {
	e.T.Helper()
	if x, ok := e.DB.(interface{ ExpiresByTables() bool }); ok && x.ExpiresByTables() {
		e.T.Skip("the store expires inbox records by whole tables: its own tests count them")
	}
}

// WaitFor polls cond (a database's or another process's state, which
// gives no signal) until it holds, or fails t after a minute.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

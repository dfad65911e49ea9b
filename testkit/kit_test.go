package testkit_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/testkit"
)

// recorder is a testing.TB that records the failures an assertion
// reports instead of failing the test, so that a test can check that the
// kit catches a bad handler (and fail itself when it stops catching it).
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

// Fatalf records the failure and ends the goroutine, as testing.T's does:
// call the code under test in a goroutine of its own.
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

func (r *recorder) FailNow() {
	r.Errorf("FailNow")
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

// caught fails t unless r recorded a failure containing each of want.
func (r *recorder) caught(t *testing.T, want ...string) {
	t.Helper()
	all := strings.Join(r.errs, "\n")
	if len(r.errs) == 0 {
		t.Fatal("the kit reported no failure")
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("the kit's failures lack %q:\n%s", w, all)
		}
	}
	t.Logf("the kit reported, as it should:\n%s", all)
}

// tables are the tests' own: $1 placeholders, as both stores read them
// (exec rewrites them for SQLite).
var tables = []string{
	`CREATE TABLE accounts (id TEXT PRIMARY KEY, version BIGINT NOT NULL, balance BIGINT NOT NULL)`,
	`CREATE TABLE effects (message_id TEXT NOT NULL)`,
	`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`,
}

// db is a store the kit's tests run on: a kit on a fresh one with the
// tests' tables, and its SQL, written once with $1 placeholders.
type db[Tx any] struct {
	// kit returns a kit on a fresh store, with the tests' tables.
	kit func(t *testing.T, opts *testkit.Options) *testkit.Kit[Tx]
	// exec runs q in tx; outside runs it on the database, outside any
	// transaction of the kit's (a handler's mistake).
	exec    func(ctx context.Context, tx Tx, q string, args ...any) error
	outside func(ctx context.Context, q string, args ...any) error
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// sqliteDB is the kit's zero-configuration store, SQLite.
func sqliteDB() *db[*sql.Tx] {
	var outside *sql.DB
	return &db[*sql.Tx]{
		kit: func(t *testing.T, opts *testkit.Options) *testkit.Kit[*sql.Tx] {
			t.Helper()
			st := testkit.SQLite(t)
			for _, q := range tables {
				if _, err := st.DB().ExecContext(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			outside = st.DB()
			return testkit.New(t, st, opts)
		},
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
			return err
		},
		outside: func(ctx context.Context, q string, args ...any) error {
			_, err := outside.ExecContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
			return err
		},
	}
}

// postgresDB is PostgreSQL, a fresh schema for each kit; its kit skips t
// (fails it, with WARY_REQUIRE_SERVICES=1) when the server is unreachable.
func postgresDB() *db[pgx.Tx] {
	var outside *pgxpool.Pool
	return &db[pgx.Tx]{
		kit: func(t *testing.T, opts *testkit.Options) *testkit.Kit[pgx.Tx] {
			t.Helper()
			st := testkit.Postgres(t, postgresURL(t))
			for _, q := range tables {
				if _, err := st.Pool().Exec(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			outside = st.Pool()
			return testkit.New(t, st, opts)
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		outside: func(ctx context.Context, q string, args ...any) error {
			_, err := outside.Exec(ctx, q, args...)
			return err
		},
	}
}

// deposits returns versions 1..n of each account, depositing 10*version.
func deposits(accounts []string, n int) []testkit.Event {
	var evs []testkit.Event
	for _, a := range accounts {
		for v := int64(1); v <= int64(n); v++ {
			evs = append(evs, testkit.Event{AggregateID: a, Version: v, Type: "deposited", Body: []byte(strconv.FormatInt(10*v, 10))})
		}
	}
	return evs
}

// accounts is the ledger's state table, whose versions the kit's inbox
// checks (Options.Versions).
var accounts = idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"}

// versioned returns opts with version checks on accounts.
func versioned(opts *testkit.Options) *testkit.Options {
	var o testkit.Options
	if opts != nil {
		o = *opts
	}
	o.Versions = accounts
	return &o
}

// ledger is a correct handler for a kit with version checks on accounts:
// every write through tx, after the version check.
func (s *db[Tx]) ledger(ctx context.Context, tx Tx, d *broker.Delivery) error {
	ev, err := idem.ParseEvent(d.Message)
	if err != nil {
		return err
	}
	amount, err := strconv.Atoi(string(d.Message.Body))
	if err != nil {
		return broker.Permanent(err)
	}
	if err := s.exec(ctx, tx, `INSERT INTO effects (message_id) VALUES ($1)`, d.Message.ID); err != nil {
		return err
	}
	if ev.Version == 1 {
		return s.exec(ctx, tx, `INSERT INTO accounts (id, version, balance) VALUES ($1, 1, $2)`, ev.AggregateID, amount)
	}
	return s.exec(ctx, tx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, amount, ev.AggregateID)
}

const effectsQuery = `SELECT message_id FROM effects`

// TestVersionedHandlerPasses: a correct handler behind the kit's version
// checks passes under every fault, on every profile and both stores, and
// each fault happened.
func TestVersionedHandlerPasses(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { versionedHandlerPasses(t, sqliteDB()) })
	t.Run("postgres", func(t *testing.T) { versionedHandlerPasses(t, postgresDB()) })
}

func versionedHandlerPasses[Tx any](t *testing.T, s *db[Tx]) {
	ids := []string{"acct-A", "acct-B", "acct-C", "acct-D"}
	for _, p := range []memory.Profile{memory.Queue, memory.Partitioned, memory.SQSFIFO, memory.ServiceBus} {
		t.Run(string(p), func(t *testing.T) {
			kit := s.kit(t, versioned(&testkit.Options{Profile: p}))
			evs := deposits(ids, 4)
			rep := kit.Run(s.ledger, evs...)
			t.Log(rep)
			n := len(evs)
			if p == memory.Queue {
				// No order: gaps are held in the store (idem.GapsAuto)
				// and applied after their predecessor, in its
				// transaction, where no ack is lost.
				if rep.Results[idem.ResultEarly] == 0 || rep.Results[idem.ResultApplied]+rep.Results[idem.ResultEarly] != n ||
					rep.Results[idem.ResultGapRetried] != 0 || rep.CrashesBeforeCommit != n {
					t.Errorf("results %v, crashes before commit %d: want some early, %d applied or early, no gap retried, %d crashes",
						rep.Results, rep.CrashesBeforeCommit, n, n)
				}
			} else {
				if rep.Published != 2*n || rep.CrashesBeforeCommit != n || rep.CrashesAfterCommit != n || rep.Late == 0 {
					t.Errorf("published %d, crashes %d before and %d after commit, %d late: want %d, %d, %d, some",
						rep.Published, rep.CrashesBeforeCommit, rep.CrashesAfterCommit, rep.Late, 2*n, n, n)
				}
				// Each ID: one applied, its copy and the redelivery after
				// the lost ack dropped as duplicates.
				if rep.Results[idem.ResultApplied] != n || rep.Results[idem.ResultDuplicate] != 2*n {
					t.Errorf("results %v: want %d applied, %d duplicates", rep.Results, n, 2*n)
				}
			}
			if len(rep.Failures)+len(rep.Parked)+len(rep.Early)+len(rep.DeadLetters) != 0 {
				t.Errorf("failures, park, early events or dead letters:\n%s", rep)
			}
			kit.AssertOnce(t, kit.CountRows(effectsQuery))
			kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`,
				"acct-A 4 100", "acct-B 4 100", "acct-C 4 100", "acct-D 4 100")
		})
	}
}

// TestWriteOutsideTransactionCaught: a handler that writes its effect
// through the database instead of its tx fails AssertOnce, which names
// the cause. On SQLite the write finds the database locked by the inbox's
// transaction, and the kit dead-letters the message; on PostgreSQL it
// commits on its own, and stays when the kit rolls the handler's
// transaction back.
func TestWriteOutsideTransactionCaught(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		rep, rec := writeOutside(t, sqliteDB())
		if len(rep.DeadLetters) == 0 {
			t.Errorf("nothing dead-lettered:\n%s", rep)
		}
		rec.caught(t, `effect "acct-A/1" happened 0 times, want once`, "outside the transaction it is given")
	})
	t.Run("postgres", func(t *testing.T) {
		_, rec := writeOutside(t, postgresDB())
		rec.caught(t, `effect "acct-A/1" happened 2 times, want once`, "an effect written outside the transaction it is given stays")
	})
}

func writeOutside[Tx any](t *testing.T, s *db[Tx]) (*testkit.Report, *recorder) {
	kit := s.kit(t, nil)
	bad := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return s.outside(ctx, `INSERT INTO effects (message_id) VALUES ($1)`, d.Message.ID)
	}
	rep := kit.Run(bad, deposits([]string{"acct-A", "acct-B"}, 2)...)
	rec := &recorder{TB: t}
	kit.AssertOnce(rec, kit.CountRows(effectsQuery))
	return rep, rec
}

// TestEffectOutsideDatabaseCaught: a handler whose effect is outside its
// transaction (here a map, as an e-mail or an HTTP call would be) fails
// AssertOnce through the crash before commit; without that fault it passes,
// which is why the fault is on by default.
func TestEffectOutsideDatabaseCaught(t *testing.T) {
	s := sqliteDB()
	for _, noCrash := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoCrashBeforeCommit=%v", noCrash), func(t *testing.T) {
			kit := s.kit(t, &testkit.Options{NoCrashBeforeCommit: noCrash})
			sent := map[string]int{}
			mail := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
				sent[d.Message.ID]++ // not undone by a rollback
				return nil
			}
			kit.Run(mail, deposits([]string{"acct-A", "acct-B"}, 2)...)
			rec := &recorder{TB: t}
			kit.AssertOnce(rec, func(context.Context) (map[string]int, error) { return sent, nil })
			if noCrash {
				if rec.Failed() {
					t.Errorf("without the crash before commit, the kit failed: %v", rec.errs)
				}
				return
			}
			rec.caught(t, `effect "acct-A/1" happened 2 times, want once`, "an effect written outside the transaction it is given stays")
		})
	}
}

// TestStaleOverNewerCaught: a handler without version checks applies
// whatever comes last; under reorders a stale event overwrites newer state,
// and AssertRows sees it, on both stores. Without reorders it passes.
func TestStaleOverNewerCaught(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { staleOverNewer(t, sqliteDB()) })
	t.Run("postgres", func(t *testing.T) { staleOverNewer(t, postgresDB()) })
}

func staleOverNewer[Tx any](t *testing.T, s *db[Tx]) {
	ids := []string{"order-1", "order-2", "order-3", "order-4"}
	var evs []testkit.Event
	var want []string
	for _, id := range ids {
		evs = append(evs, testkit.Event{AggregateID: id, Version: 1, Type: "placed"}, testkit.Event{AggregateID: id, Version: 2, Type: "confirmed"})
		want = append(want, id+" confirmed")
	}
	status := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		return s.exec(ctx, tx, `INSERT INTO orders (id, status) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET status = excluded.status`,
			d.Message.Headers.Get(idem.HeaderAggregateID), d.Message.Headers.Get(idem.HeaderType))
	}
	for _, noReorder := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoReorder=%v", noReorder), func(t *testing.T) {
			kit := s.kit(t, &testkit.Options{NoReorder: noReorder})
			rep := kit.Run(status, evs...)
			kit.AssertOnce(t, kit.CountRows(`SELECT id FROM orders`), ids...) // one row each: the inbox is not the problem
			rec := &recorder{TB: t}
			kit.AssertRows(rec, `SELECT id, status FROM orders ORDER BY id`, want...)
			if noReorder {
				if rec.Failed() || rep.Late != 0 {
					t.Errorf("in order, the kit failed (%d late): %v", rep.Late, rec.errs)
				}
				return
			}
			rec.caught(t, " placed\n")
		})
	}
}

// TestParkVisibleAndReplayable: a gap that stays open, where gaps are
// retried through the broker, is parked, with what comes behind it held;
// the report shows the park, AssertOnce names it, and the inbox replays it
// with the same handler.
func TestParkVisibleAndReplayable(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { parkVisible(t, sqliteDB()) })
	t.Run("postgres", func(t *testing.T) { parkVisible(t, postgresDB()) })
}

func parkVisible[Tx any](t *testing.T, s *db[Tx]) {
	kit := s.kit(t, versioned(&testkit.Options{MaxAttempts: 3, Gaps: idem.GapsRetry}))
	evs := deposits([]string{"acct-A"}, 3)
	rep := kit.Run(s.ledger, evs[0], evs[2]) // version 2 is late
	if len(rep.Parked) != 1 || rep.Parked[0].MessageID != "acct-A/3" || rep.Results[idem.ResultParked] != 1 {
		t.Fatalf("want acct-A/3 parked:\n%s", rep)
	}
	if !strings.Contains(rep.String(), `parked: acct-A/3 (aggregate "acct-A" version 3)`) {
		t.Errorf("the report does not name the parked message and its aggregate:\n%s", rep)
	}
	rec := &recorder{TB: t}
	kit.AssertOnce(rec, kit.CountRows(effectsQuery))
	rec.caught(t, `effect "acct-A/3" happened 0 times`, "it is parked", "Kit.Inbox().Replay")

	rep = kit.Run(s.ledger, evs[1]) // held behind the parked version 3
	if len(rep.Parked) != 2 || rep.Results[idem.ResultHeld] != 1 {
		t.Fatalf("want acct-A/2 held behind acct-A/3:\n%s", rep)
	}
	res, err := kit.Inbox().Replay(t.Context(), "acct-A", s.ledger)
	if err != nil || res.Replayed != 2 || res.Remaining != 0 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	kit.AssertOnce(t, kit.CountRows(effectsQuery))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts`, "acct-A 3 60")
}

// TestGapNeverClosesShown: a gap that never closes, where gaps are held in
// the store (the default on the Queue profile), ends with the early event
// held, not parked: the report names it and its aggregate, and AssertOnce
// says so. A later Run that delivers the missing event applies it.
func TestGapNeverClosesShown(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { gapNeverCloses(t, sqliteDB()) })
	t.Run("postgres", func(t *testing.T) { gapNeverCloses(t, postgresDB()) })
}

func gapNeverCloses[Tx any](t *testing.T, s *db[Tx]) {
	kit := s.kit(t, versioned(nil))
	evs := deposits([]string{"acct-A", "acct-B"}, 3)
	rep := kit.Run(s.ledger, evs[0], evs[2], evs[3], evs[4], evs[5]) // acct-A's version 2 never comes
	want := testkit.Early{MessageID: "acct-A/3", AggregateID: "acct-A", Version: 3, Applied: 1}
	if len(rep.Early) != 1 || rep.Early[0] != want || len(rep.Parked) != 0 {
		t.Fatalf("want only %+v held early, nothing parked:\n%s", want, rep)
	}
	if !strings.Contains(rep.String(), `early: acct-A/3 held as an early event: aggregate "acct-A" is at version 1, and version 2 never came`) {
		t.Errorf("the report does not name the held event and its aggregate:\n%s", rep)
	}
	t.Log(rep)
	rec := &recorder{TB: t}
	kit.AssertOnce(rec, kit.CountRows(effectsQuery), "acct-A/1", "acct-A/3", "acct-B/1", "acct-B/2", "acct-B/3")
	rec.caught(t, `effect "acct-A/3" happened 0 times`, `it is held as an early event: aggregate "acct-A" is at version 1, and version 2 never came`)
	if strings.Contains(strings.Join(rec.errs, "\n"), "acct-B") {
		t.Errorf("the kit blames acct-B, whose events all applied: %v", rec.errs)
	}

	rep = kit.Run(s.ledger, evs[1]) // the gap closes
	if len(rep.Early)+len(rep.Parked) != 0 {
		t.Errorf("after version 2 came, still held or parked:\n%s", rep)
	}
	kit.AssertOnce(t, kit.CountRows(effectsQuery))
	kit.AssertRows(t, `SELECT id, version, balance FROM accounts ORDER BY id`, "acct-A 3 60", "acct-B 3 60")
}

// TestDeterministic: the same seed gives the same run; another seed
// another order.
func TestDeterministic(t *testing.T) {
	s := sqliteDB()
	run := func(seed uint64) *testkit.Report {
		kit := s.kit(t, versioned(&testkit.Options{Seed: seed}))
		return kit.Run(s.ledger, deposits([]string{"acct-A", "acct-B", "acct-C"}, 3)...)
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a.Order, b.Order) || a.String() != b.String() {
		t.Errorf("seed 7 twice:\n%v\n%s\n%v\n%s", a.Order, a, b.Order, b)
	}
	if slices.Equal(a.Order, c.Order) {
		t.Errorf("seeds 7 and 8 give the same order %v", a.Order)
	}
}

// TestUnexpectedEffect: an effect for a key nobody expects fails
// AssertOnce; a plain message (no aggregate) is delivered as given.
func TestUnexpectedEffect(t *testing.T) {
	kit := sqliteDB().kit(t, &testkit.Options{NoDuplicates: true})
	twice := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO effects (message_id) VALUES (?), (?)`, d.Message.ID, d.Message.ID+"-extra")
		return err
	}
	rep := kit.Run(twice, testkit.Event{ID: "m-1", Body: []byte("x")})
	if rep.Results[idem.ResultApplied] != 1 {
		t.Fatalf("want m-1 applied:\n%s", rep)
	}
	rec := &recorder{TB: t}
	kit.AssertOnce(rec, kit.CountRows(effectsQuery))
	rec.caught(t, `effect "m-1-extra" happened once, want none`)
}

// TestEventErrors: an event the kit cannot publish fails the test
// (FailNow) with the reason.
func TestEventErrors(t *testing.T) {
	for _, c := range []struct {
		ev  testkit.Event
		why string
	}{
		{testkit.Event{Body: []byte("x")}, "event 0 (\"\"): no ID"},
		{testkit.Event{ID: "x", Version: 2}, "version 2 without an AggregateID"},
		{testkit.Event{AggregateID: "a"}, "no ID"},
		{testkit.Event{ID: "bad\nid"}, "invalid"},
	} {
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() { // FailNow ends this goroutine
			defer close(done)
			kit := testkit.New(rec, testkit.SQLite(rec), nil)
			kit.Run(func(context.Context, *sql.Tx, *broker.Delivery) error { return nil }, c.ev)
			rec.Errorf("Run returned")
		}()
		<-done
		rec.caught(t, c.why)
	}
}

// TestInvalidVersions: a version table the inbox refuses fails the test
// (FailNow) when the kit is built.
func TestInvalidVersions(t *testing.T) {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() { // FailNow ends this goroutine
		defer close(done)
		testkit.New(rec, testkit.SQLite(rec), &testkit.Options{Versions: idem.VersionTable{Table: "accounts; DROP TABLE x", IDColumn: "id", VersionColumn: "version"}})
		rec.Errorf("New returned")
	}()
	<-done
	rec.caught(t, "testkit: create the inbox", "Options.Versions")
}

// TestExampleLedger runs the package example's test (example_test.go).
func TestExampleLedger(t *testing.T) { testLedger(t) }

// TestTestingDoc: docs/testing.md's Go code is postgres_test.go, byte for
// byte, so that it compiles and runs here; it has no other Go block.
func TestTestingDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- a PostgreSQL handler's test: kept in sync by testkit TestTestingDoc -->\n```go\n"
	_, block, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("docs/testing.md lacks %q", marker)
	}
	block, _, _ = strings.Cut(block, "```\n")
	src, err := os.ReadFile("postgres_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(src) {
		t.Errorf("docs/testing.md shows\n%s\npostgres_test.go is\n%s", block, src)
	}
	if n := strings.Count(string(doc), "```go"); n != 1 {
		t.Errorf("docs/testing.md has %d Go blocks: each must be a file that compiles, kept in sync here", n)
	}
}

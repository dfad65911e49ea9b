package mysql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/outbox"
)

// maxPacket reads the server's max_allowed_packet.
func maxPacket(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT @@max_allowed_packet").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An outbox message whose row exceeds max_allowed_packet fails Add with
// ErrTooLarge before anything is sent; the adding transaction goes on, its
// other rows (one group of rows that together exceed the packet, each of
// which fits) are added and relayed, nothing lost.
func TestAddTooLarge(t *testing.T) {
	tdb := newTestDB(t, newDatabase(t, nil))
	db := tdb.db
	e := idemtest.SetupOutbox(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb })
	packet := maxPacket(t, db)
	big := bytes.Repeat([]byte("x"), packet)
	fits := bytes.Repeat([]byte("y"), packet/8) // eight of them exceed the packet together
	var many []*outbox.Message
	for i := range 12 {
		many = append(many, &outbox.Message{ID: fmt.Sprintf("m-%d", i), AggregateID: "a", Version: int64(i + 1), Type: "t", Payload: fits})
	}
	e.InTx(func(tx *sql.Tx) error {
		_, err := e.Outbox.Add(e.Ctx, tx, &outbox.Message{ID: "big", AggregateID: "b", Version: 1, Type: "t", Payload: big})
		if !errors.Is(err, mysql.ErrTooLarge) {
			t.Errorf("Add of a row over max_allowed_packet (%d bytes): %v, want ErrTooLarge", packet, err)
		}
		seqs, err := e.Outbox.Add(e.Ctx, tx, many...)
		if err != nil {
			return err
		}
		if len(seqs) != len(many) || seqs[0] != 1 || seqs[len(seqs)-1] != int64(len(many)) {
			t.Errorf("sequences %v, want 1 to %d", seqs, len(many))
		}
		return nil
	})
	rows := e.Rows(outbox.Filter{NoPayload: true})
	if len(rows) != len(many) {
		t.Fatalf("%d rows in the outbox, want %d", len(rows), len(many))
	}
	for i, r := range rows {
		if r.ID != many[i].ID || r.Sequence != int64(i+1) {
			t.Errorf("row %d: %s:%d, want %s:%d", i, r.ID, r.Sequence, many[i].ID, i+1)
		}
	}
}

// A handler whose statement waits for a lock past innodb_lock_wait_timeout
// (error 1205) fails with an error the store calls a conflict; the inbox
// tries the delivery again at once instead of nacking it, and the second
// attempt applies it. ErrConflict matches the store's own statements'
// lock errors.
func TestLockWaitRetried(t *testing.T) {
	tdb := newTestDB(t, newDatabase(t, map[string]string{"innodb_lock_wait_timeout": "1"}))
	db := tdb.db
	e := idemtest.Setup(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb }, "")
	in := e.Inbox("locks", nil)
	q := idemtest.NewQueue(idemtest.Caps)
	sub := q.Subscription(nil)
	q.Push(idemtest.Msg("m1", "x", "", 0))

	// Another transaction holds the counter's row until the first
	// attempt has failed.
	blocker, err := db.BeginTx(e.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	if _, err := blocker.ExecContext(e.Ctx, "UPDATE counter SET n = n + 100 WHERE id = 'c'"); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	var first error
	h := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = 'c'")
		if attempts.Add(1) == 1 {
			first = err
			_ = blocker.Rollback()
		}
		return err
	}
	d, err := q.Receive(e.Ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	r, err := in.Handle(e.Ctx, d, h)
	if r != idem.ResultApplied || err != nil {
		t.Fatalf("Handle: %v, %v; want applied", r, err)
	}
	if attempts.Load() != 2 || first == nil {
		t.Errorf("%d attempts, the first failing with %v; want 2, the first a lock wait timeout", attempts.Load(), first)
	}
	if n := e.Int("SELECT n FROM counter WHERE id = 'c'"); n != 1 {
		t.Errorf("counter %d, want 1", n)
	}
	if q.Nacks("m1") != 0 {
		t.Errorf("the delivery was nacked %d times", q.Nacks("m1"))
	}

	// The store's own statement: a claim of a message another transaction
	// is claiming waits for it and times out.
	holder, err := db.BeginTx(e.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(e.Ctx, "INSERT INTO wary_inbox (consumer, message_id, processed_at) VALUES ('locks', 'm2', 0)"); err != nil {
		t.Fatal(err)
	}
	q.Push(idemtest.Msg("m2", "x", "", 0))
	d, err = q.Receive(e.Ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.Handle(e.Ctx, d, h)
	if !errors.Is(err, mysql.ErrConflict) {
		t.Errorf("a claim that waited for another transaction's: %v, want ErrConflict", err)
	}
}

// The store's transactions are READ COMMITTED whatever the connections'
// level: REPEATABLE READ (MariaDB's default) set per transaction (New) or
// once per connection of the transaction pool (Open), or the DSN's READ
// COMMITTED as it is. The handler reads a row, another transaction
// changes it and commits, and the handler reads it again: it sees the
// change (REPEATABLE READ would show the first read's snapshot).
func TestReadCommitted(t *testing.T) {
	for name, params := range map[string]map[string]string{
		"default":        nil,
		"read committed": {"tx_isolation": "'READ-COMMITTED'"},
	} {
		for _, open := range []string{"Open", "New"} {
			t.Run(name+"/"+open, func(t *testing.T) { testReadCommitted(t, params, open == "New") })
		}
	}
}

func testReadCommitted(t *testing.T, params map[string]string, ofNew bool) {
	tdb := newTestDB(t, newDatabase(t, params))
	if ofNew {
		tdb.dsn = ""
	}
	db := tdb.db
	e := idemtest.Setup(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb }, "")
	in := e.Inbox("iso", nil)
	q := idemtest.NewQueue(idemtest.Caps)
	sub := q.Subscription(nil)
	q.Push(idemtest.Msg("m1", "x", "", 0))
	d, err := q.Receive(e.Ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	var before, after int64
	_, err = in.Handle(e.Ctx, d, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		if err := tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 'c'").Scan(&before); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "UPDATE counter SET n = n + 10 WHERE id = 'c'"); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 'c'").Scan(&after)
	})
	if err != nil || after != before+10 {
		t.Errorf("the handler read %d, then %d after another transaction added 10 (%v): want READ COMMITTED", before, after, err)
	}
}

// An outbox row larger than the server sends (max_allowed_packet; here a
// smaller limit stands for it) is not read: the claim hands the relay the
// row without its payload and with the reason, the relay quarantines it
// and holds its aggregate behind it, and publishes every other aggregate's
// rows. The row stays in the table, payload and all.
func TestUnreadableRowQuarantined(t *testing.T) {
	db := openDB(t, nil)
	const limit = 256 << 10
	o := &mysql.Options{Logger: quiet}
	mysql.SetReadLimit(o, limit)
	st, err := mysql.New(t.Context(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), limit)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Add(t.Context(), tx,
		&outbox.Message{ID: "big", AggregateID: "a", Version: 1, Type: "t", Payload: big},
		&outbox.Message{ID: "after-big", AggregateID: "a", Version: 2, Type: "t", Payload: []byte("1")},
		&outbox.Message{ID: "other", AggregateID: "b", Version: 1, Type: "t", Payload: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	b := outboxBroker(t)
	sub := b.Subscribe(t)
	r, err := outbox.NewRelay(st, b.Topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Drain(t.Context()); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	got := idemtest.Drain(t, sub)
	if len(got) != 1 || got[0].ID != "other" {
		t.Errorf("published %d messages (%v), want only aggregate b's", len(got), got)
	}
	rows, err := idemtest.D[*sql.Tx](st).ListOutbox(t.Context(), outbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		switch row.ID {
		case "big":
			if row.State != outbox.Quarantined || !strings.Contains(row.LastError, "max_allowed_packet") || len(row.Payload) != limit {
				t.Errorf("the big row: %s, %q, %d bytes; want quarantined with the reason, its payload kept", row.State, row.LastError, len(row.Payload))
			}
		case "after-big":
			if row.State != outbox.Pending {
				t.Errorf("the row behind the big one: %s, want pending", row.State)
			}
		}
	}
}

// Two deliveries whose handlers lock the same two rows in opposite orders
// deadlock; InnoDB rolls one transaction back (error 1213), which the
// store calls a conflict: the inbox tries that delivery again at once,
// and both are applied, neither nacked. (It also found the inbox's purge,
// which ran at the first delivery, waiting for the first claim's
// uncommitted row for innodb_lock_wait_timeout and holding the second
// delivery behind it: the purge no longer waits; see translate.)
func TestDeadlockRetried(t *testing.T) {
	tdb := newTestDB(t, newDatabase(t, nil))
	e := idemtest.Setup(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb }, "")
	e.Exec(`INSERT INTO counter (id, n) VALUES ('d', 0)`)
	in := e.Inbox("deadlock", nil)
	q := idemtest.NewQueue(idemtest.Caps)
	sub := q.Subscription(nil)
	q.Push(idemtest.Msg("m1", "c,d", "", 0), idemtest.Msg("m2", "d,c", "", 0))
	var attempts atomic.Int32
	var firstLocked sync.WaitGroup // both first attempts hold their first row
	firstLocked.Add(2)
	h := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		first, second, _ := strings.Cut(string(d.Message.Body), ",")
		n := attempts.Add(1)
		if _, err := tx.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = ?", first); err != nil {
			return err
		}
		if n <= 2 {
			firstLocked.Done()
			firstLocked.Wait()
		}
		_, err := tx.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = ?", second)
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	results := make([]idem.Result, 2)
	for i := range 2 {
		d, err := q.Receive(e.Ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { results[i], errs[i] = in.Handle(e.Ctx, d, h) })
	}
	wg.Wait()
	for i := range 2 {
		if results[i] != idem.ResultApplied || errs[i] != nil {
			t.Errorf("delivery %d: %v, %v; want applied", i, results[i], errs[i])
		}
	}
	if got := attempts.Load(); got != 3 {
		t.Errorf("%d attempts, want 3: the deadlock's victim tried once more", got)
	}
	if n := e.Int("SELECT SUM(n) FROM counter WHERE id IN ('c', 'd')"); n != 4 {
		t.Errorf("counters sum to %d, want 4", n)
	}
	if q.Nacks("m1")+q.Nacks("m2") != 0 {
		t.Errorf("nacked: m1 %d, m2 %d", q.Nacks("m1"), q.Nacks("m2"))
	}
	if s := in.Stats(); s.Conflicts < 1 {
		t.Errorf("Stats.Conflicts %d, want at least 1", s.Conflicts)
	}
}

// The inbox's purge does not wait for a claim not yet committed: it reads
// the expired records' keys without locking and deletes those, so a
// transaction that holds a new claim (of the same consumer, after the
// expired ones in the index) does not hold the purge, nor the deliveries
// behind it, for innodb_lock_wait_timeout (here 1 s: a wait fails it).
func TestPurgeSkipsUncommittedClaims(t *testing.T) {
	tdb := newTestDB(t, newDatabase(t, map[string]string{"innodb_lock_wait_timeout": "1"}))
	db := tdb.db
	e := idemtest.Setup(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb }, "")
	old := time.Now().Add(-48 * time.Hour)
	e.Exec(`INSERT INTO wary_inbox (consumer, message_id, processed_at) VALUES ('p', 'old-1', $1), ('p', 'old-2', $1)`, old.UnixMicro())
	holder, err := db.BeginTx(e.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(e.Ctx, "INSERT INTO wary_inbox (consumer, message_id, processed_at) VALUES ('p', 'new', ?)", time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	n, err := e.Driver.Purge(e.Ctx, "p", time.Now().Add(-24*time.Hour), 100)
	if err != nil || n != 2 {
		t.Fatalf("Purge beside an uncommitted claim: %d, %v; want the 2 expired records", n, err)
	}
}

// A shared transaction's claim (idem.Options.Batch) inserts its IDs in
// the order given (message-ID order), so that concurrent shared
// transactions cannot deadlock on each other's claims; the statement
// states no ORDER BY, which would sort the IDs in a temporary table, and
// relies on JSON_TABLE yielding them in the array's order and on the
// INSERT ... SELECT inserting each row as it reads it. Here the claim
// of m1, m2, m3 waits for another transaction's uncommitted claim of m2:
// it holds m1 (a third transaction's claim of m1 times out) and has not
// reached m3 (the third's claim of m3 goes through at once). When m2's
// holder rolls back, the claim goes on: m1 and m2 are its, m3 the third's.
func TestClaimManyInOrder(t *testing.T) {
	tdb := newTestDB(t, newDatabase(t, map[string]string{"innodb_lock_wait_timeout": "1"}))
	db := tdb.db
	e := idemtest.Setup(t, func(testing.TB) idemtest.DB[*sql.Tx] { return tdb }, "")
	claim := func(tx *sql.Tx, ids ...string) ([]seam.Claimed, error) {
		return e.Driver.Claim(e.Ctx, tx, seam.ClaimRequest{Consumer: "order", IDs: ids, At: time.Now()})
	}
	holder, err := db.BeginTx(e.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	// A plain INSERT: a record lock on m2 only (the store's claim of one
	// message, an upsert, would lock the gap before it too).
	if _, err := holder.ExecContext(e.Ctx, "INSERT INTO wary_inbox (consumer, message_id, processed_at) VALUES ('order', 'm2', 0)"); err != nil {
		t.Fatal(err)
	}
	many, err := e.Driver.Begin(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Driver.Rollback(e.Ctx, many)
	type outcome struct {
		got []seam.Claimed
		err error
	}
	// The third transaction's waits time out after 1 s (the DSN's); the
	// claim of many must outlast them.
	if _, err := many.ExecContext(e.Ctx, "SET SESSION innodb_lock_wait_timeout = 60"); err != nil {
		t.Fatal(err)
	}
	var conn int64
	if err := many.QueryRowContext(e.Ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
		t.Fatal(err)
	}
	done := make(chan outcome, 1)
	go func() {
		got, err := claim(many, "m1", "m2", "m3")
		done <- outcome{got, err}
	}()
	// The claim of many is waiting for m2's lock once InnoDB lists its
	// connection's lock wait (or it failed, which done says). InnoDB
	// refreshes what INNODB_TRX shows only when it was not read for 0.1 s
	// (MySQL's manual, "Persistence and Consistency of InnoDB Transaction
	// and Locking Information"): asked more often, it showed the snapshot
	// from before the wait until the claim timed out.
	waiting := fmt.Sprintf("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id = %d", conn)
	for e.Int(waiting) == 0 {
		select {
		case o := <-done:
			t.Fatalf("the claim of m1, m2, m3 did not wait for m2's holder: %v, %v", o.got, o.err)
		case <-time.After(150 * time.Millisecond):
		}
	}
	third, err := db.BeginTx(e.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Rollback()
	if _, err := claim(third, "m1"); !errors.Is(err, mysql.ErrConflict) && !isLockWait(err) {
		t.Errorf("claim of m1 beside the waiting claim: %v; want a lock wait timeout (m1 inserted before m2)", err)
	}
	if got, err := claim(third, "m3"); err != nil || !got[0].New {
		t.Errorf("claim of m3 beside the waiting claim: %v, %v; want it new at once (m3 not reached)", got, err)
	}
	if err := third.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || len(o.got) != 3 || !o.got[0].New || !o.got[1].New || o.got[2].New {
		t.Errorf("the claim of m1, m2, m3 after m2's holder rolled back: %v, %v; want m1 and m2 new, m3 the third's", o.got, o.err)
	}
}

// isLockWait reports whether err is InnoDB's lock wait timeout (1205).
func isLockWait(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/mysql"
)

// The store of Open begins its transactions on a pool of its own whose
// connections have autocommit off and READ COMMITTED set when they
// connect: beginning sends nothing, the first statement begins the
// transaction. These tests check what that must not break.

// openImplicit opens a store with Open on a fresh database (the server's
// default REPEATABLE READ) whose transaction pool has one connection, so
// that each transaction reuses the previous one's; it returns the store,
// its driver and the test's own pool on the same database.
func openImplicit(t *testing.T, dsn string) (*mysql.Store, idemtest.Driver[*sql.Tx], *sql.DB) {
	t.Helper()
	st, err := mysql.Open(t.Context(), dsn, &mysql.Options{Logger: quiet, TxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db := openDSN(t, dsn)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE effects (message_id VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return st, idemtest.D[*sql.Tx](st), db
}

// inboxOn returns an inbox of consumer on st and the queue it takes
// deliveries from.
func inboxOn(t *testing.T, st *mysql.Store, consumer string) (*idem.Inbox[*sql.Tx], *idemtest.Queue, *broker.Subscription) {
	t.Helper()
	in, err := idem.NewInbox[*sql.Tx](st, consumer, idemtest.Caps, idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	q := idemtest.NewQueue(idemtest.Caps)
	return in, q, q.Subscription(nil)
}

// openDSN opens dsn for t.
func openDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// session is what a transaction's first statement finds of its
// connection: whether a transaction was open already (MariaDB's
// @@in_transaction; reading it begins none), autocommit, the level, the
// connection's ID.
type session struct {
	inTx, autocommit int
	level            string
	id               int64
}

func readSession(t *testing.T, tx *sql.Tx) session {
	t.Helper()
	var s session
	err := tx.QueryRowContext(t.Context(), "SELECT @@in_transaction, @@autocommit, @@tx_isolation, CONNECTION_ID()").
		Scan(&s.inTx, &s.autocommit, &s.level, &s.id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// locked reports whether another connection holds a lock on a row of
// effects (or on an insert into it not yet committed): a locking read
// from db that waits for none fails at once.
func locked(t *testing.T, db *sql.DB) bool {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(t.Context(), "SELECT message_id FROM effects FOR UPDATE NOWAIT")
	if err != nil {
		return true
	}
	rows.Close()
	return rows.Err() != nil
}

// idle begins a transaction through the store's driver d and returns
// what its first statement finds of the connection, then rolls it back.
func idle(t *testing.T, d idemtest.Driver[*sql.Tx]) session {
	t.Helper()
	tx, err := d.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Rollback(t.Context(), tx)
	return readSession(t, tx)
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A connection of the transaction pool is reused clean after a commit and
// after a rollback: no transaction left open (no lock held, and none open
// as the next transaction's first statement finds it), the committed row seen,
// the rolled back one nowhere; autocommit off and READ COMMITTED kept
// (database/sql's session reset sends nothing that would reset them).
func TestImplicitReuse(t *testing.T) {
	_, d, db := openImplicit(t, newDatabase(t, nil))
	ctx := t.Context()
	run := func(row string, commit bool) session {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := readSession(t, tx)
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id) VALUES (?)", row); err != nil {
			t.Fatal(err)
		}
		if !locked(t, db) {
			t.Errorf("%s: the insert not yet committed holds no lock", row)
		}
		end := d.Rollback
		if commit {
			end = d.Commit
		}
		if err := end(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if locked(t, db) {
			t.Errorf("%s: a lock held after the transaction ended", row)
		}
		return s
	}
	first := run("committed", true)
	second := run("rolled back", false)
	third := run("after", true)
	for i, s := range []session{first, second, third} {
		if s.inTx != 0 || s.autocommit != 0 || s.level != "READ-COMMITTED" {
			t.Errorf("transaction %d began on a session with in_transaction %d, autocommit %d, %s; want 0, 0, READ-COMMITTED", i+1, s.inTx, s.autocommit, s.level)
		}
		if s.id != first.id {
			t.Errorf("transaction %d on connection %d, want the pool's one connection %d", i+1, s.id, first.id)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM effects WHERE message_id = 'committed'"); n != 1 {
		t.Errorf("committed row: %d, want 1", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM effects WHERE message_id = 'rolled back'"); n != 0 {
		t.Errorf("rolled back row: %d, want 0", n)
	}
}

// The transaction pool refuses what its sessions cannot give: another
// isolation level than READ COMMITTED, read only; New, which has no
// transaction pool, refuses TxConns.
func TestImplicitRefusesOptions(t *testing.T) {
	st, _, _ := openImplicit(t, newDatabase(t, nil))
	pool := mysql.TxPool(st)
	for _, o := range []*sql.TxOptions{
		{Isolation: sql.LevelRepeatableRead},
		{Isolation: sql.LevelSerializable},
		{ReadOnly: true},
	} {
		if tx, err := pool.BeginTx(t.Context(), o); err == nil {
			tx.Rollback()
			t.Errorf("BeginTx(%+v) succeeded, want refused", *o)
		}
	}
	if _, err := mysql.New(t.Context(), openDB(t, nil), &mysql.Options{Logger: quiet, TxConns: 4}); err == nil {
		t.Errorf("New with TxConns succeeded, want refused: it has no transaction pool")
	}
	for _, o := range []*sql.TxOptions{nil, {Isolation: sql.LevelReadCommitted}} {
		tx, err := pool.BeginTx(t.Context(), o)
		if err != nil {
			t.Fatalf("BeginTx(%v): %v", o, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// An inbox transaction that fails after its claim and its effect (a
// handler error, a panic, the handler's context canceled while a
// statement waits for a lock) leaves neither the claim nor the effect,
// and the transaction pool's connection serves the message again, clean:
// it is applied once.
func TestImplicitFailures(t *testing.T) {
	for _, c := range []string{"error", "panic", "cancel"} {
		t.Run(c, func(t *testing.T) { testImplicitFailure(t, c) })
	}
}

func testImplicitFailure(t *testing.T, how string) {
	st, sd, db := openImplicit(t, newDatabase(t, map[string]string{"innodb_lock_wait_timeout": "20"}))
	ctx := t.Context()
	in, q, sub := inboxOn(t, st, "fail")
	q.Push(idemtest.Msg("m1", "x", "", 0))
	d, err := q.Receive(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE locked (id INT PRIMARY KEY, n INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO locked VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	var conn int64
	_, err = in.Handle(ctx, d, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id) VALUES (?)", d.Message.ID); err != nil {
			return err
		}
		switch how {
		case "error":
			return errors.New("handler failed")
		case "panic":
			panic("handler panicked")
		}
		return cancelWhileLocked(t, db, tx, conn)
	})
	if err == nil {
		t.Fatal("Handle succeeded, want the handler's failure")
	}
	if n := count(t, db, "SELECT COUNT(*) FROM effects"); n != 0 {
		t.Errorf("%d effects after the failed transaction, want 0", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM wary_inbox WHERE consumer = 'fail'"); n != 0 {
		t.Errorf("%d claims after the failed transaction, want 0", n)
	}
	// Delivered again: applied once, on a clean connection.
	q.Expire()
	if d, err = q.Receive(ctx, sub); err != nil {
		t.Fatal(err)
	}
	var s session
	r, err := in.Handle(ctx, d, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		if err := tx.QueryRowContext(ctx, "SELECT @@autocommit, @@tx_isolation, CONNECTION_ID()").Scan(&s.autocommit, &s.level, &s.id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id) VALUES (?)", d.Message.ID)
		return err
	})
	if r != idem.ResultApplied || err != nil {
		t.Fatalf("again: %v, %v; want applied", r, err)
	}
	if s.autocommit != 0 || s.level != "READ-COMMITTED" {
		t.Errorf("again: autocommit %d, %s; want 0, READ-COMMITTED", s.autocommit, s.level)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM effects"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if s := idle(t, sd); s.inTx != 0 || s.autocommit != 0 || s.level != "READ-COMMITTED" {
		t.Errorf("after: in_transaction %d, autocommit %d, %s; want 0, 0, READ-COMMITTED", s.inTx, s.autocommit, s.level)
	}
	if how == "cancel" && s.id == conn {
		t.Errorf("the canceled statement's connection %d served again; want it discarded", conn)
	}
}

// cancelWhileLocked runs, in tx (on connection conn), an update of a row
// another transaction holds, and cancels its context once the server
// shows it waiting for the lock; then it releases the row. go-sql-driver
// closes a connection whose statement was canceled; the server rolls its
// transaction back when it notices.
func cancelWhileLocked(t *testing.T, db *sql.DB, tx *sql.Tx, conn int64) error {
	ctx := t.Context()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "UPDATE locked SET n = n + 1 WHERE id = 1"); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tx.ExecContext(sctx, "UPDATE locked SET n = n + 10 WHERE id = 1")
		done <- err
	}()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			return errors.Join(errors.New("the update did not wait for the lock"), err)
		case <-time.After(10 * time.Millisecond): // the server has no signal for a lock wait
		}
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", conn).Scan(&waiting)
		if err != nil {
			return err
		}
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		return errors.Join(errors.New("the update was not canceled"), err)
	}
	return err
}

// The inbox's transaction on the transaction pool is its claim, the
// handler's statement and COMMIT: no START TRANSACTION, no SET
// TRANSACTION, nothing else (the server's default REPEATABLE READ; the
// commands counted on the wire).
func TestImplicitStatements(t *testing.T) {
	var w wireCount
	dsn := w.dsn(t, newDatabase(t, nil))
	st, _, _ := openImplicit(t, dsn)
	ctx := t.Context()
	in, q, sub := inboxOn(t, st, "wire")
	h := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (message_id) VALUES (?)", d.Message.ID)
		return err
	}
	for i, id := range []string{"m1", "m2", "m3"} {
		q.Push(idemtest.Msg(id, "x", "", 0))
		d, err := q.Receive(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		w.take()
		w.record.Store(i > 0) // the first: connecting, the first purge
		before := w.cmds.Load()
		if r, err := in.Handle(ctx, d, h); r != idem.ResultApplied || err != nil {
			t.Fatalf("%s: %v, %v", id, r, err)
		}
		w.record.Store(false)
		if i == 0 {
			continue
		}
		cmds := w.take()
		if n := w.cmds.Load() - before; n != int64(len(cmds)) || len(cmds) != 3 ||
			!strings.HasPrefix(cmds[0], "INSERT INTO `wary_inbox`") ||
			!strings.HasPrefix(cmds[1], "INSERT INTO effects") || cmds[2] != "COMMIT" {
			t.Errorf("%s: %d commands %q; want the claim, the handler's insert, COMMIT", id, n, cmds)
		}
	}
}

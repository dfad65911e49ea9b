package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/internal/servicetest"
)

// killChildEnv tells TestKillChild what to be: "relay", "inbox" or
// "inbox+hold" (see killHeld), how to build its store (one of
// killStores), the RabbitMQ exchange and queue's name, and the
// database's DSN, separated by spaces.
const killChildEnv = "WARY_MYSQL_KILL_CHILD"

// killStores are the constructors TestKill9Relay and TestKill9Inbox run
// the store with, each a subtest, in the test and in the processes it
// kills: "open" is mysql.Open, the default, whose transactions run on its
// own pool with autocommit off (a connection killed mid-transaction
// leaves the server to roll back what the transaction's first statement
// began); "new" is mysql.New on a *sql.DB, whose transactions begin with
// START TRANSACTION.
var killStores = []string{"open", "new"}

// killHeld is the ID (and key) of the message whose handler, in the
// consumer TestKill9Inbox kills ("inbox+hold"), writes its effect in the
// inbox transaction, records in the table held (outside it) that it did,
// and never returns: the kill then finds that transaction open, its claim
// and effect written and not committed, which the server must roll back.
const killHeld = "held"

// openKillStore builds a store on dsn with mysql.Open or mysql.New, as
// how ("open" or "new") says, and returns it with the database it reads
// and writes outside the store's transactions and a function that closes
// both.
func openKillStore(ctx context.Context, how, dsn string, opts *mysql.Options) (*mysql.Store, *sql.DB, func(), error) {
	switch how {
	case "open":
		st, err := mysql.Open(ctx, dsn, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		return st, st.DB(), func() { st.Close() }, nil
	case "new":
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		st, err := mysql.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		return st, db, func() { st.Close(); db.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown constructor %q", how)
}

// rabbitURL returns the local RabbitMQ's URL, or skips t when it cannot
// be reached (fails it when WARY_RABBIT_URL is set or
// WARY_REQUIRE_SERVICES=1).
func rabbitURL(t testing.TB) string {
	t.Helper()
	return servicetest.URL(t, "WARY_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, u string) error {
		c, err := rabbit.Dial(ctx, u, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// killEnv is a fresh database and a fresh RabbitMQ queue behind an
// exchange of the same name, for a child process that TestKill9Relay or
// TestKill9Inbox kills, and a store on the database built as how says
// (one of killStores), as the child builds its own.
type killEnv struct {
	t    *testing.T
	ctx  context.Context
	how  string
	dsn  string
	db   *sql.DB
	st   *mysql.Store
	conn *rabbit.Conn
	name string
}

func setupKill(t *testing.T, how string) *killEnv {
	t.Helper()
	e := &killEnv{t: t, ctx: t.Context(), how: how, dsn: newDatabase(t, nil)}
	u := rabbitURL(t)
	var (
		closeStore func()
		err        error
	)
	if e.st, e.db, closeStore, err = openKillStore(e.ctx, how, e.dsn, &mysql.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	if e.conn, err = rabbit.Dial(e.ctx, u, nil); err != nil {
		t.Fatal(err)
	}
	e.name = fmt.Sprintf("wary-mysql.kill.%d", time.Now().UnixNano())
	top := rabbit.Topology{Exchange: e.name, Queue: e.name}
	if err := rabbit.Declare(e.ctx, e.conn, top); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = top.Delete(ctx, e.conn)
		e.conn.Close()
	})
	return e
}

// start runs TestKillChild as role in a process of its own, its store
// built as e's.
func (e *killEnv) start(role string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+role+" "+e.how+" "+e.name+" "+e.dsn)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd
}

// kill9 kills cmd with SIGKILL and reaps it.
func (e *killEnv) kill9(cmd *exec.Cmd) {
	e.t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		e.t.Fatal(err)
	}
	_ = cmd.Wait()
}

// waitFor polls cond until it holds, or fails the test after a minute.
func (e *killEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	idemtest.WaitFor(e.t, what, cond)
}

// count runs a COUNT query.
func (e *killEnv) count(q string) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRowContext(e.ctx, q).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// openTxs counts the transactions InnoDB has open on connections to e's
// database: the child's (the test's own run none), what a kill leaves the
// server to roll back. It is a sample, for the log: they come and go.
func (e *killEnv) openTxs() int {
	e.t.Helper()
	return e.count(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
		JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE p.DB = DATABASE()`)
}

// TestKillChild is the process TestKill9Relay and TestKill9Inbox start
// and kill (it skips otherwise): a relay publishing the database's outbox
// to the exchange, or a consumer of the queue applying each message
// through the inbox, running until killed.
func TestKillChild(t *testing.T) {
	arg := os.Getenv(killChildEnv)
	if arg == "" {
		t.Skip("the process of TestKill9Relay and TestKill9Inbox")
	}
	role, rest, _ := strings.Cut(arg, " ")
	how, rest, _ := strings.Cut(rest, " ")
	name, dsn, _ := strings.Cut(rest, " ")
	ctx := context.Background()
	st, db, closeStore, err := openKillStore(ctx, how, dsn, &mysql.Options{Logger: quiet, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	conn, err := rabbit.Dial(ctx, rabbitURL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	switch role {
	case "relay":
		topic, err := rabbit.OpenTopic(ctx, conn, rabbit.Topology{Exchange: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer topic.Close()
		r, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{BatchSize: 50, PollInterval: 20 * time.Millisecond, Telemetry: broker.Telemetry{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(ctx) // until killed
		if err != nil {
			t.Fatal(err)
		}
	case "inbox", "inbox+hold":
		sub, err := rabbit.OpenSubscription(ctx, conn, rabbit.Topology{Queue: name}, &rabbit.SubscriptionOptions{Prefetch: 32})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		in, err := idem.NewInbox(st, "kill9", sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		h := in.Wrap(func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (id) VALUES (?)`, d.Message.ID)
			if err != nil || role != "inbox+hold" || d.Message.ID != killHeld {
				return err
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO held (id) VALUES (?)`, d.Message.ID); err != nil {
				return err
			}
			select {} // until killed, the transaction open
		})
		err = sub.Run(ctx, h, &broker.RunOptions{Concurrency: 8}) // until killed
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
}

// TestKill9Relay: the relay process is killed (SIGKILL) while it publishes
// a backlog, and a new one is started. Every row is published at least
// once, each aggregate's rows first arrive in sequence order, and every
// row is marked sent. It runs with each of killStores.
func TestKill9Relay(t *testing.T) {
	for _, how := range killStores {
		t.Run(how, func(t *testing.T) { testKill9Relay(t, how) })
	}
}

func testKill9Relay(t *testing.T, how string) {
	e := setupKill(t, how)
	ob, err := outbox.New(e.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n, aggregates = 3000, 30
	for i := 0; i < n; i += 10 {
		tx, err := e.db.BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]*outbox.Message, 10)
		for j := range msgs {
			msgs[j] = &outbox.Message{ID: fmt.Sprintf("m%d", i+j), AggregateID: fmt.Sprintf("a%d", (i+j)%aggregates), Type: "t", Payload: []byte("x")}
		}
		if _, err := ob.Add(e.ctx, tx, msgs...); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := rabbit.OpenSubscription(e.ctx, e.conn, rabbit.Topology{Queue: e.name}, &rabbit.SubscriptionOptions{Prefetch: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	var (
		mu    sync.Mutex
		times = map[string]int{}
		order = map[string][]int64{} // each aggregate's sequences, as they first arrived
	)
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(times)
	}
	cctx, cancel := context.WithCancel(e.ctx)
	var cw sync.WaitGroup
	cw.Go(func() {
		for cctx.Err() == nil {
			ds, err := sub.Receive(cctx, 100)
			if err != nil {
				return
			}
			mu.Lock()
			for _, d := range ds {
				m := d.Message
				if times[m.ID]++; times[m.ID] == 1 {
					seq, _ := strconv.ParseInt(m.Headers.Get(broker.HeaderSequence), 10, 64)
					order[m.Key] = append(order[m.Key], seq)
				}
			}
			mu.Unlock()
			for _, d := range ds {
				_ = d.Ack(context.WithoutCancel(cctx))
			}
		}
	})
	defer func() { cancel(); cw.Wait() }()

	first := e.start("relay")
	e.waitFor("a part of the backlog", func() bool { return distinct() >= n/5 })
	inFlight := e.openTxs()
	e.kill9(first)
	t.Logf("%d transactions open in the database just before the kill", inFlight)
	if k := distinct(); k == n {
		t.Errorf("the first relay published every row before it was killed")
	} else {
		t.Logf("killed the first relay after %d of %d rows", k, n)
	}
	second := e.start("relay")
	t.Cleanup(func() { e.kill9(second) })
	e.waitFor("every row", func() bool { return distinct() == n })
	e.waitFor("every row marked sent", func() bool {
		return e.count(`SELECT COUNT(*) FROM wary_outbox WHERE state <> 1`) == 0 // 1: sent
	})

	mu.Lock()
	defer mu.Unlock()
	if len(order) != aggregates {
		t.Errorf("%d aggregates arrived, want %d", len(order), aggregates)
	}
	for agg, seqs := range order {
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Errorf("aggregate %s: sequences first arrived as %v", agg, seqs)
				break
			}
		}
	}
	again := 0
	for _, k := range times {
		again += k - 1
	}
	t.Logf("%d rows, %d published again after the kill", n, again)
}

// TestKill9Inbox: the consuming process is killed (SIGKILL) while it
// applies a backlog through the inbox, its transactions and unacked
// deliveries in flight, and a new one is started. Every message's effect
// is applied once: none lost, none twice. It runs with each of
// killStores: on "open" a killed transaction's claim and effect were
// begun by the claim's statement alone (autocommit off), and the server
// rolls back both.
func TestKill9Inbox(t *testing.T) {
	for _, how := range killStores {
		t.Run(how, func(t *testing.T) { testKill9Inbox(t, how) })
	}
}

func testKill9Inbox(t *testing.T, how string) {
	e := setupKill(t, how)
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE effects (id VARBINARY(255) NOT NULL)`); err != nil { // no key: a second effect would be a second row
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE held (id VARBINARY(255) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	topic, err := rabbit.OpenTopic(e.ctx, e.conn, rabbit.Topology{Exchange: e.name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	const n = 2000
	for i := 0; i < n; i += 100 {
		msgs := make([]*broker.Message, 100)
		for j := range msgs {
			msgs[j] = &broker.Message{ID: fmt.Sprintf("m%d", i+j), Key: fmt.Sprintf("k%d", (i+j)%20), Body: []byte("x")}
			if i+j == n/10 { // a key of its own: no other message waits behind it
				msgs[j].ID, msgs[j].Key = killHeld, killHeld
			}
		}
		if err := topic.Publish(e.ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}

	first := e.start("inbox+hold")
	e.waitFor("a part of the backlog, and the held message's effect written", func() bool {
		return e.count(`SELECT COUNT(*) FROM effects`) >= n/5 && e.count(`SELECT COUNT(*) FROM held`) == 1
	})
	inFlight := e.openTxs()
	e.kill9(first)
	t.Logf("%d transactions open in the database just before the kill", inFlight)
	// The held transaction wrote its claim and effect before the held
	// row was committed, and never committed: neither is to be seen.
	if got := e.count(`SELECT COUNT(*) FROM effects WHERE id = '` + killHeld + `'`); got != 0 {
		t.Errorf("the held message's effect, written by the killed process's open transaction, is committed (%d)", got)
	}
	if got := e.count(`SELECT COUNT(*) FROM wary_inbox WHERE consumer = 'kill9' AND message_id = '` + killHeld + `'`); got != 0 {
		t.Errorf("the held message's claim, written by the killed process's open transaction, is committed (%d)", got)
	}
	if k := e.count(`SELECT COUNT(*) FROM effects`); k == n {
		t.Errorf("the first consumer applied every message before it was killed")
	} else {
		t.Logf("killed the first consumer after %d of %d effects", k, n)
	}
	second := e.start("inbox")
	t.Cleanup(func() { e.kill9(second) })
	e.waitFor("every message's effect", func() bool { return e.count(`SELECT COUNT(DISTINCT id) FROM effects`) == n })
	// The deliveries the kill left unacked come back to the second
	// process; wait until the queue has none left, then count.
	e.waitFor("the queue to empty", func() bool {
		ch, err := e.conn.Connection().Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(e.name, true, false, false, false, nil)
		return err == nil && q.Messages == 0
	})
	if got := e.count(`SELECT COUNT(*) FROM effects`); got != n {
		t.Errorf("%d effects for %d messages", got, n)
	}
	if got := e.count(`SELECT COUNT(*) FROM wary_inbox WHERE consumer = 'kill9'`); got != n {
		t.Errorf("%d inbox records for %d messages", got, n)
	}
	if got := e.count(`SELECT COUNT(*) FROM effects WHERE id = '` + killHeld + `'`); got != 1 {
		t.Errorf("the held message's effect %d times, want once (its killed transaction rolled back, then applied again)", got)
	}
}

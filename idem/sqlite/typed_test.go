package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

type payment struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// tempStore opens a SQLite store in a file of t's, closed when t ends.
func tempStore(t *testing.T) *sqlite.Store {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ledger returns a memory broker with the queue topic "payments"
// (messages of up to maxSize bytes; 0: the default) holding msgs, its
// subscription "ledger" opened, and the inbox of consumer "ledger" on st;
// all are closed when t ends.
func ledger(t *testing.T, st *sqlite.Store, maxSize int, msgs ...*broker.Message) (*memory.Broker, *broker.Subscription, *idem.Inbox[*sql.Tx]) {
	b := memory.New(nil)
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("payments", &memory.TopicConfig{Profile: memory.Queue, MaxMessageSize: maxSize}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("payments", "ledger"); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("payments", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	if err := topic.Publish(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	sub, err := b.OpenSubscription("payments", "ledger", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	in, err := idem.NewInbox(st, "ledger", sub.Capabilities(), idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	return b, sub, in
}

// TestTypedInbox: through an inbox, a typed handler applies the decoded
// payments; an undecodable one is dead-lettered with its reason on a broker
// that dead-letters, and parked with it on one that cannot, never retried,
// and never applied.
func TestTypedInbox(t *testing.T) {
	ctx := t.Context()
	st := tempStore(t)
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE paid (id TEXT PRIMARY KEY, amount INTEGER)"); err != nil {
		t.Fatal(err)
	}
	pay := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, p payment) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO paid VALUES (?, ?)", p.Order, p.Amount)
		return err
	})

	good, _ := broker.NewMessage(nil, "p-1", "o-1", payment{"o-1", 30})
	bad := &broker.Message{ID: "p-2", Key: "o-2", Body: []byte(`{"order": 7}`)} // order is not a string
	b, sub, in := ledger(t, st, 0, good, bad)
	results := map[string]idem.Result{}
	for len(results) < 2 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := sub.Receive(wctx, 2)
		cancel()
		if err != nil {
			t.Fatalf("receive: %v (results %v)", err, results)
		}
		for _, d := range ds {
			r, _ := in.Handle(ctx, d, pay)
			results[d.Message.ID] = r
		}
	}
	if results["p-1"] != idem.ResultApplied || results["p-2"] != idem.ResultDeadLettered {
		t.Fatalf("results %v, want p-1 applied, p-2 dead-lettered", results)
	}
	dlq, _ := b.OpenDeadLetters("payments", "ledger", nil)
	defer dlq.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ds, err := dlq.Receive(wctx, 1)
	cancel()
	if err != nil || len(ds) != 1 || !strings.Contains(ds[0].Message.Headers.Get(driver.HeaderDeadLetterReason), "undecodable") {
		t.Fatalf("dead letters %v, %v; want p-2 with an undecodable reason", ds, err)
	}
	var n int
	if err := st.DB().QueryRowContext(ctx, "SELECT count(*) FROM paid").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d payments applied (%v), want 1", n, err)
	}

	// A broker without dead letters: the message is parked with the
	// reason, at once.
	noDLQ, err := idem.NewInbox(st, "ledger-2", capability.Subscription{RedeliveryHorizon: time.Hour}, idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := noDLQ.Handle(ctx, broker.NewDetachedDelivery(bad, 1), pay)
	if r != idem.ResultParked {
		t.Fatalf("without dead letters: %v, %v; want parked", r, err)
	}
	parked, err := noDLQ.Parked(ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 1 || !strings.Contains(parked[0].Reason, "undecodable") {
		t.Fatalf("parked %+v, %v; want p-2 with an undecodable reason", parked, err)
	}
}

// TestInboxBoundsReasons: an undecodable message (a foreign content type of
// 200 KB with a newline, a number of a million digits) and a handler's
// ParkError with such a reason are dead-lettered on the memory broker and
// parked in SQLite with a reason of at most driver.MaxReasonLen bytes, on
// one line.
func TestInboxBoundsReasons(t *testing.T) {
	ctx := t.Context()
	st := tempStore(t)
	longType := "application/x-" + strings.Repeat("a", 100<<10) + "\nX-Injected: yes" + strings.Repeat("b", 100<<10)
	msgs := []*broker.Message{
		{ID: "long-type", Key: "k", Headers: broker.Headers{{broker.HeaderContentType, longType}}, Body: []byte(`{}`)},
		{ID: "big-number", Key: "k", Body: []byte(`{"order":"o","amount":1` + strings.Repeat("0", 1_000_000) + `}`)},
		{ID: "long-park", Key: "k", Body: []byte(`{"order":"park","amount":1}`)},
	}
	pay := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, p payment) error {
		return &idem.ParkError{Now: true, Reason: "cannot apply\n" + strings.Repeat("z", 200<<10)}
	})
	check := func(where, id, r string) {
		t.Helper()
		if len(r) > driver.MaxReasonLen || strings.ContainsAny(r, "\n\r") || r == "" {
			t.Errorf("%s: %s has a reason of %d bytes: %.300q", where, id, len(r), r)
		}
	}

	b, sub, in := ledger(t, st, 4<<20, msgs[:2]...)
	receiveN(t, sub, 2, func(d *broker.Delivery) {
		if r, err := in.Handle(ctx, d, pay); r != idem.ResultDeadLettered {
			t.Fatalf("%s: %v, %.200v; want dead-lettered", d.Message.ID, r, err)
		}
	})
	dlq, _ := b.OpenDeadLetters("payments", "ledger", nil)
	defer dlq.Close()
	receiveN(t, dlq, 2, func(d *broker.Delivery) {
		check("dead letter", d.Message.ID, d.Message.Headers.Get(driver.HeaderDeadLetterReason))
	})

	// A broker without dead letters: all three are parked.
	noDLQ, err := idem.NewInbox(st, "ledger-2", capability.Subscription{RedeliveryHorizon: time.Hour}, idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if r, err := noDLQ.Handle(ctx, broker.NewDetachedDelivery(m, 1), pay); r != idem.ResultParked {
			t.Fatalf("%s without dead letters: %v, %.200v; want parked", m.ID, r, err)
		}
	}
	parked, err := noDLQ.Parked(ctx, idem.ParkedFilter{})
	if err != nil || len(parked) != 3 {
		t.Fatalf("parked %d, %v; want 3", len(parked), err)
	}
	for _, p := range parked {
		check("park", p.MessageID, p.Reason)
	}
}

// receiveN receives n deliveries from sub and hands each to f.
func receiveN(t *testing.T, sub *broker.Subscription, n int, f func(*broker.Delivery)) {
	t.Helper()
	for got := 0; got < n; {
		wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ds, err := sub.Receive(wctx, n-got)
		cancel()
		if err != nil {
			t.Fatalf("receive: %v (%d of %d)", err, got, n)
		}
		for _, d := range ds {
			f(d)
			got++
		}
	}
}

// vndJSON is JSON under another content type: a codec the ledger's
// consumer does not speak.
type vndJSON struct{ broker.Codec }

func (vndJSON) ContentType() string { return "application/vnd.example+json" }

// TestTypedOutbox: events added with outbox.NewMessage carry their codec's
// content type through the outbox and the relay, so that the typed
// consumer applies the one in its codec (JSON) and dead-letters, without
// applying it, the one in another, whose body JSON would decode.
func TestTypedOutbox(t *testing.T) {
	ctx := t.Context()
	st := tempStore(t)
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE paid (id TEXT PRIMARY KEY, amount INTEGER)"); err != nil {
		t.Fatal(err)
	}
	box, err := outbox.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := outbox.NewMessage(nil, "p-1", "o-1", 1, "payment.made", payment{"o-1", 30})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := outbox.NewMessage(vndJSON{broker.JSON}, "p-2", "o-2", 1, "payment.made", payment{"o-2", 40})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := box.Add(ctx, tx, good, foreign); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	b, sub, in := ledger(t, st, 0)
	topic, err := b.OpenTopic("payments", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	relay, err := outbox.NewRelay(st, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Drain(ctx); n != 2 || err != nil {
		t.Fatalf("Drain = %d, %v; want 2", n, err)
	}

	pay := idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, p payment) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO paid VALUES (?, ?)", p.Order, p.Amount)
		return err
	})
	results := map[string]idem.Result{}
	receiveN(t, sub, 2, func(d *broker.Delivery) {
		want := map[string]string{"p-1": "application/json", "p-2": "application/vnd.example+json"}[d.Message.ID]
		if ct := d.Message.Headers.Get(broker.HeaderContentType); ct != want || d.Message.Headers.Get(broker.HeaderType) != "payment.made" {
			t.Errorf("%s published with headers %v, want content type %q", d.Message.ID, d.Message.Headers, want)
		}
		results[d.Message.ID], _ = in.Handle(ctx, d, pay)
	})
	if results["p-1"] != idem.ResultApplied || results["p-2"] != idem.ResultDeadLettered {
		t.Fatalf("results %v, want p-1 applied, p-2 dead-lettered", results)
	}
	dlq, _ := b.OpenDeadLetters("payments", "ledger", nil)
	defer dlq.Close()
	receiveN(t, dlq, 1, func(d *broker.Delivery) {
		if r := d.Message.Headers.Get(driver.HeaderDeadLetterReason); d.Message.ID != "p-2" || !strings.Contains(r, "application/vnd.example+json") {
			t.Errorf("dead letter %s with reason %q, want p-2 refused for its content type", d.Message.ID, r)
		}
	})
	var order string
	if err := st.DB().QueryRowContext(ctx, "SELECT group_concat(id) FROM paid").Scan(&order); err != nil || order != "o-1" {
		t.Fatalf("paid %q (%v), want o-1 only", order, err)
	}
}

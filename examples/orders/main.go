// Command orders runs wary's whole mission end to end on the embedded
// defaults (SQLite and the in-memory broker), with faults injected:
//
//   - an order service writes each order change and its event to the
//     outbox in one transaction;
//   - the relay publishes the outbox, and crashes once after publishing and
//     before marking rows sent (so it publishes them again);
//   - a producer retry publishes one event twice;
//   - a billing consumer applies the events through the inbox with version
//     checks, and stages a payment with an idempotency key in the same
//     transaction;
//   - the payment call runs after the commit, and the caller crashes once
//     after the provider charged and before recording it (so it calls
//     again, with the same key).
//
// At the end it checks the history: nothing lost, no effect applied twice,
// every order charged once.
//
//	go run ./examples/orders
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

func main() {
	rep, err := run(context.Background(), os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}

// Report is what run found.
type Report struct {
	History       conformance.Report
	Orders        int
	Charges       map[string]int // provider effects per payment key
	ProviderCalls int
	Duplicates    int64 // copies the inbox dropped
}

// OK reports whether nothing was lost, no effect was applied twice and
// every order was charged exactly once.
func (r Report) OK() bool {
	if !r.History.Valid() || len(r.Charges) != r.Orders {
		return false
	}
	for _, n := range r.Charges {
		if n != 1 {
			return false
		}
	}
	return true
}

const orders = 5

func run(ctx context.Context, w io.Writer) (Report, error) {
	var rep Report
	dir, err := os.MkdirTemp("", "wary-orders")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil)
	if err != nil {
		return rep, err
	}
	defer store.Close()
	db := store.DB()
	for _, q := range []string{
		`CREATE TABLE orders (id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL, total INTEGER NOT NULL)`,
		`CREATE TABLE billing_orders (id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL)`,
		`CREATE TABLE billing_effects (message_id TEXT NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return rep, err
		}
	}

	// The broker: per-order FIFO, no broker-side dedup, so the inbox is
	// what absorbs duplicates.
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1}); err != nil {
		return rep, err
	}
	if err := b.CreateSubscription("orders", "billing"); err != nil {
		return rep, err
	}
	topic, err := b.OpenTopic("orders", nil)
	if err != nil {
		return rep, err
	}
	defer topic.Close()
	sub, err := b.OpenSubscription("orders", "billing", nil)
	if err != nil {
		return rep, err
	}
	defer sub.Close()

	// 1. The order service: each change and its event in one transaction.
	outbox, err := idem.NewOutbox[*sql.Tx](store, nil)
	if err != nil {
		return rep, err
	}
	change := func(id string, version int64, status string, total int) error {
		tx, err := store.Begin(ctx)
		if err != nil {
			return err
		}
		defer store.Rollback(ctx, tx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, version, status, total) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET version = excluded.version, status = excluded.status`, id, version, status, total); err != nil {
			return err
		}
		_, err = outbox.Add(ctx, tx, &idem.OutboxMessage{ID: id + "/" + status, AggregateID: id, Version: version,
			Type: "order." + status, Payload: fmt.Appendf(nil, `{"order":%q,"total":%d}`, id, total)})
		if err != nil {
			return err
		}
		return store.Commit(ctx, tx)
	}
	for i := 1; i <= orders; i++ {
		id := fmt.Sprintf("order-%d", i)
		if err := change(id, 1, "placed", 10*i); err != nil {
			return rep, err
		}
		if err := change(id, 2, "confirmed", 10*i); err != nil {
			return rep, err
		}
	}
	rep.Orders = orders
	fmt.Fprintf(w, "orders:    %d placed and confirmed: %d events in the outbox\n", orders, 2*orders)

	// 2. The relay, which dies once after publishing and before marking.
	h := conformance.NewHistory()
	var mu sync.Mutex
	published := map[string]*broker.Message{}
	crashAt, count := 4, 0
	quiet := slog.New(slog.DiscardHandler)
	relayOpts := func(failpoint bool) *idem.RelayOptions {
		return &idem.RelayOptions{Owner: "relay-1", Concurrency: 1, Logger: quiet, AfterPublish: func(m *broker.Message) error {
			mu.Lock()
			defer mu.Unlock()
			h.Sent(m.ID)
			published[m.ID] = m
			if count++; failpoint && count == crashAt {
				return fmt.Errorf("relay process killed after publishing %s", m.ID)
			}
			return nil
		}}
	}
	relay, err := idem.NewRelay(store, topic, relayOpts(true))
	if err != nil {
		return rep, err
	}
	if _, err := relay.Drain(ctx); err == nil {
		return rep, errors.New("the relay failpoint did not fire")
	}
	fmt.Fprintf(w, "relay:     crashed after publishing %d events, before marking them sent\n", crashAt)
	restarted, err := idem.NewRelay(store, topic, relayOpts(false))
	if err != nil {
		return rep, err
	}
	n, err := restarted.Drain(ctx)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "relay:     restarted, published %d (%d of them again, with the same IDs)\n", n, crashAt)
	// A producer retry the broker does not deduplicate.
	dup := published["order-3/confirmed"]
	if err := topic.Publish(ctx, &broker.Message{ID: dup.ID, Key: dup.Key, Headers: dup.Headers, Body: dup.Body}); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "broker:    a producer retry published %s twice\n", dup.ID)

	// 3. The billing consumer: inbox, version check, payment staged with
	// an idempotency key in the same transaction.
	inbox, err := idem.NewInbox[*sql.Tx](store, "billing", sub.Capabilities(), &idem.Options{Logger: quiet})
	if err != nil {
		return rep, err
	}
	provider := newProvider()
	crashed := false
	payments, err := idem.NewKeys[*sql.Tx](store, idem.KeyContract{Provider: "payments", Retention: 24 * time.Hour, Replays: true},
		&idem.KeysOptions{CallTimeout: 50 * time.Millisecond, Logger: quiet, AfterCall: func(key string) error {
			if key == "payment:order-4:1" && !crashed {
				crashed = true
				return errors.New("billing process killed after the provider charged, before recording it")
			}
			return nil
		}})
	if err != nil {
		return rep, err
	}
	apply := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, ev idem.Event) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO billing_effects (message_id) VALUES (?)`, d.Message.ID); err != nil {
			return err
		}
		status := strings.TrimPrefix(ev.Type, "order.")
		if ev.Version == 1 {
			_, err := tx.ExecContext(ctx, `INSERT INTO billing_orders (id, version, status) VALUES (?, 1, ?)`, ev.AggregateID, status)
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE billing_orders SET status = ? WHERE id = ?`, status, ev.AggregateID); err != nil {
			return err
		}
		if status == "confirmed" {
			// One payment attempt of this order: the key names the
			// operation, never the customer.
			_, err := payments.Stage(ctx, tx, "payment:"+ev.AggregateID+":1", d.Message.Body)
			return err
		}
		return nil
	}
	billing, err := idem.NewVersioned(inbox, idem.VersionTable{Table: "billing_orders", IDColumn: "id", VersionColumn: "version"}, apply)
	if err != nil {
		return rep, err
	}
	for {
		pctx, cancel := context.WithCancel(ctx)
		cancel() // a poll: what is deliverable now
		ds, err := sub.Receive(pctx, 10)
		if err != nil && !errors.Is(err, context.Canceled) {
			return rep, err
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			h.Delivered(d.Message.ID)
			if err := billing.Handle(ctx, d); err != nil {
				return rep, err
			}
		}
	}
	s := inbox.Stats()
	rep.Duplicates = s.Duplicates
	fmt.Fprintf(w, "billing:   %d events applied, %d duplicate deliveries dropped by the inbox\n", s.Applied, s.Duplicates)

	// 4. The payment calls, after the commits.
	if _, err := payments.CallStaged(ctx, provider.call, 0); err == nil || !crashed {
		return rep, errors.New("the payment failpoint did not fire")
	}
	fmt.Fprintln(w, "payments:  crashed after the provider charged order-4, before recording it")
	time.Sleep(60 * time.Millisecond) // the dead caller's hold on the key expires
	if _, err := payments.CallStaged(ctx, provider.call, 0); err != nil {
		return rep, err
	}
	rep.Charges, rep.ProviderCalls = provider.totals()
	fmt.Fprintf(w, "payments:  retried with the same key: %d calls, %d charges for %d orders\n", rep.ProviderCalls, len(rep.Charges), orders)

	// 5. The check: committed effects, read back from the database.
	rows, err := db.QueryContext(ctx, `SELECT message_id FROM billing_effects`)
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return rep, err
		}
		h.Applied(id)
	}
	rows.Close()
	rep.History = h.Check()
	fmt.Fprintf(w, "history:   %s\n", rep.History)
	if rep.OK() {
		fmt.Fprintln(w, "result:    OK: nothing lost, no duplicate effects, every order charged once")
	} else {
		fmt.Fprintf(w, "result:    FAILED: charges %v\n", rep.Charges)
	}
	return rep, nil
}

// provider is a payment provider that honours idempotency keys and replays
// the first result.
type provider struct {
	mu      sync.Mutex
	calls   int
	charges map[string]int
	results map[string][]byte
}

func newProvider() *provider {
	return &provider{charges: map[string]int{}, results: map[string][]byte{}}
}

func (p *provider) call(_ context.Context, key string, intent []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if r, ok := p.results[key]; ok {
		return r, nil // a retry: replay, do not charge again
	}
	p.charges[key]++
	p.results[key] = []byte("charge-" + key)
	return p.results[key], nil
}

func (p *provider) totals() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int{}
	for k, v := range p.charges {
		m[k] = v
	}
	return m, p.calls
}

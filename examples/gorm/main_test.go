package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/internal/servicetest"
)

// postgresURL returns the test database's URL (WARY_POSTGRES_URL), or
// skips t (fails it, with WARY_REQUIRE_SERVICES=1) when it is unreachable.
func postgresURL(t *testing.T) string {
	return servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
}

func schemaName(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "gormtest_" + hex.EncodeToString(b[:])
}

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), &out, postgresURL(t), schemaName(t)); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := `evt-order-1 attempt 1: applied; rows of order-1: 1
evt-order-1 attempt 1: duplicate; rows of order-1: 1
evt-order-2 attempt 1: failed (idem: consumer "billing", message "evt-order-2", attempt 1: payment service unavailable); rows of order-2: 0
evt-order-2 attempt 2: applied; rows of order-2: 1
order    order-1: ada, 30
order    order-2: bob, 12
stats    processed 2, duplicates 1, failed 1
`
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestGORMInClaimedTx: GORM writes the domain row in the transaction in
// which the inbox claimed the delivery (inside the handler, the row and
// the claim are visible in that transaction and nowhere else); two copies
// of a message handled at once apply once; a handler's error rolls back
// the row and the claim, and the redelivery applies once.
func TestGORMInClaimedTx(t *testing.T) {
	ctx := t.Context()
	a, err := open(ctx, postgresURL(t), schemaName(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	sqlDB, db, store := a.sqlDB, a.db, a.store
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	topic, sub, err := queue(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topic.Close(); _ = sub.Close() })
	inbox, err := idem.NewInbox(store, "billing", sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}

	count := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, table, column, value string) int {
		t.Helper()
		var n int
		if err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+table+" WHERE "+column+" = $1", value).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fail := errors.New("payment service unavailable")
	var failOnce sync.Map
	apply := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		var o Order
		if err := json.Unmarshal(d.Message.Body, &o); err != nil {
			return broker.Permanent(err)
		}
		if err := inTx(ctx, db, tx).Create(&o).Error; err != nil {
			return err
		}
		// The row and the claim are in tx, and not yet anywhere else.
		if n := count(tx, "orders", "id", o.ID); n != 1 {
			t.Errorf("%s in the handler's transaction: %d rows, want 1", o.ID, n)
		}
		if n := count(tx, "wary_inbox", "message_id", d.Message.ID); n != 1 {
			t.Errorf("%s's claim in the handler's transaction: %d records, want 1", d.Message.ID, n)
		}
		if n := count(sqlDB, "orders", "id", o.ID); n != 0 {
			t.Errorf("%s outside the handler's transaction before it committed: %d rows, want 0", o.ID, n)
		}
		if _, again := failOnce.LoadOrStore(o.ID, true); !again && o.ID == "order-2" {
			return fail
		}
		return nil
	}
	publish := func(id string, copies int) {
		body, _ := json.Marshal(Order{ID: id, Customer: "ada", Amount: 30})
		for range copies {
			if err := topic.Publish(ctx, &broker.Message{ID: "evt-" + id, Body: body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	receive := func(n int) []*broker.Delivery {
		var ds []*broker.Delivery
		for len(ds) < n {
			got, err := sub.Receive(ctx, n-len(ds))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, got...)
		}
		return ds
	}

	// Two copies at once: one claims and applies, the other waits for its
	// commit and is a duplicate.
	publish("order-1", 2)
	results := make(chan idem.Result, 2)
	var wg sync.WaitGroup
	for _, d := range receive(2) {
		wg.Go(func() {
			r, err := inbox.Handle(ctx, d, apply)
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	wg.Wait()
	close(results)
	got := map[idem.Result]int{}
	for r := range results {
		got[r]++
	}
	if got[idem.ResultApplied] != 1 || got[idem.ResultDuplicate] != 1 {
		t.Errorf("two copies at once: %v, want one applied and one duplicate", got)
	}
	if n := count(sqlDB, "orders", "id", "order-1"); n != 1 {
		t.Errorf("order-1: %d rows, want 1", n)
	}

	// A handler error rolls back GORM's row and the inbox's claim.
	publish("order-2", 1)
	d := receive(1)[0]
	if r, err := inbox.Handle(ctx, d, apply); r != idem.ResultFailed || !errors.Is(err, fail) {
		t.Fatalf("order-2's first attempt: %v, %v; want failed with the handler's error", r, err)
	}
	if n, c := count(sqlDB, "orders", "id", "order-2"), count(sqlDB, "wary_inbox", "message_id", "evt-order-2"); n != 0 || c != 0 {
		t.Fatalf("after the handler's error: %d rows and %d claims of order-2, want none", n, c)
	}
	d = receive(1)[0]
	if r, err := inbox.Handle(ctx, d, apply); r != idem.ResultApplied || err != nil {
		t.Fatalf("order-2's redelivery: %v, %v; want applied", r, err)
	}
	if n, c := count(sqlDB, "orders", "id", "order-2"), count(sqlDB, "wary_inbox", "message_id", "evt-order-2"); n != 1 || c != 1 {
		t.Errorf("after the redelivery: %d rows and %d claims of order-2, want 1 and 1", n, c)
	}
}

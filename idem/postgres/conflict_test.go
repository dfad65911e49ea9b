package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

// TestConflictRetried: two inboxes of one consumer handle a message each
// at once, whose handlers update the same two rows in opposite orders and
// meet, each holding its first row, before they take their second: the
// server picks one as its deadlock's victim (40P01), and the inbox tries
// that transaction again at once instead of nacking it. Both messages are
// applied once, no delivery is nacked, and Stats.Conflicts counts the one
// retry; alone (Batch 1) and in a shared transaction (Batch 2).
func TestConflictRetried(t *testing.T) {
	for _, batch := range []int{1, 2} {
		t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) { testConflictRetried(t, batch) })
	}
}

func testConflictRetried(t *testing.T, batch int) {
	ctx := t.Context()
	pool := newPool(t)
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE counts (id TEXT PRIMARY KEY, n INT NOT NULL); INSERT INTO counts VALUES ('x', 0), ('y', 0)`); err != nil {
		t.Fatal(err)
	}
	q := idemtest.NewQueue(idemtest.Caps)
	q.Push(idemtest.Msg("m1", "x,y", "", 0), idemtest.Msg("m2", "y,x", "", 0))
	var mu sync.Mutex
	runs := map[string]int{}
	var met sync.WaitGroup // both first runs hold their first row
	met.Add(2)
	// won is closed when the deadlock's survivor has done its updates:
	// the victim's next run starts only then, so that it does not race
	// the survivor for the row the victim's rollback freed (and deadlock
	// again).
	won := make(chan struct{})
	var once sync.Once
	h := func(ctx context.Context, tx pgx.Tx, d *broker.Delivery) error {
		mu.Lock()
		runs[d.Message.ID]++
		first := runs[d.Message.ID] == 1
		mu.Unlock()
		if !first {
			<-won
		}
		rows := strings.Split(string(d.Message.Body), ",")
		for i, row := range rows {
			if _, err := tx.Exec(ctx, `UPDATE counts SET n = n + 1 WHERE id = $1`, row); err != nil {
				return fmt.Errorf("update %s: %w", row, err)
			}
			if i == 0 && first {
				met.Done()
				met.Wait()
			}
		}
		once.Do(func() { close(won) })
		return nil
	}
	var inboxes []*idem.Inbox[pgx.Tx]
	var wg sync.WaitGroup
	for range 2 {
		in, err := idem.NewInbox(st, "conflict", idemtest.Caps, idemtest.Quiet(&idem.Options{Batch: batch}))
		if err != nil {
			t.Fatal(err)
		}
		inboxes = append(inboxes, in)
		d, err := q.Receive(ctx, q.Subscription(nil))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if r, err := in.Handle(ctx, d, h); r != idem.ResultApplied || err != nil {
				t.Errorf("%s: %v, %v; want applied", d.Message.ID, r, err)
			}
		})
	}
	wg.Wait()
	var n int
	if err := pool.QueryRow(ctx, `SELECT sum(n) FROM counts`).Scan(&n); err != nil || n != 4 {
		t.Errorf("counts sum to %d, %v; want 4 (each message's two updates, once)", n, err)
	}
	for _, id := range []string{"m1", "m2"} {
		if q.Acks(id) != 1 || q.Nacks(id) != 0 {
			t.Errorf("%s: %d acks, %d nacks; want 1 and 0", id, q.Acks(id), q.Nacks(id))
		}
	}
	var conflicts, failed, storeErrors int64
	for _, in := range inboxes {
		s := in.Stats()
		conflicts, failed, storeErrors = conflicts+s.Conflicts, failed+s.Failed, storeErrors+s.StoreErrors
	}
	if conflicts != 1 || failed != 0 || storeErrors != 0 {
		t.Errorf("%d conflicts, %d failed, %d store errors; want 1, 0, 0", conflicts, failed, storeErrors)
	}
	if runs["m1"]+runs["m2"] != 3 {
		t.Errorf("handler runs %v; want 3 in all (the victim's twice)", runs)
	}
}

package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamSettleFailureOnRowNotVisibleYet: a streamed commit is in the
// log a moment before its rows are visible to other transactions, so a
// window may fail a row (quarantine it) before the row can be updated.
// Settle looks for it again until it is visible and records the failure
// then, once: recorded on nothing, the row stayed pending as if never
// tried, and a sweep's claim published (here: quarantined) it a second
// time (TestStreamHostileRows counted 9 quarantines of 7 rows under
// load). A failure whose row never appears is reported unseen.
func TestStreamSettleFailureOnRowNotVisibleYet(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t)
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := postgres.TableStream(st)

	// The row's transaction is open: the row is not visible to Settle.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := ob.Add(ctx, tx, idemtest.OM("late", "a", 1, "x")); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `SELECT id FROM wary_outbox WHERE message_id = 'late'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	retries := 0
	postgres.BeforeSettleRetry(st, func() {
		if retries++; retries == 1 {
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	defer postgres.BeforeSettleRetry(st, nil)
	failed := []seam.OutboxFailure{{RowID: id, Error: "invalid message", Quarantine: true}}
	unseen, err := ls.Settle(ctx, nil, failed, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if retries == 0 || unseen != 0 {
		t.Fatalf("Settle looked again %d times and left %d rows unseen, want at least once and none", retries, unseen)
	}
	var state, attempts int
	var lastErr string
	if err := pool.QueryRow(ctx, `SELECT state, attempts, last_error FROM wary_outbox WHERE id = $1`, id).Scan(&state, &attempts, &lastErr); err != nil {
		t.Fatal(err)
	}
	if outbox.State(state) != outbox.Quarantined || attempts != 1 || lastErr != "invalid message" {
		t.Errorf("row %d: state %d, attempts %d, error %q; want quarantined once with its error", id, state, attempts, lastErr)
	}

	// A row that never becomes visible (its transaction rolls back).
	postgres.BeforeSettleRetry(st, nil)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ob.Add(ctx, tx, idemtest.OM("never", "b", 1, "x"))
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT id FROM wary_outbox WHERE message_id = 'never'`).Scan(&id)
		}
		if err == nil {
			err = errRollback
		}
		return err
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	unseen, err = ls.Settle(ctx, nil, []seam.OutboxFailure{{RowID: id, Error: "invalid message", Quarantine: true}}, nil, time.Now())
	if err != nil || unseen != 1 {
		t.Errorf("Settle of a failure on a row never committed = %d unseen, %v; want 1, nil", unseen, err)
	}
}

// errRollback rolls a test's transaction back.
var errRollback = errors.New("roll back")

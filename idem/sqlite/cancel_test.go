package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
)

// TestHandlerSucceededKeepsEffectWhenCanceled: a handler that returned nil
// keeps its effect although the context it ran under ended meanwhile (Run
// stopping): the commit is not interrupted (inbox.commit's promise).
// database/sql rolls back a transaction whose BeginTx context ends, so the
// store must not begin it under the caller's cancellation.
func TestHandlerSucceededKeepsEffectWhenCanceled(t *testing.T) {
	s, _, sub, cleanup := setup(t.Context())
	defer cleanup()
	if _, err := s.DB().Exec(`CREATE TABLE invoices (order_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	inbox, err := idem.NewInbox(s, "billing", sub.Capabilities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := broker.NewDetachedDelivery(&broker.Message{ID: "order-1-placed", Body: []byte("order-1")}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	r, err := inbox.Handle(ctx, d, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id) VALUES (?)`, string(d.Message.Body)); err != nil {
			return err
		}
		cancel() // Run stops while the handler finishes
		return nil
	})
	if err != nil || r != idem.ResultApplied {
		t.Fatalf("Handle: %v %v, want applied", r, err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM invoices`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("invoices: %d (%v), want the handler's one", n, err)
	}
}

// deadlineStore is a store whose Rollback reports whether it was bounded.
type deadlineStore struct {
	sqlDriver
	bounded, unbounded int
}

type sqlDriver = idemtest.Driver[*sql.Tx]

func (s *deadlineStore) Driver() seam.Driver[*sql.Tx] { return seam.NewDriver[*sql.Tx](s) }

func (s *deadlineStore) Rollback(ctx context.Context, tx *sql.Tx) error {
	if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		s.bounded++
	} else {
		s.unbounded++
	}
	return s.sqlDriver.Rollback(ctx, tx)
}

// TestRollbackBounded: the rollback after a failed handler runs although
// the handler's context ended, and is bounded (by CommitTimeout), so that
// a store that does not answer cannot hold the handler loop.
func TestRollbackBounded(t *testing.T) {
	s, _, sub, cleanup := setup(t.Context())
	defer cleanup()
	st := &deadlineStore{sqlDriver: idemtest.D(s)}
	inbox, err := idem.NewInbox(st, "billing", sub.Capabilities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	_, _ = inbox.Handle(ctx, broker.NewDetachedDelivery(&broker.Message{ID: "m"}, 1), func(context.Context, *sql.Tx, *broker.Delivery) error {
		cancel()
		return errors.New("handler failed")
	})
	if st.bounded != 1 || st.unbounded != 0 {
		t.Fatalf("rollbacks: %d bounded, %d without a deadline or already ended; want 1 bounded", st.bounded, st.unbounded)
	}
}

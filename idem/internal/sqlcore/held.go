package sqlcore

import (
	"context"
	"errors"

	"github.com/wary-go/wary/idem/internal/seam"
)

// Stmt is a statement with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// Held is a transaction that a claimed outbox batch holds while the relay
// publishes (SkipLocked mode): it runs the claim, and then either commits
// with the statements that mark the batch, or rolls back.
type Held interface {
	Querier
	// CommitWith runs stmts in order and commits. If one fails, nothing
	// is committed: the transaction is rolled back and the error
	// returned. Either way the transaction is over.
	CommitWith(ctx context.Context, stmts []Stmt) error
	// Rollback rolls the transaction back (a no-op if it is over).
	Rollback(ctx context.Context) error
}

// Holder is implemented by backends that can send several statements in
// one round trip (PostgreSQL: a pipeline of the extended protocol, ended by
// one Sync). Their held transactions send BEGIN with the first statement,
// and the statements of CommitWith with COMMIT: a held batch costs two
// round trips, its claim and its commit. Backends without it get a Held
// of Begin, one statement per round trip, and Commit.
type Holder interface {
	Hold(ctx context.Context) (Held, error)
}

// hold begins a held transaction.
func (c *Core[Tx]) hold(ctx context.Context) (Held, error) {
	if h, ok := c.b.(Holder); ok {
		return h.Hold(ctx)
	}
	tx, err := c.b.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &txHeld[Tx]{Querier: c.b.Q(tx), c: c, tx: tx}, nil
}

// txHeld is a Held on any Backend.
type txHeld[Tx any] struct {
	Querier
	c    *Core[Tx]
	tx   Tx
	over bool
}

func (h *txHeld[Tx]) CommitWith(ctx context.Context, stmts []Stmt) error {
	if h.over {
		return errHeldOver
	}
	for _, s := range stmts {
		if _, err := h.Exec(ctx, s.SQL, s.Args...); err != nil {
			rctx, cancel := seam.Detach(ctx)
			defer cancel()
			_ = h.Rollback(rctx)
			return err
		}
	}
	h.over = true
	return h.c.b.Commit(ctx, h.tx)
}

func (h *txHeld[Tx]) Rollback(ctx context.Context) error {
	if h.over {
		return nil
	}
	h.over = true
	return h.c.b.Rollback(ctx, h.tx)
}

// errHeldOver is CommitWith's error on a transaction already over.
var errHeldOver = errors.New("idem: the outbox batch's transaction is already over")

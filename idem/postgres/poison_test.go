package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/postgres"
)

// TestDataErrorsArePermanent: PostgreSQL's data exceptions (class 22) and
// program_limit_exceeded are errors of the message's own values; a
// connection failure, a serialization failure or a deadlock are not.
func TestDataErrorsArePermanent(t *testing.T) {
	for code, permanent := range map[string]bool{
		"22021": true, "22P06": true, "22001": true, "54000": true,
		"08006": false, "40001": false, "40P01": false, "57P01": false, "23505": false,
	} {
		err := postgres.Classify(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}))
		if broker.IsPermanent(err) != permanent || errors.Is(err, seam.ErrData) != permanent {
			t.Errorf("SQLSTATE %s: permanent %v, want %v", code, broker.IsPermanent(err), permanent)
		}
	}
	if err := postgres.Classify(io.ErrUnexpectedEOF); broker.IsPermanent(err) {
		t.Errorf("a broken connection is permanent: %v", err)
	}
}

// TestUnstorableAggregateID: a valid message ID whose aggregate header
// PostgreSQL cannot store (a NUL byte) fails the claim-and-check with a
// data error: the message is dead-lettered at once, not retried for ever.
func TestUnstorableAggregateID(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := idem.NewInbox[pgx.Tx](st, "agg", idemtest.Caps, idemtest.Quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	q := idemtest.NewQueue(idemtest.Caps)
	q.Push(&broker.Message{ID: "m1", Headers: broker.Headers{{idem.HeaderAggregateID, "a\x00b"}}})
	d, err := q.Receive(ctx, q.Subscription(nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := in.Handle(ctx, d, func(context.Context, pgx.Tx, *broker.Delivery) error { return nil })
	if r != idem.ResultDeadLettered || !errors.Is(err, seam.ErrData) || q.DeadLetters("m1") != 1 || q.Nacks("m1") != 0 {
		t.Errorf("Handle: %v, %v (dead-lettered %d, nacked %d); want dead-lettered with ErrData", r, err, q.DeadLetters("m1"), q.Nacks("m1"))
	}
}

package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

// hostileID is valid UTF-8 whose bytes, read as Shift-JIS, hide a
// backslash in a two-byte character: "Á" is C3 81, and 81 5C is one SJIS
// character. Escaped as a string literal, it would end the literal early
// and run the rest as SQL.
const hostileID = "Á\\', now()); CREATE TABLE pwned (x int); --"

// TestClaimUnderSJIS: under a client encoding whose multibyte characters
// can end in a backslash, the inbox's claim (sent with BEGIN) takes the
// message ID as data: with backslash_quote=on nothing of it runs as SQL,
// and with the default it is claimed (not refused with 22P06, which would
// make the message unclaimable). A copy is then a duplicate.
func TestClaimUnderSJIS(t *testing.T) {
	for _, bq := range []string{"on", "safe_encoding"} {
		t.Run("backslash_quote="+bq, func(t *testing.T) {
			pool := newPoolParams(t, map[string]string{"client_encoding": "SJIS", "backslash_quote": bq})
			ctx := t.Context()
			st, err := postgres.New(ctx, pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			in, err := idem.NewInbox[pgx.Tx](st, "sjis", idemtest.Caps, idemtest.Quiet(nil))
			if err != nil {
				t.Fatal(err)
			}
			q := idemtest.NewQueue(idemtest.Caps)
			q.Push(&broker.Message{ID: hostileID, Body: []byte("x")}, &broker.Message{ID: hostileID, Body: []byte("x")})
			sub := q.Subscription(nil)
			ran := 0
			h := func(context.Context, pgx.Tx, *broker.Delivery) error { ran++; return nil }
			for i, want := range []idem.Result{idem.ResultApplied, idem.ResultDuplicate} {
				d, err := q.Receive(ctx, sub)
				if err != nil {
					t.Fatal(err)
				}
				if r, err := in.Handle(ctx, d, h); r != want || err != nil {
					t.Fatalf("copy %d: %v, %v; want %v", i+1, r, err, want)
				}
			}
			if ran != 1 {
				t.Errorf("handler ran %d times, want 1", ran)
			}
			var injected bool
			if err := pool.QueryRow(ctx, `SELECT to_regclass('pwned') IS NOT NULL`).Scan(&injected); err != nil || injected {
				t.Errorf("the message ID ran as SQL (table pwned created: %v, %v)", injected, err)
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM wary_inbox WHERE consumer = 'sjis' AND message_id = $1`, hostileID).Scan(&n); err != nil || n != 1 {
				t.Errorf("inbox records of the ID: %d, %v; want 1", n, err)
			}
		})
	}
}

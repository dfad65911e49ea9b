package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/postgres"
)

// TestBeginClaim: the claim sent with BEGIN takes any message ID as data,
// a duplicate returns no transaction and leaves the pool's connections
// usable, and a rolled-back claim can be made again.
func TestBeginClaim(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"m1", `a'b`, `a\'b`, `\`, `'); DROP TABLE wary_inbox; --`, "$$x$$", "é日本", "a\x00b", "bad\xff"}
	for _, id := range ids {
		tx, ok, err := beginClaim(ctx, st, "c", id, time.Now())
		if id == "a\x00b" || id == "bad\xff" {
			if err == nil {
				t.Errorf("%q: claimed %v, want an error", id, ok)
			}
			continue
		}
		if err != nil || !ok {
			t.Fatalf("%q: claim: %v %v", id, ok, err)
		}
		if err := idemtest.D(st).Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		for range 20 { // more than the pool's connections
			tx, ok, err := beginClaim(ctx, st, "c", id, time.Now())
			if err != nil || ok || tx != nil {
				t.Fatalf("%q again: %v %v %v", id, tx, ok, err)
			}
		}
		var got string
		if err := pool.QueryRow(ctx, `SELECT message_id FROM wary_inbox WHERE consumer = 'c' AND message_id = $1`, id).Scan(&got); err != nil || got != id {
			t.Errorf("%q: stored %q, %v", id, got, err)
		}
	}
	tx, ok, err := beginClaim(ctx, st, "c", "rolled", time.Now())
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := idemtest.D(st).Rollback(ctx, tx); err != nil {
		t.Fatal(err)
	}
	tx, ok, err = beginClaim(ctx, st, "c", "rolled", time.Now())
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	_ = idemtest.D(st).Rollback(ctx, tx)
	if s := pool.Stat(); s.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", s.AcquiredConns())
	}
}

// beginClaim is the driver's BeginClaim of one message; ok: it began a
// transaction and claimed the message.
func beginClaim(ctx context.Context, st *postgres.Store, consumer, id string, at time.Time) (tx pgx.Tx, ok bool, err error) {
	tx, began, c, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: consumer, IDs: []string{id}, At: at})
	return tx, began && c[0].New, err
}

// claimOne is the driver's Claim of one message in tx.
func claimOne(ctx context.Context, st *postgres.Store, tx pgx.Tx, consumer, id string, at time.Time) (bool, error) {
	c, err := idemtest.D(st).Claim(ctx, tx, seam.ClaimRequest{Consumer: consumer, IDs: []string{id}, At: at})
	return err == nil && c[0].New, err
}

// TestBeginClaimMany: a claim of several messages goes with BEGIN in one
// round trip, answering which are new, with duplicates or not; a value the server
// refuses is a data error, and no connection stays acquired.
func TestBeginClaimMany(t *testing.T) {
	var n atomic.Int64
	pool := countingPool(t, &n)
	ctx := t.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(ids ...string) (pgx.Tx, []seam.Claimed, int64, error) {
		before := n.Load()
		tx, began, c, err := idemtest.D(st).BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids, At: time.Now()})
		if err == nil && !began {
			t.Fatalf("%v: nothing began", ids)
		}
		return tx, c, n.Load() - before, err
	}
	tx, c, trips, err := claim("a", "b", "c")
	if err != nil || !c[0].New || !c[1].New || !c[2].New || trips != 1 {
		t.Fatalf("a, b, c: %+v, %d round trips, %v; want all new in one", c, trips, err)
	}
	if err := idemtest.D(st).Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	tx, c, trips, err = claim("b", "d")
	if err != nil || c[0].New || !c[1].New || trips != 1 {
		_ = idemtest.D(st).Rollback(ctx, tx)
		t.Fatalf("b, d: %+v, %d round trips, %v; want d new in one", c, trips, err)
	}
	if err := idemtest.D(st).Rollback(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := claim("d", "bad\xff"); !errors.Is(err, seam.ErrData) {
		t.Errorf("d, bad\\xff: %v, want a data error", err)
	}
	if s := pool.Stat(); s.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", s.AcquiredConns())
	}
}

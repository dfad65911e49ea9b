package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/postgres"
)

// serverErrors records the errors the server answered any statement with
// (each one a line in the server's log, and a rolled-back transaction).
type serverErrors struct {
	mu   sync.Mutex
	errs []string
}

func (s *serverErrors) add(err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		s.mu.Lock()
		s.errs = append(s.errs, pe.Code+" "+pe.Message)
		s.mu.Unlock()
	}
}

func (s *serverErrors) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.errs
	s.errs = nil
	return e
}

func (s *serverErrors) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (s *serverErrors) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	s.add(d.Err)
}
func (s *serverErrors) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (s *serverErrors) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.Err)
}
func (s *serverErrors) TraceBatchEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	s.add(d.Err)
}

// tracedStore returns a store, plain or with a sliced inbox, on a pool
// whose server errors se records.
func tracedStore(t *testing.T, sliced bool) (*serverErrors, *pgxpool.Pool, *postgres.Store) {
	t.Helper()
	se := &serverErrors{}
	pool := newPoolConfig(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = se })
	var opts *postgres.Options
	if sliced {
		opts = &postgres.Options{InboxSlice: time.Minute}
	}
	st, err := postgres.New(t.Context(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	return se, pool, st
}

// TestDuplicateClaimRaisesNoError: BeginClaim of a duplicate, alone or in
// a batch, in the current table or (sliced) the previous one, reports it
// as a duplicate without the server raising an error (no error log line,
// no rolled-back transaction, no dead row); only two claimers of the same
// new ID at once meet at the unique index, and the second still reports
// a duplicate.
func TestDuplicateClaimRaisesNoError(t *testing.T) {
	for _, sliced := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "sliced"}[sliced], func(t *testing.T) {
			se, pool, st := tracedStore(t, sliced)
			ctx := t.Context()
			d := idemtest.D(st)
			claim := func(ids ...string) (pgx.Tx, bool, []seam.Claimed) {
				t.Helper()
				tx, began, c, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids, At: t0})
				if err != nil {
					t.Fatalf("%v: %v", ids, err)
				}
				return tx, began, c
			}
			commit := func(tx pgx.Tx) {
				t.Helper()
				if err := d.Commit(ctx, tx); err != nil {
					t.Fatal(err)
				}
			}
			tx, began, c := claim("a")
			if !began || !c[0].New {
				t.Fatalf("a: %v %+v", began, c)
			}
			commit(tx)
			tx, began, c = claim("b", "c")
			if !began || !c[0].New || !c[1].New {
				t.Fatalf("b, c: %v %+v", began, c)
			}
			commit(tx)
			dups := func(where string) {
				t.Helper()
				if tx, began, c := claim("a"); began || tx != nil || c[0].New {
					t.Errorf("%s: a again: %v %v %+v, want a duplicate", where, tx, began, c)
				}
				tx, began, c := claim("b", "a", "d", "c")
				if !began || c[0].New || c[1].New || !c[2].New || c[3].New {
					t.Errorf("%s: b, a, d, c: %v %+v, want only d new", where, began, c)
				}
				if began {
					_ = d.Rollback(ctx, tx)
				}
				tx, began, c = claim("c", "a")
				if !began || c[0].New || c[1].New {
					t.Errorf("%s: c, a: %v %+v, want both duplicates", where, began, c)
				}
				if began {
					_ = d.Rollback(ctx, tx)
				}
				if e := se.take(); len(e) != 0 {
					t.Errorf("%s: the duplicates' claims raised %v on the server", where, e)
				}
			}
			dups("current table")
			if sliced {
				if _, err := postgres.Expire(ctx, st, "c", t0, time.Minute); err != nil {
					t.Fatal(err)
				}
				se.take()
				dups("previous table")
			}
			// A race: the second claimer of a new ID waits for the first
			// and, once it commits, fails at the unique index; it still
			// reports a duplicate (one ID) or which are new (several).
			for _, ids := range [][]string{{"r1"}, {"r2", "r3"}} {
				first, began, _ := claim(ids...)
				if !began {
					t.Fatalf("%v: nothing began", ids)
				}
				type result struct {
					tx    pgx.Tx
					began bool
					c     []seam.Claimed
					err   error
				}
				done := make(chan result, 1)
				second := ids
				if len(ids) > 1 {
					second = append(ids[:len(ids):len(ids)], "r4")
				}
				go func() {
					tx, began, c, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: second, At: t0})
					done <- result{tx, began, c, err}
				}()
				time.Sleep(100 * time.Millisecond) // the second claimer waits on the first's row
				commit(first)
				r := <-done
				if r.err != nil || !r.began && len(ids) > 1 || r.c[0].New || r.c[len(r.c)-1].New != (len(ids) > 1) {
					t.Errorf("%v raced: %v %+v %v", ids, r.began, r.c, r.err)
				}
				if r.began {
					_ = d.Rollback(ctx, r.tx)
				}
			}
			if s := pool.Stat(); s.AcquiredConns() != 0 {
				t.Errorf("%d connections still acquired", s.AcquiredConns())
			}
		})
	}
}

// TestBatchClaimRepeatedIDs: a batch claim (BeginClaim of several IDs)
// that holds an ID more than once, on the plain and the sliced inbox,
// claims its first copy and reports the later ones as duplicates, with
// no error raised on the server (before, the array's repeated ID failed
// the INSERT at the unique index, and the claim fell back to a second
// round trip that reported every copy new); one record per ID.
func TestBatchClaimRepeatedIDs(t *testing.T) {
	for _, sliced := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "sliced"}[sliced], func(t *testing.T) {
			se, pool, st := tracedStore(t, sliced)
			ctx := t.Context()
			d := idemtest.D(st)
			tx, began, c, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: []string{"a", "b", "a", "c", "b", "a"}, At: t0})
			if err != nil || !began {
				t.Fatalf("claim: %v %v", began, err)
			}
			var news []bool
			for _, x := range c {
				news = append(news, x.New)
			}
			if want := []bool{true, true, false, true, false, false}; len(news) != len(want) || fmt.Sprint(news) != fmt.Sprint(want) {
				t.Errorf("a, b, a, c, b, a: new %v, want %v", news, want)
			}
			if err := d.Commit(ctx, tx); err != nil {
				t.Fatal(err)
			}
			if e := se.take(); len(e) != 0 {
				t.Errorf("the claim raised %v on the server", e)
			}
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM wary_inbox WHERE consumer = 'c'").Scan(&n); err != nil || n != 3 {
				t.Errorf("%d records, %v; want 3", n, err)
			}
			// Already claimed, and repeated: all duplicates.
			tx, began, c, err = d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: []string{"c", "c", "d", "d"}, At: t0})
			if err != nil || !began || c[0].New || c[1].New || !c[2].New || c[3].New {
				t.Errorf("c, c, d, d: %v %+v %v; want only the first d new", began, c, err)
			}
			if began {
				_ = d.Rollback(ctx, tx)
			}
		})
	}
}

package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

// FuzzClaim: for any message ID, the inbox's claim sent with BEGIN
// (BeginClaim) and the plain parameterised claim (Begin, then Claim) agree
// on claimed, duplicate or refused (and on the SQLSTATE of a refusal), on a
// UTF-8 session and on a Shift-JIS one with backslash_quote=on, where a
// claim built as SQL text would run part of the ID as SQL.
func FuzzClaim(f *testing.F) {
	for _, s := range []string{"m1", "a'b", `a\'b`, `\`, "'); DROP TABLE wary_inbox; --", "$$x$$", "é日本", "a\x00b", "bad\xff",
		hostileID, "Á\\'", strings.Repeat("x", 3000), "表", "\u00a0", "line\nbreak"} {
		f.Add(s)
	}
	ctx := context.Background()
	type pair struct{ fast, plain *postgres.Store }
	var sessions []pair
	for _, params := range []map[string]string{nil, {"client_encoding": "SJIS", "backslash_quote": "on"}} {
		pool := newPoolParams(f, params)
		fast, err := postgres.New(ctx, pool, &postgres.Options{Prefix: "fast_"})
		if err != nil {
			f.Fatal(err)
		}
		plain, err := postgres.New(ctx, pool, &postgres.Options{Prefix: "plain_"})
		if err != nil {
			f.Fatal(err)
		}
		sessions = append(sessions, pair{fast, plain})
	}
	outcome := func(claimed bool, err error) string {
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe):
			return "refused " + pe.Code
		case err != nil:
			return "error " + err.Error()
		case claimed:
			return "claimed"
		}
		return "duplicate"
	}
	f.Fuzz(func(t *testing.T, id string) {
		for i, s := range sessions {
			for range 2 { // the second time, a claimed ID is a duplicate
				now := time.Now()
				tx, ok, err := beginClaim(ctx, s.fast, "c", id, now)
				if ok {
					err = idemtest.D(s.fast).Commit(ctx, tx)
				}
				fast := outcome(ok, err)
				ptx, err := idemtest.D(s.plain).Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ok, err = claimOne(ctx, s.plain, ptx, "c", id, now)
				if ok && err == nil {
					err = idemtest.D(s.plain).Commit(ctx, ptx)
				} else {
					_ = idemtest.D(s.plain).Rollback(ctx, ptx)
				}
				if plain := outcome(ok, err); fast != plain {
					t.Fatalf("session %d, ID %q: BeginClaim %s, parameterised claim %s", i, id, fast, plain)
				}
			}
		}
	})
}

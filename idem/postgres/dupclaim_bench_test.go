package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/postgres"
)

// BenchmarkDuplicateClaim: BeginClaim of a message already claimed (a
// redelivery), alone and in a batch of 100 holding 50 duplicates (the
// batch's transaction rolled back), for comparing builds.
func BenchmarkDuplicateClaim(b *testing.B) {
	pool := newPool(b)
	ctx := b.Context()
	st, err := postgres.New(ctx, pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	d := idemtest.D(st)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("id%03d", i)
	}
	tx, _, _, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids[:50], At: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Commit(ctx, tx); err != nil {
		b.Fatal(err)
	}
	b.Run("single", func(b *testing.B) {
		for b.Loop() {
			_, began, c, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids[:1], At: time.Now()})
			if err != nil || began || c[0].New {
				b.Fatal(began, c, err)
			}
		}
	})
	b.Run("batch100", func(b *testing.B) {
		for b.Loop() {
			tx, began, c, err := d.BeginClaim(ctx, seam.ClaimRequest{Consumer: "c", IDs: ids, At: time.Now()})
			if err != nil || !began || c[0].New || !c[99].New {
				b.Fatal(began, err)
			}
			if err := d.Rollback(ctx, tx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

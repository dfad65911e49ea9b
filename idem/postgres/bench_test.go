package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkInbox: messages/s through the inbox vs. the bare transaction,
// with the statements (each one round trip) sent per message.
func BenchmarkInbox(b *testing.B) {
	var n atomic.Int64
	idemtest.BenchCounted(b, func(t testing.TB) idemtest.DB[pgx.Tx] { return testDB{countingPool(t, &n)} }, n.Load)
}

// BenchmarkInboxSliced is BenchmarkInbox on a sliced inbox
// (Options.InboxSlice, 72 hours: the inbox's retention is 24).
func BenchmarkInboxSliced(b *testing.B) {
	var n atomic.Int64
	idemtest.BenchCounted(b, func(t testing.TB) idemtest.DB[pgx.Tx] {
		return slicedDB{testDB{countingPool(t, &n)}, 72 * time.Hour}
	}, n.Load)
}

// countingPool is newPool with a tracer counting the round trips: each
// statement sent alone, and each batch (one pipeline, one round trip).
func countingPool(t testing.TB, n *atomic.Int64) *pgxpool.Pool {
	t.Helper()
	return newPoolConfig(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = counter{n} })
}

type counter struct{ n *atomic.Int64 }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

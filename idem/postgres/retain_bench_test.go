package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/postgres"
)

// BenchmarkInboxRetention: claims on an inbox of WARY_RETAIN_ROWS records
// (20,000,000 for the recorded sitting; the benchmark does not run
// without it) whose retention expires records continuously, by whole
// tables (Options.InboxSlice) and by row deletes, on the same records, and
// on empty inboxes of both kinds, in interleaved rounds of
// WARY_RETAIN_ROUND (default 20s). Run it with -benchtime=1x.
//
// The records span one retention R of a clock that runs at R per
// WARY_RETAIN_TURNOVER (default 200s) of real time, so that the expiry
// has about rows/turnover records a second to remove: by rotations every
// R (InboxSlice = R; the current table was created at t0-3R/4 and holds
// the last three quarters of the records, the previous table the first
// quarter, so a rotation falls R/4 into the run), or by deletes of 1,000
// records a transaction in a loop (idem's Purge).
// Eight claimers claim new messages, each in its own transaction
// (BeginClaim, commit); the claim's latency is BeginClaim to commit.
// Reported per kind: claim p50 and p99, the p99 against the empty inbox
// of the same kind, records expired, the inbox's size (tables and
// indexes) and its dead tuples at the end.
func BenchmarkInboxRetention(b *testing.B) {
	rows := envInt("WARY_RETAIN_ROWS")
	if rows == 0 {
		b.Skip("set WARY_RETAIN_ROWS (20000000 for the recorded sitting) to run")
	}
	round, turnover := 20*time.Second, 200*time.Second
	if n := envInt("WARY_RETAIN_ROUND"); n > 0 {
		round = time.Duration(n) * time.Second
	}
	if n := envInt("WARY_RETAIN_TURNOVER"); n > 0 {
		turnover = time.Duration(n) * time.Second
	}
	const retention, claimers, rounds = 100 * time.Minute, 8, 3
	pool := newPoolConfig(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 16 })
	ctx := b.Context()
	kinds := []*retainKind{
		{name: "slices", prefix: "wary_", slice: retention, full: true},
		{name: "rows", prefix: "rows_", full: true},
		{name: "slices-empty", prefix: "es_", slice: retention},
		{name: "rows-empty", prefix: "er_"},
	}
	for _, k := range kinds {
		st, err := postgres.New(ctx, pool, &postgres.Options{Prefix: k.prefix, InboxSlice: k.slice})
		if err != nil {
			b.Fatal(err)
		}
		k.st, k.pool, k.clock = st, pool, t0
		if k.slice > 0 { // the current table's mark: its rotation at t0-3R/4
			if _, err := pool.Exec(ctx, "UPDATE "+k.prefix+"inbox SET processed_at = $1 WHERE consumer = ''", t0.Add(-3*retention/4)); err != nil {
				b.Fatal(err)
			}
		}
		if k.full {
			start := time.Now()
			k.load(b, rows, retention)
			b.Logf("%s: loaded %d records in %s", k.name, rows, time.Since(start).Round(time.Second))
		}
	}
	speed := float64(retention) / float64(turnover) // clock time per real time
	for r := range rounds {
		for _, k := range kinds {
			k.run(b, r, round, speed, retention, claimers)
		}
	}
	for _, k := range kinds {
		k.report(b, kinds)
	}
}

type retainKind struct {
	name, prefix string
	slice        time.Duration
	full         bool
	st           *postgres.Store
	pool         *pgxpool.Pool
	clock        time.Time // the kind's clock, advanced while it runs
	lat          []time.Duration
	claims       int
	expired      int
	expireErrs   int
}

// load inserts n records of consumer c spread evenly over the retention
// before t0; sliced, those before the current table's mark go to the
// previous table.
func (k *retainKind) load(b *testing.B, n int, retention time.Duration) {
	ctx := b.Context()
	const records = `SELECT 'c', 'old-' || g, ts, 1 FROM (SELECT g, $1::timestamptz + (g - 1) * $2::interval / $3 AS ts
			FROM generate_series(1, $3) AS g) AS x`
	q := []string{`INSERT INTO ` + k.prefix + `inbox (consumer, message_id, processed_at, v) ` + records}
	if k.slice > 0 {
		q = []string{
			`INSERT INTO ` + k.prefix + `inbox_prev (consumer, message_id, processed_at, v) ` + records + ` WHERE ts < $4`,
			`INSERT INTO ` + k.prefix + `inbox (consumer, message_id, processed_at, v) ` + records + ` WHERE ts >= $4`,
		}
	}
	args := []any{t0.Add(-retention), retention, n}
	if k.slice > 0 {
		args = append(args, t0.Add(-3*retention/4))
	}
	for _, q := range q {
		if _, err := k.pool.Exec(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := k.pool.Exec(ctx, "VACUUM ANALYZE "+k.prefix+"inbox, "+k.prefix+"inbox_prev"); err != nil {
		b.Fatal(err)
	}
}

// run is one round of d: claimers claim while the expiry runs, the
// kind's clock advancing at speed.
func (k *retainKind) run(b *testing.B, r int, d time.Duration, speed float64, retention time.Duration, claimers int) {
	ctx, cancel := context.WithTimeout(b.Context(), d)
	defer cancel()
	start, base := time.Now(), k.clock
	now := func() time.Time { return base.Add(time.Duration(float64(time.Since(start)) * speed)) }
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seq atomic.Int64
	wg.Go(func() { // the expiry: idem's Purge loop, every 100ms
		for ctx.Err() == nil {
			n, err := postgres.Expire(ctx, k.st, "c", now(), retention)
			k.expired += n
			if err != nil && ctx.Err() == nil {
				k.expireErrs++
				b.Logf("%s: expire: %v", k.name, err)
			}
			if n < 1000 {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	})
	for c := range claimers {
		wg.Go(func() {
			var lat []time.Duration
			for ctx.Err() == nil {
				id := fmt.Sprintf("r%d-c%d-%d", r, c, seq.Add(1))
				t := time.Now()
				tx, ok, err := beginClaim(ctx, k.st, "c", id, now())
				if err == nil && ok {
					err = idemtest.D(k.st).Commit(ctx, tx)
				}
				if err != nil || !ok {
					if ctx.Err() == nil {
						b.Errorf("%s: claim %s: %v %v", k.name, id, ok, err)
					}
					break
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			k.lat = append(k.lat, lat...)
			k.claims += len(lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	k.clock = now()
	size, live, dead, del := k.stats(b)
	b.Logf("round %d, %s: inbox %d MB, %d live, %d dead, %d deleted tuples; %d records expired so far",
		r, k.name, size>>20, live, dead, del, k.expired)
}

// stats returns the size of the kind's inbox (all its tables and indexes)
// and its tuple counts from pg_stat_user_tables.
func (k *retainKind) stats(b *testing.B) (size, live, dead, del int64) {
	err := k.pool.QueryRow(b.Context(), `SELECT coalesce(sum(pg_total_relation_size(relid)), 0), coalesce(sum(n_live_tup), 0),
		coalesce(sum(n_dead_tup), 0), coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables
		WHERE schemaname = current_schema() AND relname ~ $1`, "^"+k.prefix+"inbox(_prev)?$").Scan(&size, &live, &dead, &del)
	if err != nil {
		b.Fatal(err)
	}
	return size, live, dead, del
}

func (k *retainKind) p(q float64) time.Duration {
	slices.Sort(k.lat)
	if len(k.lat) == 0 {
		return 0
	}
	return k.lat[min(len(k.lat)-1, int(q*float64(len(k.lat))))]
}

func (k *retainKind) report(b *testing.B, kinds []*retainKind) {
	size, live, dead, del := k.stats(b)
	var empty *retainKind
	for _, e := range kinds {
		if e.name == k.name+"-empty" {
			empty = e
		}
	}
	ratio := ""
	if empty != nil {
		ratio = fmt.Sprintf(", p99 %.2f× the empty inbox's", float64(k.p(0.99))/float64(empty.p(0.99)))
		b.ReportMetric(float64(k.p(0.99))/float64(empty.p(0.99)), k.name+"-p99/empty")
	}
	b.Logf("%s: %d claims, p50 %s, p99 %s%s; %d records expired (%d expiry errors); inbox %d MB, %d live, %d dead, %d deleted tuples",
		k.name, k.claims, k.p(0.5).Round(time.Microsecond), k.p(0.99).Round(time.Microsecond), ratio,
		k.expired, k.expireErrs, size>>20, live, dead, del)
}

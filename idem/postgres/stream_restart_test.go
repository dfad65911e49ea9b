package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestStreamServerRestart: PostgreSQL (a private cluster) is restarted
// under a streaming relay, cleanly and by a crash, while producers commit
// rows on shared aggregates before, during and after the restart. The
// relay streams again; every committed row arrives, each aggregate in
// sequence order; the messages sent again are rows committed before the
// restart, each sent once more at most (docs/outbox-wal.md, "Failure and
// takeover"); the slot's confirmed position passes the rows committed
// after it.
func TestStreamServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(*privateCluster)
	}{{"clean", (*privateCluster).Restart}, {"crash", (*privateCluster).Crash}} {
		t.Run(tc.name, func(t *testing.T) { streamServerRestart(t, tc.restart) })
	}
}

func streamServerRestart(t *testing.T, restart func(*privateCluster)) {
	pc := newPrivateCluster(t)
	cfg, err := pgxpool.ParseConfig(pc.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := setupStream(t, pool)
	if _, err := pool.Exec(e.ctx, `CREATE TABLE committed (message_id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	h := conformance.NewHistory()
	topic, c := e.consuming(h)
	t.Cleanup(func() {
		if t.Failed() { // what was lost, if a wait timed out
			t.Logf("history: %s", h.Check())
		}
	})
	// A server out of reach is not one that cannot stream: the relay does
	// not poll the table for StreamRetry, it streams again once the server
	// is back (within waitFor's minute).
	r := e.relay(topic, &outbox.RelayOptions{BatchSize: 50}, postgres.SourceOptions{Pipeline: 4, StreamRetry: time.Hour})
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })

	p := &producers{e: e, h: h}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { p.run(i, stop) })
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	e.waitFor("rows before the restart", func() bool { return c.distinct() >= 200 })
	restart(pc)
	before := p.committedIDs() // every row committed before the server went down, and maybe a few since
	e.connectAdmin()
	// Any stream on the restarted server is one the relay opened again.
	e.waitFor("the relay to stream again", func() bool {
		return r.Stats().Streaming && e.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active`, e.slot) == 1
	})
	n := p.committed.Load()
	e.waitFor("rows after the restart", func() bool { return p.committed.Load() >= n+200 })
	close(stop)
	wg.Wait()
	for _, id := range p.resolve() { // a COMMIT that failed is one at the restart
		before[id] = true
	}

	var end string
	if err := e.admin.QueryRow(e.ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	e.waitFor("every committed row", func() bool { return len(h.Check().Lost) == 0 })
	e.waitFor("the slot's confirmed position to pass the last commit", func() bool {
		return e.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn >= $2::pg_lsn`, e.slot, end) == 1
	})
	e.waitFor("the rows to leave the table", func() bool { return e.rows(0) == 0 })
	rep := h.Check()
	if !rep.Valid() {
		t.Errorf("history: %s", rep)
	}
	c.check(t, nil)
	for _, id := range rep.DuplicateDeliveries {
		if !before[id] || c.count(id) > 2 {
			t.Errorf("%s arrived %d times (committed before the restart: %v); want rows committed before it, sent once more at most", id, c.count(id), before[id])
		}
	}
	t.Logf("%d rows committed, %d before the restart; %d unsure commits; history: %s", p.committed.Load(), len(before), p.unsureN, rep)
}

// producers add one row a transaction, on aggregates they share. A
// transaction that fails (the server is down) is tried again with a new
// message ID; one whose COMMIT failed may have committed, which the table
// committed tells once the server is back (resolve; a transaction ID
// would not: one the log did not keep before a crash is given again).
type producers struct {
	e         *streamEnv
	h         *conformance.History
	committed atomic.Int64
	mu        sync.Mutex
	ids       []string // committed
	unsure    []string // message IDs whose COMMIT failed
	unsureN   int
}

func (p *producers) run(n int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		for try := 0; ; try++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("p%d-%d-%d", n, i, try)
			m := &outbox.Message{ID: id, AggregateID: fmt.Sprintf("a%d", (n+i)%6), Payload: []byte("x")}
			ok, unsure := p.add(m)
			if ok {
				p.mu.Lock()
				p.ids = append(p.ids, id)
				p.mu.Unlock()
				p.h.Sent(id)
				p.committed.Add(1)
				break
			}
			if unsure {
				p.mu.Lock()
				p.unsure, p.unsureN = append(p.unsure, id), p.unsureN+1
				p.mu.Unlock()
			}
			// The server is down: the next try is a new connection
			// attempt (no signal says when it is back).
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// add commits m, and its ID into the table committed, in a transaction
// of its own: ok if it committed; unsure if its COMMIT failed (it may
// have committed).
func (p *producers) add(m *outbox.Message) (ok, unsure bool) {
	e := p.e
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		return false, false
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := e.ob.Add(e.ctx, tx, m); err != nil {
		return false, false
	}
	if _, err := tx.Exec(e.ctx, `INSERT INTO committed VALUES ($1)`, m.ID); err != nil {
		return false, false
	}
	if err := tx.Commit(e.ctx); err != nil {
		return false, true
	}
	return true, false
}

// resolve records as sent the rows whose COMMIT failed but whose
// transaction committed, and returns their IDs.
func (p *producers) resolve() (ids []string) {
	e := p.e
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := e.pool.Query(e.ctx, `SELECT message_id FROM committed WHERE message_id = ANY($1)`, p.unsure)
	if err == nil {
		ids, err = pgx.CollectRows(rs, pgx.RowTo[string])
	}
	if err != nil {
		e.t.Fatal(err)
	}
	for _, id := range ids {
		p.ids = append(p.ids, id)
		p.h.Sent(id)
		p.committed.Add(1)
	}
	p.unsure = nil
	return ids
}

// committedIDs returns the IDs of the rows committed so far.
func (p *producers) committedIDs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]bool, len(p.ids))
	for _, id := range p.ids {
		m[id] = true
	}
	return m
}

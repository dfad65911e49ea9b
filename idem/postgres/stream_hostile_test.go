package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
)

// TestStreamHostileRows: rows the stream cannot publish (message IDs of
// white space or none, no aggregate ID, headers that are not a JSON object
// of strings), written by plain SQL while the relay streams, are
// quarantined with their error, each holding only its aggregate, and the
// stream publishes every other aggregate's rows and confirms past them:
// it is never reopened for them.
func TestStreamHostileRows(t *testing.T) {
	e := setupStream(t, newPool(t))
	topic, subscribe, _, _ := memoryTopic(t, &memory.TopicConfig{Profile: memory.SQSFIFO, DedupWindow: -1, DeliveryLimit: -1})
	sub := subscribe(t)
	r := e.relay(topic, nil)
	e.run(r)
	e.waitFor("the relay to stream", func() bool { return r.Stats().Streaming })
	oe := &idemtest.OutboxEnv[pgx.Tx]{Env: &idemtest.Env[pgx.Tx]{T: t, Ctx: e.ctx, DB: testDB{e.pool}, Store: e.st, Driver: idemtest.D(e.st)},
		OS: idemtest.D(e.st), Outbox: e.ob}
	h := idemtest.WriteHostile(oe)
	e.waitFor("the good rows published and the hostile ones quarantined", func() bool {
		return e.rows(0) == int64(h.Held()) && e.rows(1, 2, 3) == int64(h.Bad())
	})
	h.Check(t, idemtest.Drain(t, sub), oe.Rows(outbox.Filter{}))
	if s := r.Stats(); s.Quarantines != int64(h.Bad()) || !s.Streaming {
		t.Errorf("relay stats %+v, want %d quarantines, streaming", s, h.Bad())
	}
	// The slot is confirmed past the hostile rows: a stream opened on it
	// would not bring them again.
	var end string
	if err := e.pool.QueryRow(e.ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the slot confirmed past the rows", func() bool {
		return e.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn >= $2::pg_lsn`, e.slot, end) == 1
	})
}

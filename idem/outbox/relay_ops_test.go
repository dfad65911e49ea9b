package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Stopping Run while a batch is being published releases the batch
// unmarked (not the rows' fault: no attempt counted), closes the source
// once nothing is live, and returns nil.
func TestRunStopsCleanly(t *testing.T) {
	for _, rows := range []int{1, 2} {
		g := newRig(t)
		stall := make(chan struct{})
		g.ft.stall = stall
		for i := range rows {
			g.add(msg(string(rune('a'+i)), 1))
		}
		r := g.relay(&RelayOptions{PurgeInterval: -1})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-stall
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("%d rows: Run: %v", rows, err)
		}
		if calls := g.s.settleCalls(); len(calls) != 1 || calls[0].out != nil {
			t.Errorf("%d rows: settles %+v, want one release", rows, calls)
		}
		for _, row := range g.s.all() {
			if row.State != Pending || row.Attempts != 0 {
				t.Errorf("%d rows: row %+v, want pending, no attempt counted", rows, row)
			}
		}
		g.s.mu.Lock()
		closed := g.s.srcs[0].closed
		g.s.mu.Unlock()
		if st := r.Stats(); !closed || st.Failed != 0 || st.Published != 0 {
			t.Errorf("%d rows: source closed %v, stats %+v", rows, closed, st)
		}
	}
}

// Run returns, with an error matching broker.ErrClosed, when its topic is
// closed; the batch is settled with nothing recorded against its rows.
func TestRunReturnsWhenTheTopicIsClosed(t *testing.T) {
	g := newRig(t)
	g.add(msg("a", 1))
	if err := g.topic.Close(); err != nil {
		t.Fatal(err)
	}
	r := g.relay(&RelayOptions{PurgeInterval: -1})
	if err := r.Run(context.Background()); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("Run: %v, want ErrClosed", err)
	}
	if row := g.s.all()[0]; row.State != Pending || row.Attempts != 0 {
		t.Errorf("row %+v, want pending, no attempt counted", row)
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if !g.s.srcs[0].closed {
		t.Errorf("source left open")
	}
}

// Purge deletes sent and discarded rows older than KeepSent, PurgeBatch
// at a time, and keeps the others; Run purges when it starts unless
// PurgeInterval is negative.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	now := g.clock.Now()
	old := now.Add(-2 * time.Hour)
	for i := range 5 {
		g.s.put(Row{Message: *msg("a", int64(i+1)), State: Sent, SentAt: old})
	}
	g.s.put(Row{Message: *msg("b", 1), State: Discarded, SentAt: old},
		Row{Message: *msg("b", 2), State: Sent, SentAt: now.Add(-time.Minute)},
		Row{Message: *msg("c", 1), State: Pending, CreatedAt: old})
	r := g.relay(&RelayOptions{KeepSent: time.Hour, PurgeBatch: 2, PurgeInterval: -1})
	n, err := r.Purge(ctx)
	if err != nil || n != 6 {
		t.Fatalf("Purge: %d, %v; want 6", n, err)
	}
	if !slices.Equal(g.s.purges, []int{2, 2, 2, 0}) {
		t.Errorf("purge calls %v, want 2, 2, 2, 0", g.s.purges)
	}
	if left := g.s.all(); len(left) != 2 || left[0].ID != "b/2" || left[1].ID != "c/1" {
		t.Errorf("left %+v, want b/2 and c/1", left)
	}
	boom := errors.New("locked")
	g.s.set(func(s *fakeStore) { s.f.purge = boom })
	if _, err := r.Purge(ctx); !errors.Is(err, boom) {
		t.Errorf("Purge: %v, want %v", err, boom)
	}

	for _, interval := range []time.Duration{-1, time.Hour} {
		g.s.set(func(s *fakeStore) { s.f.purge, s.purges = nil, nil })
		opened := len(g.s.srcs)
		r := g.relay(&RelayOptions{PurgeInterval: interval})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		g.s.waitFor("Run to wait", func() bool { return len(g.s.srcs) > opened && g.s.srcs[opened].idle > 0 })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if purged := len(g.s.purges) > 0; purged != (interval > 0) {
			t.Errorf("PurgeInterval %s: Run purged: %v", interval, purged)
		}
	}
}

// Discard gives up a quarantined or pending row: it is never published,
// and its aggregate's later rows flow; a sent row cannot be discarded.
func TestDiscard(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	g.s.put(Row{Message: *msg("a", 1), State: Quarantined, LastError: "too large"},
		Row{Message: *msg("a", 2)}, Row{Message: *msg("b", 1)}, Row{Message: *msg("b", 2)})
	r := g.relay(nil)
	rows := g.s.all()
	if n, err := r.Drain(ctx); n != 2 || err != nil {
		t.Fatalf("Drain: %d, %v; want b's two rows", n, err)
	}
	for _, id := range []int64{rows[0].RowID, rows[1].RowID} {
		if ok, err := r.Discard(ctx, id); !ok || err != nil {
			t.Fatalf("Discard(%d): %v, %v", id, ok, err)
		}
	}
	if ok, err := r.Discard(ctx, rows[2].RowID); ok || err != nil {
		t.Errorf("Discard of a sent row: %v, %v; want false", ok, err)
	}
	if row := g.s.row(rows[0].RowID); row.State != Discarded || !row.SentAt.Equal(g.clock.Now()) {
		t.Errorf("discarded row %+v", row)
	}
	if n, err := r.Drain(ctx); n != 0 || err != nil {
		t.Fatalf("Drain after Discard: %d, %v", n, err)
	}
	boom := errors.New("read-only")
	g.s.set(func(s *fakeStore) { s.f.setState = boom })
	if _, err := r.Discard(ctx, rows[3].RowID); !errors.Is(err, boom) {
		t.Errorf("Discard: %v, want %v", err, boom)
	}
	if _, err := r.Requeue(ctx, rows[3].RowID); !errors.Is(err, boom) {
		t.Errorf("Requeue: %v, want %v", err, boom)
	}
	if got := ids(g.receive(2)); !slices.Equal(got, []string{"b/1", "b/2"}) {
		t.Errorf("published %v", got)
	}
}

// NewRelay refuses invalid options with errors matching broker.ErrInvalid,
// and fills the defaults in.
func TestRelayOptions(t *testing.T) {
	g := newRig(t)
	for name, o := range map[string]RelayOptions{
		"BatchSize":       {BatchSize: -1},
		"Concurrency":     {Concurrency: -1},
		"MaxAttempts":     {MaxAttempts: -1},
		"PurgeBatch":      {PurgeBatch: -1},
		"PollInterval":    {PollInterval: -time.Second},
		"PublishTimeout":  {PublishTimeout: -time.Second},
		"KeepSent":        {KeepSent: -time.Second},
		"Backoff.Initial": {Backoff: broker.Backoff{Initial: -1}},
		"Backoff.Max":     {Backoff: broker.Backoff{Initial: time.Minute, Max: time.Second}},
	} {
		_, err := NewRelay(g.s, g.topic, &o)
		if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrInvalid naming it", name, err)
		}
	}
	r1, err := NewRelay(g.s, g.topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2 := g.relay(&RelayOptions{Owner: "relay-east"})
	if !strings.HasPrefix(r1.Owner(), "relay-") || r1.Owner() == "relay-" || r2.Owner() != "relay-east" {
		t.Errorf("owners %q, %q", r1.Owner(), r2.Owner())
	}
	if _, err := r1.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := g.s.configs[0]; c.BatchSize != 500 || c.PollInterval != time.Second || c.Owner != r1.Owner() {
		t.Errorf("source config %+v, want the defaults", c)
	}
	st := r1.Statement()
	var stages []string
	for _, l := range st.Lines {
		stages = append(stages, l.Stage)
	}
	if !slices.Equal(stages, []string{"publication", "transport"}) {
		t.Errorf("statement stages %v:\n%s", stages, st)
	}
}

// Health reports the store's backlog beside the relay's counters, and the
// store's error; Stats before any source reports no source state.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	created := g.clock.Now()
	g.add(msg("a", 1))
	g.s.put(Row{Message: *msg("b", 1), Attempts: 2, CreatedAt: created.Add(time.Minute)},
		Row{Message: *msg("c", 1), State: Quarantined, CreatedAt: created.Add(time.Minute)})
	g.clock.Advance(time.Hour)
	r := g.relay(nil)
	if st := r.Stats(); st != (RelayStats{}) {
		t.Errorf("stats of a new relay: %+v", st)
	}
	h, err := r.Health(ctx)
	if err != nil || h.Backlog != 2 || h.Retrying != 1 || h.Quarantined != 1 || !h.OldestUnsent.Equal(created) || h.OldestUnsentAge != time.Hour {
		t.Errorf("Health: %+v, %v", h, err)
	}
	boom := errors.New("timeout")
	g.s.set(func(s *fakeStore) { s.f.health, s.f.list = boom, boom })
	if _, err := r.Health(ctx); !errors.Is(err, boom) {
		t.Errorf("Health: %v, want %v", err, boom)
	}
	if _, err := r.Quarantined(ctx, 1); !errors.Is(err, boom) {
		t.Errorf("Quarantined: %v, want %v", err, boom)
	}
}

// The relay logs a quarantine at Error, with the row, and a failure it
// retries at Warn; Drain returns its source's failure to close.
func TestRelayLogsAndCloseFailure(t *testing.T) {
	g := newRig(t)
	rec := &records{}
	g.ft.setFail(func(*driver.Message, int) error { return errFlaky })
	g.add(msg("a", 1), msg("b", 1))
	r := g.relay(&RelayOptions{Telemetry: broker.Telemetry{Logger: slog.New(rec)}, MaxAttempts: 2})
	boom := errors.New("lease release failed")
	g.s.set(func(s *fakeStore) { s.f.close = boom })
	if _, err := r.Drain(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Drain: %v, want %v", err, boom)
	}
	g.s.set(func(s *fakeStore) {
		s.f.close = nil
		for i := range s.rows {
			s.rows[i].Attempts = 1
			s.rows[i].NextAttempt = time.Time{}
		}
	})
	if _, err := r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	warn, quarantined := rec.find("will retry"), rec.find("quarantined")
	if warn == nil || warn.Level != slog.LevelWarn || quarantined == nil || quarantined.Level != slog.LevelError {
		t.Fatalf("log %v", rec.all())
	}
	attrs := map[string]string{}
	quarantined.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs["owner"] != r.Owner() || attrs["aggregate_id"] == "" || attrs["message_id"] == "" || attrs["attempts"] != "2" ||
		!strings.Contains(attrs["error"], errFlaky.Error()) {
		t.Errorf("quarantine logged with %v", attrs)
	}
}

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r.Clone())
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// find returns the last record whose message contains s.
func (h *records) find(s string) *slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.rs) - 1; i >= 0; i-- {
		if strings.Contains(h.rs[i].Message, s) {
			return &h.rs[i]
		}
	}
	return nil
}

func (h *records) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.rs {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}

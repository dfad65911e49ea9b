package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// TestRelayOutboxGauges: while Run runs, the outbox's backlog and oldest
// unsent age are reported from the store; after Run returns they are not.
func TestRelayOutboxGauges(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "test.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(nil)
	defer b.Close()
	if err := b.CreateTopic("events", &memory.TopicConfig{Profile: memory.Queue}); err != nil {
		t.Fatal(err)
	}
	topic, err := b.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()

	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	outbox, err := idem.NewOutbox[*sql.Tx](st, &idem.OutboxOptions{Now: func() time.Time { return now.Add(-time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := outbox.Add(ctx, tx, &idem.OutboxMessage{ID: id, AggregateID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	gauges := func() map[string]float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, p := range d.DataPoints {
						out[m.Name] = float64(p.Value)
					}
				case metricdata.Gauge[float64]:
					for _, p := range d.DataPoints {
						out[m.Name] = p.Value
					}
				}
			}
		}
		return out
	}
	published := make(chan struct{})
	release := make(chan struct{})
	stop := errors.New("stop")
	relay, err := idem.NewRelay(st, topic, &idem.RelayOptions{MeterProvider: mp, Now: clock, Concurrency: 1, PerAggregate: 1, BatchSize: 1,
		NoListen: true, PurgeInterval: -1, AfterPublish: func(*broker.Message) error {
			select {
			case published <- struct{}{}:
				<-release // hold the first row published and unmarked
				return stop
			default:
				return nil
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if g := gauges(); len(g) != 0 {
		t.Errorf("gauges %v before Run, want none", g)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	<-published
	g := gauges()
	if g["wary.outbox.backlog"] != 3 || g["wary.outbox.oldest_unsent.age"] != 60 || g["wary.outbox.quarantined"] != 0 {
		t.Errorf("gauges while running: %v, want backlog 3, oldest age 60s, none quarantined", g)
	}
	close(release)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g := gauges(); len(g) != 0 {
		t.Errorf("gauges %v after Run returned, want none", g)
	}
}

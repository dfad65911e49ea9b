package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSitting opens the default sitting, with PEERS_EVENTS events per run
// (default small), skipping t when the servers are unreachable (failing
// it with WARY_REQUIRE_SERVICES=1).
func testSitting(t testing.TB, events int) *Sitting {
	if n, err := strconv.Atoi(os.Getenv("PEERS_EVENTS")); err == nil && n > 0 {
		events = n
	}
	cfg := Config{
		PostgresURL: env("WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		RabbitURL:   env("WARY_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/"),
		Events:      events,
		Producers:   8,
		Timeout:     2 * time.Minute,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL or RabbitMQ unreachable: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestSmoke runs every scenario once with a few events: each contender
// delivers every event to the consumer.
func TestSmoke(t *testing.T) {
	s := testSitting(t, 250)
	for _, sc := range Scenarios() {
		res, err := s.Run(t.Context(), sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name(), err)
		}
		if res.Events != s.cfg.Events && res.Events != s.cfg.WatermillEvents {
			t.Errorf("%s: %d events", sc.Name(), res.Events)
		}
		t.Logf("%s: %.0f msgs/s", sc.Name(), res.Rate())
	}
	var buf bytes.Buffer
	table(&buf, Scenarios(), map[Scenario][]Result{})
	if !strings.Contains(buf.String(), "| wary relay, 100/tx, distinct aggregates |") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// BenchmarkPeers runs b.N interleaved rounds of every scenario with
// PEERS_EVENTS events per run (default 10,000) and reports each
// scenario's median msgs/s. The testing package runs one round with b.N=1
// before -benchtime=Nx rounds; treat it as a warm-up. `go run .` prints
// the full table.
func BenchmarkPeers(b *testing.B) {
	s := testSitting(b, 10000)
	results := make(map[Scenario][]Result)
	scs := Scenarios()
	for r := range b.N {
		for _, sc := range append(slices.Clone(scs[r%len(scs):]), scs[:r%len(scs)]...) {
			res, err := s.Run(context.Background(), sc)
			if err != nil {
				b.Fatalf("%s: %v", sc.Name(), err)
			}
			results[sc] = append(results[sc], res)
		}
	}
	for _, sc := range scs {
		unit := strings.NewReplacer(" ", "", ",", "-", "/", "per").Replace(sc.Name())
		b.ReportMetric(median(results[sc], Result.Rate), unit+"-msgs/s")
	}
	b.ReportMetric(0, "ns/op")
}

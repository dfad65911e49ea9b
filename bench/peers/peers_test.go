package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
		MySQLDSN:    env("WARY_MYSQL_URL", "root@tcp(127.0.0.1:3306)/test"),
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
// delivers every event to the consumer (the floor commits them all), the
// outbox contenders and the floor write a domain row per event, and the
// table has a row and the ratios for each.
func TestSmoke(t *testing.T) {
	s := testSitting(t, 250)
	if s.cpu == nil {
		t.Logf("PostgreSQL CPU: n/a (%v)", s.noCPU)
	}
	results := map[Scenario][]Result{}
	for _, sc := range Scenarios() {
		res, err := s.Run(t.Context(), sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name(), err)
		}
		if res.Events != s.cfg.Events && res.Events != s.cfg.WatermillEvents {
			t.Errorf("%s: %d events", sc.Name(), res.Events)
		}
		if (res.PgCPU >= 0) != (s.cpu != nil) {
			t.Errorf("%s: PostgreSQL CPU %v, server local: %v", sc.Name(), res.PgCPU, s.cpu != nil)
		}
		if res.GoCPU <= 0 {
			t.Errorf("%s: this process's CPU %v over a run", sc.Name(), res.GoCPU)
		}
		if (res.BrokerCPU >= 0) != (readProcCPU().broker >= 0) {
			t.Errorf("%s: RabbitMQ CPU %v, broker local: %v", sc.Name(), res.BrokerCPU, readProcCPU().broker >= 0)
		}
		results[sc] = append(results[sc], res)
		t.Logf("%s: %.0f msgs/s, pg cpu %s µs/event (%s)", sc.Name(), res.Rate(), cpuText(res.CPUPerEvent()), res.Relay)
	}
	var buf bytes.Buffer
	table(&buf, Scenarios(), results)
	for _, row := range []string{"| wary relay, 100/tx, distinct aggregates |", "| wary stream, 1/tx, 100 aggregates |", "| floor: domain rows only, 100/tx |",
		"| least row + decode + raw, 1/tx |"} {
		if !strings.Contains(buf.String(), row) {
			t.Errorf("no row %q in the table:\n%s", row, buf.String())
		}
	}
	if r := ratios(Scenario{"stream", 1, 100}, results, 0); !strings.Contains(r, "of the floor") || !strings.Contains(r, "of least row + decode + raw") {
		t.Errorf("stream ratios: %q", r)
	}
}

// TestLeastRow: the least row's producers commit one domain row and one
// outbox row per event in the same transactions, and its reader publishes
// every row from the log.
func TestLeastRow(t *testing.T) {
	s := testSitting(t, 250)
	name, cons, dropQueue, err := s.queue(t.Context(), "least", 250)
	if err != nil {
		t.Fatal(err)
	}
	defer dropQueue()
	pool, drop, err := s.freshPool(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	res, err := s.runLeast(t.Context(), pool, name, Scenario{"least", 100, 0}, 250, cons)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 250 {
		t.Errorf("%d events received, want 250", res.Events)
	}
	var orders, rows, joined int
	if err := pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM `+leastTable+`),
		(SELECT count(*) FROM orders o JOIN `+leastTable+` l ON substr(l.message_id, 2) = substr(o.id, 2))`).Scan(&orders, &rows, &joined); err != nil {
		t.Fatal(err)
	}
	if orders != 250 || rows != 250 || joined != 250 {
		t.Errorf("%d domain rows, %d outbox rows, %d of them paired, want 250 each", orders, rows, joined)
	}
}

// TestDomainRows: every outbox contender's and the floor's producers write
// one domain row per event, in the transaction of the event.
func TestDomainRows(t *testing.T) {
	s := testSitting(t, 250)
	pool, drop, err := s.freshPool(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	if _, err := s.runFloor(t.Context(), pool, Scenario{"floor", 100, 0}, 250); err != nil {
		t.Fatal(err)
	}
	var n, distinct int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT payload) FROM orders`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 250 || distinct != 250 {
		t.Errorf("%d domain rows, %d distinct, want 250", n, distinct)
	}
}

// TestPgCPU: a query that keeps a backend busy shows in the server's CPU.
func TestPgCPU(t *testing.T) {
	s := testSitting(t, 1)
	if s.cpu == nil {
		t.Skipf("PostgreSQL is not on this machine: %v", s.noCPU)
	}
	m := s.begin()
	conn, err := pgx.Connect(t.Context(), s.cfg.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	// Closed at the end of the test: its CPU is counted while it runs
	// and, once it exited, in the postmaster's.
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
		t.Fatal(err)
	}
	if used := m.pgCPU(); used <= 0 {
		t.Errorf("PostgreSQL CPU over a 3,000,000-row query: %v", used)
	}
}

func TestParseStat(t *testing.T) {
	line := "5042 (postgres: 15/main: a (b) c) S 5041 5042 5042 0 -1 4194624 101 0 0 0 7 13 2 3 20 0 1 0 1178 227045376 1686 18446744073709551615"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := stat{comm: "postgres: 15/main: a (b) c", ppid: 5041, utime: 7, stime: 13, cutime: 2, cstime: 3}
	if st != want {
		t.Errorf("parseStat: %+v, want %+v", st, want)
	}
	if _, err := parseStat("5042 (x) S 1 2"); err == nil {
		t.Error("a short line parsed")
	}
}

// TestMySQLDrain drains a small backlog with each MySQL contender: every
// event reaches the consumer, wary's relay counts them all published, and
// the sitting prints a table row for each with the ratios.
func TestMySQLDrain(t *testing.T) {
	s := testSitting(t, 250)
	skipNoMySQL(t, s.cfg.MySQLDSN)
	for _, c := range drainContenders {
		res, err := s.RunDrain(t.Context(), c)
		if err != nil {
			t.Fatalf("%s: %v", drainName(c), err)
		}
		if res.Events != 250 || res.Rate() <= 0 || res.GoCPU <= 0 {
			t.Errorf("%s: %+v", drainName(c), res)
		}
		if c == "wary" {
			var batches int
			var rows float64
			if _, err := fmt.Sscanf(res.Relay, "%d batches of %f rows", &batches, &rows); err != nil || int(float64(batches)*rows+0.5) != 250 {
				t.Errorf("wary relay timing %q: want 250 rows published", res.Relay)
			}
		}
	}
	var out bytes.Buffer
	cfg := s.cfg
	cfg.Events = 100
	if err := mysqlSitting(t.Context(), &out, cfg, 1, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range drainContenders {
		if !strings.Contains(out.String(), "| "+drainName(c)+" |") {
			t.Errorf("no row for %s in\n%s", drainName(c), out.String())
		}
	}
	if !strings.Contains(out.String(), "× | ") {
		t.Errorf("no ratio to Watermill in\n%s", out.String())
	}
}

// skipNoMySQL skips t when the MySQL server at dsn is unreachable
// (failing it with WARY_REQUIRE_SERVICES=1).
func skipNoMySQL(t *testing.T, dsn string) {
	db, err := sql.Open("mysql", dsn)
	if err == nil {
		err = db.PingContext(t.Context())
		_ = db.Close()
	}
	if err != nil {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skipf("MySQL unreachable: %v", err)
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

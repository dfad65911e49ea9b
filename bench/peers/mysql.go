package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/idem/outbox"
)

// The MySQL/MariaDB sitting (-store mysql) measures a drain: a backlog of
// events already committed to the outbox, in transactions of drainPerTx
// over drainAggs aggregates, is relayed to a fresh quorum queue; the
// clock runs from the relay's (or forwarder's) start until the consumer
// has every event. Contenders: wary's polling relay on idem/mysql,
// Watermill's forwarder reading a watermill-sql MySQL topic, and raw
// amqp091-go publishing as many with 256 confirms in flight.
const (
	drainPerTx = 100
	drainAggs  = 100
)

// drainContenders are the MySQL sitting's rows, in interleaving order.
var drainContenders = []string{"wary", "watermill", "raw"}

// drainName is a MySQL drain row's label.
func drainName(contender string) string {
	switch contender {
	case "wary":
		return fmt.Sprintf("wary relay (idem/mysql), drain, %d aggregates", drainAggs)
	case "watermill":
		return "watermill forwarder (watermill-sql MySQL), drain"
	}
	return Scenario{Contender: "raw"}.Name()
}

// mysqlSitting runs rounds interleaved rounds of the drain contenders
// whose label contains only, and writes every run and a table of medians
// to w.
func mysqlSitting(ctx context.Context, w io.Writer, cfg Config, rounds int, only string) error {
	s, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	var cs []string
	for _, c := range drainContenders {
		if strings.Contains(drainName(c), only) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return fmt.Errorf("no contender matches %q", only)
	}
	fmt.Fprintf(w, "# %s, load %s; MySQL drain: a backlog of %d events (Watermill %d) in transactions of %d, %d rounds\n",
		time.Now().UTC().Format(time.DateTime), loadavg(), s.cfg.Events, s.cfg.WatermillEvents, drainPerTx, rounds)
	results := make(map[string][]Result)
	for r := range rounds {
		order := append(slices.Clone(cs[r%len(cs):]), cs[:r%len(cs)]...)
		for _, c := range order {
			res, err := s.RunDrain(ctx, c)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, drainName(c), err)
			}
			results[c] = append(results[c], res)
			fmt.Fprintf(w, "# round %d  %-55s %7.0f msgs/s  (%d events in %.0f ms)  cpu µs/ev: go %s rabbitmq %s  load %s\n",
				r+1, drainName(c), res.Rate(), res.Events, ms(res.Total), cpuText(res.GoCPUPerEvent()), cpuText(res.BrokerCPUPerEvent()), loadavg())
			if res.Relay != "" {
				fmt.Fprintf(w, "#          relay: %s\n", res.Relay)
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | msgs/s, median (min–max) | CPU µs/event: Go process / RabbitMQ | vs Watermill | vs raw |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, c := range cs {
		rs := results[c]
		lo, hi := minmax(rs, Result.Rate)
		vsW, vsR := "–", "–"
		if c == "wary" {
			if wm := results["watermill"]; len(wm) > 0 {
				vsW = fmt.Sprintf("%.1f×", ratio(rs, wm, Result.Rate))
			}
			if raw := results["raw"]; len(raw) > 0 {
				vsR = fmt.Sprintf("%.0f%%", 100*ratio(rs, raw, Result.Rate))
			}
		}
		cpu := medianCPU(rs, Result.GoCPUPerEvent) + " / " + medianCPU(rs, Result.BrokerCPUPerEvent)
		fmt.Fprintf(w, "| %s | %s (%s–%s) | %s | %s | %s |\n", drainName(c), num(median(rs, Result.Rate)), num(lo), num(hi), cpu, vsW, vsR)
	}
	return nil
}

// RunDrain runs one drain contender on a fresh quorum queue and, for the
// outbox contenders, a fresh MySQL database, and removes both afterwards.
func (s *Sitting) RunDrain(ctx context.Context, contender string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	s.seq++
	n := s.cfg.Events
	if contender == "watermill" {
		n = s.cfg.WatermillEvents
	}
	name, cons, drop, err := s.queue(ctx, contender, n)
	if err != nil {
		return Result{}, err
	}
	defer drop()
	if contender == "raw" {
		return s.runRaw(ctx, name, n, cons)
	}
	dsn, dropDB, err := s.freshDatabase(ctx)
	if err != nil {
		return Result{}, err
	}
	defer dropDB()
	switch contender {
	case "wary":
		return s.drainWary(ctx, dsn, name, n, cons)
	case "watermill":
		return s.drainWatermill(ctx, dsn, name, n, cons)
	}
	return Result{}, fmt.Errorf("unknown contender %q", contender)
}

// freshDatabase creates a database of its own for one run on the MySQL
// server and returns its DSN and a function that drops it.
func (s *Sitting) freshDatabase(ctx context.Context) (string, func(), error) {
	cfg, err := mysqldrv.ParseDSN(s.cfg.MySQLDSN)
	if err != nil {
		return "", nil, fmt.Errorf("mysql DSN: %w", err)
	}
	admin, err := sql.Open("mysql", s.cfg.MySQLDSN)
	if err != nil {
		return "", nil, fmt.Errorf("mysql: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "peers_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+db); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	cfg.DBName = db
	return cfg.FormatDSN(), func() {
		_, _ = admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+db)
		_ = admin.Close()
	}, nil
}

// fill commits n events in transactions of drainPerTx on db, each written
// by write(tx, first, last).
func fill(ctx context.Context, db *sql.DB, n int, write func(tx *sql.Tx, first, last int) error) error {
	for first := 0; first < n; first += drainPerTx {
		last := min(first+drainPerTx, n)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := write(tx, first, last); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("events %d-%d: %w", first, last-1, err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// drainWary fills idem/mysql's outbox with n events, then runs one relay
// (default options but BatchSize) publishing to exchange through
// drivers/rabbit until the consumer has them all.
func (s *Sitting) drainWary(ctx context.Context, dsn, exchange string, n int, cons *consumer) (Result, error) {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return Result{}, err
	}
	// READ COMMITTED from the DSN for the database's own pool (MariaDB
	// before 11.1 names it tx_isolation); Open's transaction pool, where
	// the relay's claims run, is READ COMMITTED whatever the DSN says.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	st, err := mysql.Open(ctx, cfg.FormatDSN(), &mysql.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return Result{}, err
	}
	defer st.Close()
	ob, err := outbox.New(st, nil)
	if err != nil {
		return Result{}, err
	}
	err = fill(ctx, st.DB(), n, func(tx *sql.Tx, first, last int) error {
		msgs := make([]*outbox.Message, 0, last-first)
		for i := first; i < last; i++ {
			agg := aggregate(0, i, drainAggs)
			msgs = append(msgs, &outbox.Message{ID: fmt.Sprintf("w%09d", i), AggregateID: agg,
				Type: "order.placed", Payload: payload(i, agg)})
		}
		_, err := ob.Add(ctx, tx, msgs...)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("fill: %w", err)
	}
	topic, err := rabbit.OpenTopic(ctx, s.wconn, rabbit.Topology{Exchange: exchange}, nil)
	if err != nil {
		return Result{}, err
	}
	defer topic.Close()
	relay, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{Owner: "peers", Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
		BatchSize: s.cfg.RelayBatch})
	if err != nil {
		return Result{}, err
	}
	rctx, stopRelay := context.WithCancel(ctx)
	relayErr := make(chan error, 1)
	p0, start := readProcCPU(), time.Now()
	go func() { relayErr <- relay.Run(rctx) }()
	defer func() { stopRelay(); <-relayErr }()
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, fmt.Errorf("%w (relay: %+v)", err, relay.Stats())
	}
	return p0.since(Result{Events: n, Total: at.Sub(start), PgCPU: -1, Relay: settled(relay, n).String()}), nil
}

// drainWatermill fills a watermill-sql MySQL topic (the forwarder's
// outbox) with n events through forwarder.Publisher, then runs a
// forwarder.Forwarder reading it with a watermill-sql Subscriber
// (DefaultMySQLSchema, DefaultMySQLOffsetsAdapter) and publishing to
// exchange with a watermill-amqp Publisher waiting for confirms, until the
// consumer has them all.
func (s *Sitting) drainWatermill(ctx context.Context, dsn, exchange string, n int, cons *consumer) (Result, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	schema := wsql.DefaultMySQLSchema{}
	sub, err := watermillOutbox(wsql.BeginnerFromStdSQL(db), schema, wsql.DefaultMySQLOffsetsAdapter{})
	if err != nil {
		return Result{}, err
	}
	err = fill(ctx, db, n, func(tx *sql.Tx, first, last int) error {
		return watermillPublish(ctx, wsql.TxFromStdSQL(tx), schema, exchange, first, last, drainAggs)
	})
	if err != nil {
		return Result{}, fmt.Errorf("fill: %w", err)
	}
	p0, start := readProcCPU(), time.Now()
	stopFwd, err := s.forward(ctx, sub)
	if err != nil {
		return Result{}, err
	}
	defer stopFwd()
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, err
	}
	return p0.since(Result{Events: n, Total: at.Sub(start), PgCPU: -1}), nil
}

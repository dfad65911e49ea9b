package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/internal/walraw"
)

// runDecode is the "decode + raw" contender end to end: the wary
// contenders' producers, the same transactions (domain rows and wary's
// outbox rows, Outbox.Add), while internal/walraw's reader of a
// publication of the outbox table, on a temporary slot of its own,
// publishes each inserted row's message ID and payload raw with
// amqp091-go (one channel, 256 confirms in flight). No table work: rows
// stay in the table, nothing deleted, no check, no headers, no order kept
// per aggregate beyond the log's, no retries. It is what any relay that
// reads wary's outbox from the log can reach on this machine; the
// streaming relay's ratio to it is what the relay's own work costs, and
// its ratio to the ceiling what the outbox row itself costs.
func (s *Sitting) runDecode(ctx context.Context, pool *pgxpool.Pool, exchange string, sc Scenario, n int, cons *consumer) (Result, error) {
	pst, err := postgres.New(ctx, pool, nil)
	if err != nil {
		return Result{}, err
	}
	ob, err := outbox.New(pst, nil)
	if err != nil {
		return Result{}, err
	}
	relayed, stop, err := s.relayLog(ctx, pool, exchange, "wary_outbox", "peers decode+raw", n)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	m, produced, err := s.produceWary(ctx, pool, ob, sc, n)
	if err != nil {
		return Result{}, err
	}
	if err := relayed(); err != nil {
		return Result{}, fmt.Errorf("decode+raw: %w", err)
	}
	return m.received(ctx, cons, n, produced)
}

// leastTable is runLeast's outbox: the least row an outbox can write, a
// message ID (its primary key) and a payload.
const leastTable = "least_outbox"

// runLeast is the "least row + decode + raw" contender: the floor's
// transactions, each also inserting one row per event into leastTable in
// one statement sent in the same round trip as the COMMIT (a pipeline),
// while runDecode's reader publishes each row raw from the log. No
// sequence, no secondary index, no wake-up, no round trip of its own:
// it is the most any transactional outbox read from the log can reach on
// this machine, and its ratio to the ceiling what such an outbox's row
// and its decoding cost, whoever writes it.
func (s *Sitting) runLeast(ctx context.Context, pool *pgxpool.Pool, exchange string, sc Scenario, n int, cons *consumer) (Result, error) {
	if _, err := pool.Exec(ctx, "CREATE TABLE "+leastTable+" (message_id text PRIMARY KEY, payload bytea NOT NULL)"); err != nil {
		return Result{}, fmt.Errorf("least row: %w", err)
	}
	relayed, stop, err := s.relayLog(ctx, pool, exchange, leastTable, "peers least+raw", n)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	run := s.seq
	m := s.begin()
	err = s.produceConns(ctx, pool, n, sc.PerTx, func(ctx context.Context, conn *pgxpool.Conn, first, last int) error {
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
		if err := addOrders(ctx, conn, run, first, last, sc.Aggs); err != nil {
			return err
		}
		ids := make([]string, 0, last-first)
		bodies := make([][]byte, 0, last-first)
		for i := first; i < last; i++ {
			ids = append(ids, fmt.Sprintf("w%09d", i))
			bodies = append(bodies, payload(i, aggregate(run, i, sc.Aggs)))
		}
		b := &pgx.Batch{}
		b.Queue("INSERT INTO "+leastTable+" (message_id, payload) SELECT * FROM unnest($1::text[], $2::bytea[])", ids, bodies)
		b.Queue("COMMIT")
		return conn.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return Result{}, err
	}
	produced := time.Since(m.start)
	if err := relayed(); err != nil {
		return Result{}, fmt.Errorf("least+raw: %w", err)
	}
	return m.received(ctx, cons, n, produced)
}

// produceConns runs produce's transactions, each producer on a
// connection of its own that write begins and commits on (rolled back if
// write fails).
func (s *Sitting) produceConns(ctx context.Context, pool *pgxpool.Pool, n, perTx int, write func(ctx context.Context, conn *pgxpool.Conn, first, last int) error) error {
	txs := (n + perTx - 1) / perTx
	var wg sync.WaitGroup
	errs := make([]error, s.cfg.Producers)
	for p := range s.cfg.Producers {
		wg.Go(func() {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				errs[p] = fmt.Errorf("producer %d: %w", p, err)
				return
			}
			defer conn.Release()
			for t := p; t < txs; t += s.cfg.Producers {
				first, last := t*perTx, min((t+1)*perTx, n)
				if err := write(ctx, conn, first, last); err != nil {
					_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
					errs[p] = fmt.Errorf("producer %d, events %d-%d: %w", p, first, last-1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// relayLog starts walraw's reader of a publication of table's inserts, on
// a temporary slot of its own, publishing each row raw to exchange until n
// were confirmed; relayed waits for that, stop ends it.
func (s *Sitting) relayLog(ctx context.Context, pool *pgxpool.Pool, exchange, table, app string, n int) (relayed func() error, stop func(), err error) {
	pub := fmt.Sprintf("peers_decode_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+table+" WITH (publish = 'insert')"); err != nil {
		return nil, nil, fmt.Errorf("publication: %w", err)
	}
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP PUBLICATION IF EXISTS "+pub) })
	fail := func(err error) (func() error, func(), error) { stop(); return nil, nil, err }
	ch, err := s.confirmChannel()
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { ch.Close() })
	cfg := pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fail(fmt.Errorf("replication connection: %w", err))
	}
	undo = append(undo, func() { conn.Close(context.WithoutCancel(ctx)) })
	slot := pub // temporary: dropped with the connection
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
		return fail(fmt.Errorf("slot: %w", err))
	}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + pub + "'"}}); err != nil {
		return fail(fmt.Errorf("start replication: %w", err))
	}
	rctx, cancel := context.WithCancel(ctx)
	undo = append(undo, cancel) // the reader stops before its connection closes
	done := make(chan error, 1)
	raw := walraw.NewPublisher(ch, ch.NotifyPublish(make(chan amqp.Confirmation, walraw.InFlight)), exchange)
	go func() {
		end, err := raw.Relay(rctx, conn, n)
		if err == nil {
			err = pglogrepl.SendStandbyStatusUpdate(rctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end})
		}
		done <- err
	}()
	return func() error { return <-done }, stop, nil
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
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
	pub := fmt.Sprintf("peers_decode_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE wary_outbox WITH (publish = 'insert')"); err != nil {
		return Result{}, fmt.Errorf("publication: %w", err)
	}
	defer func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP PUBLICATION IF EXISTS "+pub) }()
	ch, err := s.confirmChannel()
	if err != nil {
		return Result{}, err
	}
	defer ch.Close()
	cfg := pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "peers decode+raw"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("replication connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	slot := pub // temporary: dropped with the connection
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
		return Result{}, fmt.Errorf("slot: %w", err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + pub + "'"}}); err != nil {
		return Result{}, fmt.Errorf("start replication: %w", err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	relayed := make(chan error, 1)
	raw := walraw.NewPublisher(ch, ch.NotifyPublish(make(chan amqp.Confirmation, walraw.InFlight)), exchange)
	go func() {
		end, err := raw.Relay(rctx, conn, n)
		if err == nil {
			err = pglogrepl.SendStandbyStatusUpdate(rctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end})
		}
		relayed <- err
	}()

	m, produced, err := s.produceWary(ctx, pool, ob, sc, n)
	if err != nil {
		return Result{}, err
	}
	if err := <-relayed; err != nil {
		return Result{}, fmt.Errorf("decode+raw: %w", err)
	}
	return m.received(ctx, cons, n, produced)
}

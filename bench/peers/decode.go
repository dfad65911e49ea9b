package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// runDecode is the "decode + raw" contender end to end: the wary
// contenders' producers, the same transactions (domain rows and wary's
// outbox rows, outbox.Add), while a minimal pglogrepl reader of a
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
	go func() { relayed <- decodeRaw(rctx, conn, ch, exchange, n) }()

	run := s.seq
	m := s.begin()
	err = s.produce(ctx, pool, n, sc.PerTx, func(ctx context.Context, tx pgx.Tx, first, last int) error {
		return addWary(ctx, tx, ob, run, first, last, sc.Aggs)
	}, nil)
	if err != nil {
		return Result{}, err
	}
	produced := time.Since(m.start)
	if err := <-relayed; err != nil {
		return Result{}, fmt.Errorf("decode+raw: %w", err)
	}
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, err
	}
	return Result{Events: n, Total: at.Sub(m.start), Produce: produced, PgCPU: m.pgCPU(), PgSplit: m.pgSplit()}, nil
}

// decodeRaw reads conn's replication stream until n inserted rows were
// published on ch and confirmed, and confirms the position of the commit
// of the last.
func decodeRaw(ctx context.Context, conn *pgconn.PgConn, ch *amqp.Channel, exchange string, n int) error {
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	confirm := func() error {
		select {
		case c, ok := <-confirms:
			if !ok || !c.Ack {
				return errors.New("publish not confirmed")
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	idCol, payloadCol := -1, -1
	var end pglogrepl.LSN
	out, sent := 0, 0
	for sent < n || end == 0 {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		x, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			return err
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *pglogrepl.RelationMessage:
			for i, c := range m.Columns {
				switch c.Name {
				case "message_id":
					idCol = i
				case "payload":
					payloadCol = i
				}
			}
		case *pglogrepl.InsertMessage:
			if idCol < 0 || payloadCol < 0 {
				return fmt.Errorf("insert into relation %d before its columns", m.RelationID)
			}
			body, err := hex.DecodeString(strings.TrimPrefix(string(m.Tuple.Columns[payloadCol].Data), `\x`))
			if err != nil {
				return err
			}
			if out == 256 {
				if err := confirm(); err != nil {
					return err
				}
				out--
			}
			if err := ch.PublishWithContext(ctx, exchange, "", false, false, amqp.Publishing{
				MessageId: string(m.Tuple.Columns[idCol].Data), Body: body, DeliveryMode: amqp.Persistent}); err != nil {
				return err
			}
			out++
			sent++
		case *pglogrepl.CommitMessage:
			if sent == n {
				end = m.TransactionEndLSN
			}
		}
	}
	for ; out > 0; out-- {
		if err := confirm(); err != nil {
			return err
		}
	}
	return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end})
}

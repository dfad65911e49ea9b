package main

import (
	"github.com/wary-go/wary/broker"

	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// runWary: producers write their domain rows and Add to wary's outbox in
// their transactions while one relay (Run, default options; the
// "stream" contender with postgres.SourceOptions.Stream) publishes to the queue's
// exchange through drivers/rabbit (publisher confirms).
func (s *Sitting) runWary(ctx context.Context, pool *pgxpool.Pool, exchange string, sc Scenario, n int, cons *consumer) (Result, error) {
	stream := sc.Contender == "stream"
	pst, err := postgres.New(ctx, pool, &postgres.Options{Source: postgres.SourceOptions{Pipeline: s.cfg.RelayPipeline, Stream: stream}})
	if err != nil {
		return Result{}, err
	}
	if stream {
		// Dropped after the relay stopped (deferred below).
		defer dropStream(ctx, pool, pst)
	}
	ob, err := outbox.New(pst, nil)
	if err != nil {
		return Result{}, err
	}
	topic, err := rabbit.OpenTopic(ctx, s.wconn, rabbit.Topology{Exchange: exchange}, nil)
	if err != nil {
		return Result{}, err
	}
	defer topic.Close()
	relay, err := outbox.NewRelay(pst, topic, &outbox.RelayOptions{Owner: "peers", Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
		BatchSize: s.cfg.RelayBatch})
	if err != nil {
		return Result{}, err
	}
	rctx, stopRelay := context.WithCancel(ctx)
	relayErr := make(chan error, 1)
	go func() { relayErr <- relay.Run(rctx) }()
	defer func() { stopRelay(); <-relayErr }()
	// Start timing once the relay waits for work, as a deployed relay
	// does; the streaming relay once it streams (its slot exists).
	// A relay that cannot stream polls the table instead: give up on it
	// after a minute.
	ready := func(st outbox.RelayStats) bool { return st.Listening }
	if stream {
		ready = func(st outbox.RelayStats) bool { return st.Streaming }
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !ready(relay.Stats()) {
		select {
		case err := <-relayErr:
			return Result{}, fmt.Errorf("relay stopped: %w", err)
		case <-wctx.Done():
			return Result{}, fmt.Errorf("the relay is not ready (streaming: %v; last error: %q): %w", stream, relay.Stats().LastError, wctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	m, produced, err := s.produceWary(ctx, pool, ob, sc, n)
	if err != nil {
		return Result{}, err
	}
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, fmt.Errorf("%w (relay: %+v)", err, relay.Stats())
	}
	res := m.result(Result{Events: n, Total: at.Sub(m.start), Produce: produced})
	if stream {
		rs := relay.Stats()
		res.Relay = fmt.Sprintf("published %d (counted once deleted), %d windows or claims, %d idle", rs.Published, rs.Claims, rs.Idle)
	} else {
		res.Relay = settled(relay, n).String()
	}
	return res, nil
}

// produceWary runs the wary contenders' producers (addWary) from the
// start of a run, and returns its meter and how long they took.
func (s *Sitting) produceWary(ctx context.Context, pool *pgxpool.Pool, ob *outbox.Outbox[pgx.Tx], sc Scenario, n int) (meter, time.Duration, error) {
	run := s.seq
	m := s.begin()
	err := s.produce(ctx, pool, n, sc.PerTx, func(ctx context.Context, tx pgx.Tx, first, last int) error {
		return addWary(ctx, tx, ob, run, first, last, sc.Aggs)
	}, nil)
	return m, time.Since(m.start), err
}

// addWary writes the wary contenders' transaction of events first to
// last-1: their domain rows, and their events added to ob.
func addWary(ctx context.Context, tx pgx.Tx, ob *outbox.Outbox[pgx.Tx], run, first, last, aggs int) error {
	if err := addOrders(ctx, tx, run, first, last, aggs); err != nil {
		return err
	}
	msgs := make([]*outbox.Message, 0, last-first)
	for i := first; i < last; i++ {
		agg := aggregate(run, i, aggs)
		msgs = append(msgs, &outbox.Message{ID: fmt.Sprintf("w%09d", i), AggregateID: agg,
			Type: "order.placed", Payload: payload(i, agg)})
	}
	_, err := ob.Add(ctx, tx, msgs...)
	return err
}

// dropStream drops the outbox stream's replication slot and publication
// of pst (the relay has stopped: its WAL sender may take a moment to let
// the slot go).
func dropStream(ctx context.Context, pool *pgxpool.Pool, pst *postgres.Store) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	slot, err := pst.StreamSlot(ctx)
	if err != nil {
		return
	}
	for {
		_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		if err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	_, _ = pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize())
}

// runFloor: the producers commit the same transactions as the outbox
// contenders' without the outbox: only their domain rows. No relay, no
// broker: its rate is its commit rate.
func (s *Sitting) runFloor(ctx context.Context, pool *pgxpool.Pool, sc Scenario, n int) (Result, error) {
	run := s.seq
	m := s.begin()
	err := s.produce(ctx, pool, n, sc.PerTx, func(ctx context.Context, tx pgx.Tx, first, last int) error {
		return addOrders(ctx, tx, run, first, last, sc.Aggs)
	}, nil)
	if err != nil {
		return Result{}, err
	}
	produced := time.Since(m.start)
	return m.result(Result{Events: n, Total: produced, Produce: produced}), nil
}

// watermillPoll is the SQL subscriber's poll interval when it finds no
// rows (Watermill's default is 1 s; a user after latency lowers it).
const watermillPoll = 10 * time.Millisecond

// runWatermill: producers publish through a forwarder.Publisher wrapping a
// watermill-sql Publisher bound to their transaction (the forwarder's
// outbox topic), while a forwarder.Forwarder, reading that topic with a
// watermill-sql Subscriber, publishes each message to the queue's exchange
// with a watermill-amqp Publisher waiting for publisher confirms.
func (s *Sitting) runWatermill(ctx context.Context, pool *pgxpool.Pool, exchange string, sc Scenario, n int, cons *consumer) (Result, error) {
	schema := wsql.DefaultPostgreSQLSchema{}
	sub, err := watermillOutbox(wsql.BeginnerFromPgx(pool), schema, wsql.DefaultPostgreSQLOffsetsAdapter{})
	if err != nil {
		return Result{}, err
	}
	stopFwd, err := s.forward(ctx, sub)
	if err != nil {
		return Result{}, err
	}
	defer stopFwd()
	m := s.begin()
	err = s.produce(ctx, pool, n, sc.PerTx, func(ctx context.Context, tx pgx.Tx, first, last int) error {
		if err := addOrders(ctx, tx, 0, first, last, sc.Aggs); err != nil {
			return err
		}
		return watermillPublish(ctx, wsql.TxFromPgx(tx), schema, exchange, first, last, sc.Aggs)
	}, nil)
	if err != nil {
		return Result{}, err
	}
	produced := time.Since(m.start)
	return m.received(ctx, cons, n, produced)
}

// runCeiling: the producers commit the floor's transactions, and each
// committed transaction's events are then published with raw amqp091-go
// (one channel, 256 confirms in flight), until the consumer has them all:
// an outbox relay that cost nothing, which no relay can beat here.
func (s *Sitting) runCeiling(ctx context.Context, pool *pgxpool.Pool, exchange string, sc Scenario, n int, cons *consumer) (Result, error) {
	ch, err := s.confirmChannel()
	if err != nil {
		return Result{}, err
	}
	defer ch.Close()
	run := s.seq
	events := make(chan [2]int, n)
	published := make(chan error, 1)
	m := s.begin()
	go func() { published <- publishRaw(ctx, ch, exchange, events) }()
	err = s.produce(ctx, pool, n, sc.PerTx, func(ctx context.Context, tx pgx.Tx, first, last int) error {
		return addOrders(ctx, tx, run, first, last, sc.Aggs)
	}, func(first, last int) { events <- [2]int{first, last} })
	close(events)
	if err != nil {
		<-published
		return Result{}, err
	}
	produced := time.Since(m.start)
	if err := <-published; err != nil {
		return Result{}, err
	}
	return m.received(ctx, cons, n, produced)
}

// watermillTopic is the forwarder's outbox topic in the database.
const watermillTopic = "outbox"

// watermillOutbox returns a watermill-sql Subscriber on db for the
// forwarder's outbox topic, its tables created.
func watermillOutbox(db wsql.Beginner, schema wsql.SchemaAdapter, offsets wsql.OffsetsAdapter) (*wsql.Subscriber, error) {
	sub, err := wsql.NewSubscriber(db, wsql.SubscriberConfig{
		SchemaAdapter:    schema,
		OffsetsAdapter:   offsets,
		InitializeSchema: true,
		PollInterval:     watermillPoll,
	}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	if err := sub.SubscribeInitialize(watermillTopic); err != nil {
		return nil, fmt.Errorf("watermill-sql schema: %w", err)
	}
	return sub, nil
}

// watermillPublish writes events first to last-1 (over aggs aggregates)
// in tx to the forwarder's outbox topic, addressed to exchange, through
// forwarder.Publisher around a watermill-sql Publisher bound to tx.
func watermillPublish(ctx context.Context, tx wsql.ContextExecutor, schema wsql.SchemaAdapter, exchange string, first, last, aggs int) error {
	sp, err := wsql.NewPublisher(tx, wsql.PublisherConfig{SchemaAdapter: schema}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	msgs := make([]*message.Message, 0, last-first)
	for i := first; i < last; i++ {
		agg := aggregate(0, i, aggs)
		m := message.NewMessage(fmt.Sprintf("m%09d", i), payload(i, agg))
		m.Metadata.Set("aggregate_id", agg)
		m.SetContext(ctx)
		msgs = append(msgs, m)
	}
	return forwarder.NewPublisher(sp, forwarder.PublisherConfig{ForwarderTopic: watermillTopic}).Publish(exchange, msgs...)
}

// forward starts a forwarder.Forwarder reading the outbox topic with sub and
// publishing to the queue's exchange with a watermill-amqp Publisher that
// waits for publisher confirms, waits until it runs, and returns a
// function that stops it.
func (s *Sitting) forward(ctx context.Context, sub message.Subscriber) (func(), error) {
	logger := watermill.NopLogger{}
	pub, err := wamqp.NewPublisher(wamqp.Config{
		Connection: wamqp.ConnectionConfig{AmqpURI: s.cfg.RabbitURL},
		Marshaler:  wamqp.DefaultMarshaler{},
		Exchange:   wamqp.ExchangeConfig{GenerateName: wamqp.GenerateExchangeNameTopicName, Type: "fanout", Durable: true},
		Publish: wamqp.PublishConfig{
			GenerateRoutingKey: func(string) string { return "" },
			ConfirmDelivery:    true,
			ChannelPoolSize:    1,
		},
		TopologyBuilder: &wamqp.DefaultTopologyBuilder{},
	}, logger)
	if err != nil {
		return nil, err
	}
	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{ForwarderTopic: watermillTopic})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	fctx, stopFwd := context.WithCancel(ctx)
	fwdErr := make(chan error, 1)
	go func() { fwdErr <- fwd.Run(fctx) }()
	stop := func() { stopFwd(); _ = fwd.Close(); <-fwdErr; _ = pub.Close() }
	select {
	case <-fwd.Running():
		return stop, nil
	case err := <-fwdErr:
		fwdErr <- err
		stop()
		return nil, fmt.Errorf("forwarder stopped: %w", err)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

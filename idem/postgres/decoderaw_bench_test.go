package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/internal/walraw"
)

// decodeRaw is the "decode + raw" contender of BenchmarkRelayRabbit: the
// most any relay that reads the outbox from the log can do on this
// machine. internal/walraw's reader of the streaming outbox's
// publication, on a slot of its own, publishes each inserted row's
// message ID and payload raw with amqp091-go, 256 confirms in flight on
// one channel, and confirms the slot's position when every message was
// confirmed. No table work, no headers, no order kept per aggregate
// beyond the log's, no retries: it stops the benchmark on any error.
type decodeRaw struct {
	cfg         *pgconn.Config
	slot        string
	publication string
	ch          *amqp.Channel
	confirms    chan amqp.Confirmation
	exchange    string
}

// newDecodeRaw creates the contender's slot on publication (dropped at
// cleanup) and its confirm channel (dialled with amqpCfg), publishing to
// exchange.
func newDecodeRaw(b *testing.B, pool *pgxpool.Pool, publication, exchange string, amqpCfg *amqp.Config) *decodeRaw {
	ctx := context.Background()
	cfg := pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "wary bench decode+raw"
	d := &decodeRaw{cfg: cfg, slot: fmt.Sprintf("wary_bench_decoderaw_%d", time.Now().UnixNano()),
		publication: publication, ch: confirmChannel(b, amqpCfg), exchange: exchange}
	d.confirms = d.ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	conn := d.connect(b)
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, d.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
		b.Fatal(err)
	}
	_ = conn.Close(ctx)
	b.Cleanup(func() {
		for range 100 { // its WAL sender exits a moment after the connection closed
			if _, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, d.slot); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return d
}

func (d *decodeRaw) connect(b *testing.B) *pgconn.PgConn {
	conn, err := pgconn.ConnectConfig(context.Background(), d.cfg)
	if err != nil {
		b.Fatal(err)
	}
	return conn
}

// run streams the slot from its confirmed position until n inserted rows
// were published and confirmed, confirms the position of the last commit
// they were in, and closes the replication connection. It returns the
// CPU the WAL sender used (0 when sender is nil).
func (d *decodeRaw) run(b *testing.B, n int, sender func() time.Duration) time.Duration {
	ctx := context.Background()
	var before time.Duration
	if sender != nil {
		before = sender() // no other stream is open
	}
	conn := d.connect(b)
	defer conn.Close(ctx)
	if err := pglogrepl.StartReplication(ctx, conn, d.slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + d.publication + "'"}}); err != nil {
		b.Fatal(err)
	}
	end, err := walraw.NewPublisher(d.ch, d.confirms, d.exchange).Relay(ctx, conn, n)
	if err != nil {
		b.Fatal(err)
	}
	var used time.Duration
	if sender != nil {
		used = sender() - before
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end}); err != nil {
		b.Fatal(err)
	}
	return used
}

// atNow moves the contender's slot to the log's current position before a
// round's rows are committed, as slotAtNow does the relay's.
func (d *decodeRaw) atNow(b *testing.B, pool *pgxpool.Pool) { slotAtNow(b, pool, d.slot) }

// latency is one run of BenchmarkRelayLatencyRabbitStream's decode+raw
// contender: the same producers (idemtest.ProduceAtLatencyRate) commit n
// rows to e, whose outbox's publication the contender reads, while it
// streams them from its slot and publishes each raw (256 confirms in
// flight) to a fresh quorum queue, which a wary subscription drains as in
// the other contenders' runs. A row's latency runs from its Commit
// returning (the time the producer's committed callback takes, as in
// idemtest.RelayLatency) to its publish's confirm arriving (the stream's
// publish returns then too). Timing starts once the slot's WAL sender
// reached the log's end (caughtUp), as for the stream. It returns the
// latencies in milliseconds, sorted, and each row's stages. The caller
// moves the slot to the log's end first (atNow).
//
// With viaWary (the decode+wary contender, WARY_BENCH_DECODE_WARY=1), each
// row goes instead through a wary RabbitMQ topic (drivers/rabbit, on the
// consumer's connection, as the relay's topic is in rabbitBroker): one
// Publish call per row, on a goroutine of its own, with the relay's
// event headers, its latency to the call's return. The same reader and
// the same 256 rows in flight: what the driver's publish path adds to
// decode+raw's, without the relay's lanes and windows.
func (d *decodeRaw) latency(b *testing.B, e *idemtest.OutboxEnv[pgx.Tx], pool *pgxpool.Pool, n int, ids string, viaWary bool) ([]float64, stages) {
	c, exchange := rabbitQueue(b)
	conn := d.connect(b)
	defer conn.Close(context.Background()) // after the goroutines that read it ended
	if err := pglogrepl.StartReplication(context.Background(), conn, d.slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + d.publication + "'"}}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait
	sub, err := rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: exchange}, &rabbit.SubscriptionOptions{Prefetch: 200})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sub.Close() })
	wg.Go(func() { // the other contenders' consumer
		for {
			ds, err := sub.Receive(ctx, 10)
			if err != nil {
				return
			}
			for _, d := range ds {
				_ = d.Ack(ctx)
			}
		}
	})
	var (
		mu        sync.Mutex
		committed = make(map[string]time.Time, n)
		confirmed = make(map[string]time.Time, n)
		received  = make(map[string]time.Time, n) // the row came from the WAL sender
		tags      = make(map[uint64]string, 256)  // in flight: delivery tag → message ID
		inflight  = make(chan struct{}, 256)
		all       = make(chan struct{})
	)
	var topic *broker.Topic
	if viaWary {
		topic, err = rabbit.OpenTopic(ctx, c, rabbit.Topology{Exchange: exchange}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { topic.Close() })
	} else {
		wg.Go(func() { // confirms, in delivery tag order
			for got := 0; got < n; got++ {
				var c amqp.Confirmation
				select {
				case c = <-d.confirms:
				case <-ctx.Done():
					return
				}
				now := time.Now()
				if !c.Ack {
					b.Error("nack")
				}
				mu.Lock()
				confirmed[tags[c.DeliveryTag]] = now
				delete(tags, c.DeliveryTag)
				mu.Unlock()
				<-inflight
			}
			close(all)
		})
	}
	ended := make(chan pglogrepl.LSN, 1) // the end of the last row's transaction
	wg.Go(func() {
		r := walraw.NewReader(conn)
		for sent := 0; ; {
			ev, err := r.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					b.Error(err)
				}
				return
			}
			if ev.Commit {
				if sent == n {
					ended <- ev.End
					return
				}
				continue
			}
			now := time.Now()
			payload := ev.Payload
			select {
			case inflight <- struct{}{}:
			case <-ctx.Done():
				return
			}
			id := ev.ID
			if topic != nil {
				mu.Lock()
				received[id] = now
				mu.Unlock()
				sent++
				wg.Go(func() {
					err := topic.Publish(ctx, &broker.Message{ID: id, Key: "agg-000", Body: payload, Headers: broker.Headers{
						{broker.HeaderAggregateID, "agg-000"}, {broker.HeaderSequence, "1"}}})
					now := time.Now()
					if err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					mu.Lock()
					confirmed[id] = now
					if len(confirmed) == n {
						close(all)
					}
					mu.Unlock()
					<-inflight
				})
				continue
			}
			mu.Lock()
			received[id] = now
			tags[d.ch.GetNextPublishSeqNo()] = id
			mu.Unlock()
			if err := d.ch.PublishWithContext(ctx, exchange, "", false, false, amqp.Publishing{
				MessageId: id, Body: payload, DeliveryMode: amqp.Persistent}); err != nil {
				b.Error(err)
				return
			}
			sent++
		}
	})
	idemtest.WaitFor(b, "decode+raw's WAL sender at the log's end", caughtUp(b, pool, d.slot))
	b.StartTimer()
	err = idemtest.ProduceAtLatencyRate(ctx, e, time.Now(), n, ids, func(id string) {
		now := time.Now()
		mu.Lock()
		committed[id] = now
		mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		mu.Lock()
		got := len(confirmed)
		mu.Unlock()
		b.Fatalf("after a minute, %d of %d rows confirmed", got, n)
	}
	b.StopTimer()
	select {
	case end := <-ended: // the reader is done with conn
		if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end}); err != nil {
			b.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		b.Error("decode+raw did not see its last row's commit")
	}
	mu.Lock()
	defer mu.Unlock()
	lat := make([]float64, 0, n)
	for id, at := range committed {
		if t, ok := confirmed[id]; ok {
			lat = append(lat, float64(t.Sub(at))/float64(time.Millisecond))
		}
	}
	if len(lat) != n {
		b.Errorf("%d of %d rows confirmed", len(lat), n)
	}
	slices.Sort(lat)
	return lat, stagesOf(committed, []string{"received", "confirmed"}, received, confirmed)
}

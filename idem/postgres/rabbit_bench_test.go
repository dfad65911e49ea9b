package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// rabbitURL is the RabbitMQ the benchmarks use.
func rabbitURL() string {
	if u := os.Getenv("WARY_RABBIT_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// rabbitQueue connects to the local RabbitMQ and declares a fresh quorum
// queue (single active consumer) behind a fanout exchange of the same
// name, deleted at cleanup. It skips t (fails with WARY_REQUIRE_SERVICES=1)
// when RabbitMQ is unreachable.
func rabbitQueue(t testing.TB) (*rabbit.Conn, string) { return rabbitQueueOn(t, nil) }

// rabbitQueueOn is rabbitQueue on a connection dialled with cfg (nil:
// the driver's defaults).
func rabbitQueueOn(t testing.TB, cfg *amqp.Config) (*rabbit.Conn, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := rabbitConn(ctx, t, cfg)
	name := fmt.Sprintf("wary-bench.relay.%d", time.Now().UnixNano())
	top := rabbit.Topology{Exchange: name, Queue: name}
	if err := rabbit.Declare(ctx, c, top); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = top.Delete(dctx, c)
		c.Close()
	})
	return c, name
}

// rabbitConn connects to the local RabbitMQ (dialled with cfg, if not
// nil), or skips t (fails it with WARY_REQUIRE_SERVICES=1) when it is
// unreachable. The caller closes it.
func rabbitConn(ctx context.Context, t testing.TB, cfg *amqp.Config) *rabbit.Conn {
	c, err := rabbit.Dial(ctx, rabbitURL(), &rabbit.ConnOptions{Config: cfg})
	if err != nil {
		if os.Getenv("WARY_RABBIT_URL") == "" && os.Getenv("WARY_REQUIRE_SERVICES") != "1" {
			t.Skipf("RabbitMQ unreachable (set WARY_RABBIT_URL, or WARY_REQUIRE_SERVICES=1 to fail): %v", err)
		}
		t.Fatalf("RabbitMQ: %v", err)
	}
	return c
}

// rabbitBroker is a topic and subscription on a fresh rabbitQueue.
func rabbitBroker(t testing.TB) idemtest.OutboxBroker { return rabbitBrokerOn(t, nil) }

// rabbitBrokerOn is rabbitBroker on a connection dialled with cfg.
func rabbitBrokerOn(t testing.TB, cfg *amqp.Config) idemtest.OutboxBroker {
	c, name := rabbitQueueOn(t, cfg)
	topic, err := rabbit.OpenTopic(t.Context(), c, rabbit.Topology{Exchange: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return idemtest.OutboxBroker{Topic: topic, MaxMessageSize: 1 << 20, Subscribe: func(t testing.TB) *broker.Subscription {
		sub, err := rabbit.OpenSubscription(t.Context(), c, rabbit.Topology{Queue: name}, &rabbit.SubscriptionOptions{Prefetch: 200})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Close() })
		return sub
	}}
}

// BenchmarkRelayLatencyRabbit: commit-to-publish latency at 1,000 rows/s
// from 8 producers, to a RabbitMQ quorum queue with confirms, the relay
// woken by the wake flag and LISTEN/NOTIFY. Run with -benchtime=5000x.
func BenchmarkRelayLatencyRabbit(b *testing.B) {
	idemtest.BenchRelayLatency(b, newDB, rabbitBroker, idemtest.LatencyOptions{})
}

// BenchmarkRelayRabbit: rows/s the relay (Run, default options), and the
// streaming relay (postgres.SourceOptions.Stream, on an outbox of its own whose slot
// exists before the rows are committed; started each round, so a round
// includes its start; "decode" is the stream alone, read to its end
// before the relay starts, nothing published; "decode+raw" a minimal
// pglogrepl reader of the same publication on a slot of its own that
// publishes each row raw with 256 confirms in flight and no table work,
// the most a relay on the log can do), publish to a RabbitMQ quorum queue with confirms,
// over 100 aggregates and over distinct aggregates, in interleaved rounds
// of 5,000 with raw
// amqp091-go publishing as many messages of the same size with 256
// confirms in flight on one channel to another quorum queue. Each round's
// rows are committed first (not timed), in transactions of 100. Run with
// -benchtime=20000x (WARY_BENCH_ROUND sets the round's size).
func BenchmarkRelayRabbit(b *testing.B) {
	for _, aggs := range []int{100, 0} {
		name := "100aggregates"
		if aggs == 0 {
			name = "distinct"
		}
		b.Run(name, func(b *testing.B) { benchRelayRabbit(b, aggs) })
	}
}

func benchRelayRabbit(b *testing.B, aggs int) {
	round := cmp.Or(envInt("WARY_BENCH_ROUND"), 5000)
	// The bytes each publisher's connection writes: the relays' (one
	// topic: their phases do not overlap), raw's, decode+raw's.
	var relayWire, rawWire, drWire wireCount
	ob := rabbitBrokerOn(b, relayWire.config())
	_, exchange := rabbitQueue(b)
	e := idemtest.SetupOutbox(b, newDB)
	ch := confirmChannel(b, rawWire.config())
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	body := []byte("payload")
	seq := 0
	es := idemtest.SetupOutbox(b, newDB) // the streaming relay's outbox, on a schema of its own
	slot := streamSlot(b, es.Driver)
	pool := newPool(b)
	pgcpu, mqcpu, senderCPU := pgCPU(b, pool), brokerCPU(b), walSenderCPU(b, pool)
	// Time and CPU (PostgreSQL's processes, RabbitMQ's, and this
	// process's) per phase.
	type phase struct {
		wall, pg, mq, self, sender time.Duration
		wire                       int64 // bytes its publisher wrote
	}
	var polling, streaming, decoding, decraw, raw phase
	var dr *decodeRaw // the decode + raw contender, on the stream's publication
	if slot != "" {
		_, drExchange := rabbitQueue(b)
		dr = newDecodeRaw(b, pool, slot, drExchange, drWire.config())
	}
	// measure runs f under the pprof label phase=name (inherited by the
	// goroutines f starts), so that a -cpuprofile of the benchmark splits
	// by contender: go tool pprof -tagfocus phase=stream.
	measure := func(name string, p *phase, f func()) {
		var pg0, mq0 time.Duration
		if pgcpu != nil {
			pg0 = pgcpu()
		}
		if mqcpu != nil {
			mq0 = mqcpu()
		}
		wire0 := relayWire.n.Load() + rawWire.n.Load() + drWire.n.Load()
		self0, start := selfCPU(b), time.Now()
		pprof.Do(context.Background(), pprof.Labels("phase", name), func(context.Context) { f() })
		p.wall += time.Since(start)
		p.wire += relayWire.n.Load() + rawWire.n.Load() + drWire.n.Load() - wire0
		p.self += selfCPU(b) - self0
		if pgcpu != nil {
			p.pg += pgcpu() - pg0
		}
		if mqcpu != nil {
			p.mq += mqcpu() - mq0
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		b.StopTimer()
		commit := func(e *idemtest.OutboxEnv[pgx.Tx]) {
			for start := 0; start < n; start += 100 {
				var msgs []*outbox.Message
				for i := start; i < min(start+100, n); i++ {
					agg := fmt.Sprintf("agg-%d-%d", done, i)
					if aggs > 0 {
						agg = fmt.Sprintf("agg-%03d", i%aggs)
					}
					msgs = append(msgs, idemtest.OM(fmt.Sprintf("m%09d", seq), agg, 0, string(body)))
					seq++
				}
				e.Add(msgs...)
			}
		}
		drain := func(name string, stream bool, p *phase) {
			b.StopTimer()
			checkpoint(b, pool)
			e := e
			if stream {
				e = es
				// The slot starts at the backlog: a relay that streams all
				// along has decoded the log written since its last round
				// (the polling relay's) as it came.
				slotAtNow(b, pool, slot)
				dr.atNow(b, pool)
			}
			commit(e)
			if stream {
				// The WAL's decoding alone: the stream read to its end
				// and closed unconfirmed, before the relay streams it.
				measure("decode", &decoding, func() { decoding.sender += decodeAll(b, e.Driver, n, senderCPU) })
				slotLetGo(b, pool, slot) // or the relay would stand by
				// The same rows from the contender's own slot, published raw.
				measure("decode+raw", &decraw, func() { decraw.sender += dr.run(b, n, senderCPU) })
			}
			r := e.SourceRelay(ob.Topic, idemtest.Source{Pipeline: benchPipeline, Stream: stream}, &outbox.RelayOptions{Owner: "bench", BatchSize: benchBatch})
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			b.StartTimer()
			measure(name, p, func() {
				go func() { defer close(stopped); _ = r.Run(ctx) }()
				for r.Stats().Published < int64(n) {
					time.Sleep(time.Millisecond)
				}
			})
			cancel()
			<-stopped
		}
		drain("polling", false, &polling)
		if slot != "" {
			drain("stream", true, &streaming)
		}
		measure("raw", &raw, func() {
			out := 0
			for i := range n {
				if out == 256 {
					if c := <-confirms; !c.Ack {
						b.Fatal("nack")
					}
					out--
				}
				err := ch.PublishWithContext(context.Background(), exchange, "", false, false, amqp.Publishing{
					MessageId: fmt.Sprintf("r%09d", done+i), Body: body, DeliveryMode: amqp.Persistent})
				if err != nil {
					b.Fatal(err)
				}
				out++
			}
			for ; out > 0; out-- {
				if c := <-confirms; !c.Ack {
					b.Fatal("nack")
				}
			}
		})
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	w, r := float64(b.N)/polling.wall.Seconds(), float64(b.N)/raw.wall.Seconds()
	b.ReportMetric(w, "wary-msgs/s")
	b.ReportMetric(r, "raw256-msgs/s")
	b.ReportMetric(100*w/r, "wary/raw256-%")
	bytes := func(n int64) float64 { return float64(n) / float64(b.N) }
	b.ReportMetric(bytes(polling.wire), "wary-wire-B/msg")
	b.ReportMetric(bytes(raw.wire), "raw256-wire-B/msg")
	b.ReportMetric(per(polling.self), "wary-cpu-µs/msg")
	b.ReportMetric(per(raw.self), "raw256-cpu-µs/msg")
	if pgcpu != nil {
		b.ReportMetric(per(polling.pg), "wary-pgcpu-µs/msg")
		b.ReportMetric(per(raw.pg), "raw256-pgcpu-µs/msg")
	}
	if mqcpu != nil {
		b.ReportMetric(per(polling.mq), "wary-mqcpu-µs/msg")
		b.ReportMetric(per(raw.mq), "raw256-mqcpu-µs/msg")
	}
	if slot != "" {
		s := float64(b.N) / streaming.wall.Seconds()
		b.ReportMetric(s, "stream-msgs/s")
		b.ReportMetric(100*s/r, "stream/raw256-%")
		b.ReportMetric(per(streaming.self), "stream-cpu-µs/msg")
		b.ReportMetric(bytes(streaming.wire), "stream-wire-B/msg")
		b.ReportMetric(bytes(decraw.wire), "decode+raw-wire-B/msg")
		if pgcpu != nil {
			b.ReportMetric(per(streaming.pg), "stream-pgcpu-µs/msg")
		}
		if mqcpu != nil {
			b.ReportMetric(per(streaming.mq), "stream-mqcpu-µs/msg")
		}
		d := float64(b.N) / decraw.wall.Seconds()
		b.ReportMetric(d, "decode+raw-msgs/s")
		b.ReportMetric(100*s/d, "stream/decode+raw-%")
		b.ReportMetric(100*d/r, "decode+raw/raw256-%")
		b.ReportMetric(per(decraw.self), "decode+raw-cpu-µs/msg")
		if pgcpu != nil {
			b.ReportMetric(per(decraw.pg), "decode+raw-pgcpu-µs/msg")
		}
		if mqcpu != nil {
			b.ReportMetric(per(decraw.mq), "decode+raw-mqcpu-µs/msg")
		}
		b.ReportMetric(float64(b.N)/decoding.wall.Seconds(), "decode-msgs/s")
		b.ReportMetric(per(decoding.self), "decode-cpu-µs/msg")
		if pgcpu != nil {
			b.ReportMetric(per(decoding.pg), "decode-pgcpu-µs/msg")
			b.ReportMetric(per(decoding.sender), "decode-walsender-µs/msg")
		}
	}
}

// slotLetGo waits until no WAL sender holds slot (one exits a moment
// after its stream's connection closed), for up to 10 s.
func slotLetGo(b *testing.B, pool *pgxpool.Pool, slot string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var active bool
		if err := pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err != nil {
			b.Fatal(err)
		}
		if !active {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("slot %s still held 10 s after its stream closed", slot)
		}
		time.Sleep(time.Millisecond) // no signal: the server's view
	}
}

// decodeAll opens d's outbox stream, receives n rows and closes it
// without confirming any: what any relay on the stream costs before it
// publishes (the server's WAL sender decoding, the client's receiving).
// It returns the CPU its WAL sender used (0 when sender is nil).
func decodeAll(b *testing.B, d idemtest.Driver[pgx.Tx], n int, sender func() time.Duration) time.Duration {
	ctx := context.Background()
	var before time.Duration
	if sender != nil {
		before = sender() // no other stream is open
	}
	st, err := postgres.OpenDriverStream(ctx, d, "decode")
	if err != nil {
		b.Fatal(err)
	}
	for got := 0; got < n; {
		ev, err := st.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got += len(ev.Rows)
	}
	var used time.Duration
	if sender != nil {
		used = sender() - before
	}
	if err := st.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return used
}

// checkpoint runs a CHECKPOINT before a benchmark's run, so that every
// contender starts right after one (the first change of each page after
// a checkpoint writes the whole page to the log), and a stream's slot can
// then be moved past its snapshot of running transactions (slotAtNow).
func checkpoint(b testing.TB, pool *pgxpool.Pool) {
	if _, err := pool.Exec(context.Background(), `CHECKPOINT`); err != nil {
		b.Fatal(err)
	}
}

// slotAtNow moves the stream's slot to the log's current position, and
// its restart position with it: a relay started in a benchmark's next
// round would otherwise decode, before its first row, all the log written
// since the slot's restart position, which a relay that streams all along
// decoded as it came. The server moves a slot's restart position only
// past a logged snapshot of running transactions (every 15 s and at each
// checkpoint), and one advance after the checkpoint before it was not
// enough: the restart position stayed where the round's polling relay's
// log began (24 MB behind in a round of 20,000 rows, which doubled the
// next stream's WAL sender CPU per row). A second advance after another
// CHECKPOINT moves it to the confirmed position. Nothing of the slot's
// outbox may be unsettled.
func slotAtNow(b testing.TB, pool *pgxpool.Pool, slot string) {
	advance := func() {
		if _, err := pool.Exec(context.Background(), `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, slot); err != nil {
			b.Fatal(err)
		}
	}
	advance()
	checkpoint(b, pool)
	advance()
}

// streamSlot creates the outbox stream's slot of d, drained (so that a
// streaming relay started later streams rows committed before it, rather
// than drain them from the table), dropped with its
// publication at cleanup; "" if the server cannot stream.
func streamSlot(b testing.TB, d idemtest.Driver[pgx.Tx]) string {
	ctx := context.Background()
	s, err := postgres.OpenDriverStream(ctx, d, "bench")
	if err != nil {
		b.Logf("no stream: %v", err)
		return ""
	}
	if err := s.Drained(ctx); err != nil { // nothing was committed before it
		b.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	st, _ := d.(interface {
		OutboxStreamStatus(context.Context) (outbox.StreamStatus, error)
	}).OutboxStreamStatus(ctx)
	b.Cleanup(func() {
		conn, err := pgx.Connect(ctx, serverURL(b))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		for range 100 {
			if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, st.Slot); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{st.Slot}.Sanitize())
	})
	return st.Slot
}

var benchPipeline, benchBatch = envInt("WARY_BENCH_PIPELINE"), envInt("WARY_BENCH_BATCH")

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// confirmChannel is a raw amqp091-go channel in confirm mode on its own
// connection (dialled with cfg, if not nil), closed at cleanup.
func confirmChannel(b testing.TB, cfg *amqp.Config) *amqp.Channel {
	ch := amqpChannelOn(b, cfg)
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	return ch
}

// amqpChannel is a raw amqp091-go channel on its own connection, closed
// at cleanup.
func amqpChannel(t testing.TB) *amqp.Channel { return amqpChannelOn(t, nil) }

// amqpChannelOn is amqpChannel on a connection dialled with cfg (nil:
// amqp.Dial's defaults).
func amqpChannelOn(t testing.TB, cfg *amqp.Config) *amqp.Channel {
	if cfg == nil {
		cfg = &amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US"} // amqp.Dial's
	}
	conn, err := amqp.DialConfig(rabbitURL(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// wireCount counts the bytes the connections dialled with its config
// write: the AMQP frames of a publisher (its publishes, and the little
// else a publishing connection sends: heartbeats, a channel's opening).
type wireCount struct{ n atomic.Int64 }

// config is an amqp091-go config whose connections count their writes.
func (w *wireCount) config() *amqp.Config {
	dial := amqp.DefaultDial(10 * time.Second)
	return &amqp.Config{Heartbeat: 10 * time.Second, Locale: "en_US", Dial: func(network, addr string) (net.Conn, error) {
		c, err := dial(network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, n: &w.n}, nil
	}}
}

// countedConn is a connection counting its writes into n.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/drivers/rabbit"
)

// Config is one sitting's setting.
type Config struct {
	PostgresURL string
	RabbitURL   string
	// MySQLDSN is the MySQL or MariaDB server of the drain sitting
	// (-store mysql), in go-sql-driver/mysql's DSN form.
	MySQLDSN string
	// Events is how many events each wary and raw run carries, and
	// WatermillEvents each Watermill run (0: Events).
	Events          int
	WatermillEvents int
	// Producers is how many goroutines commit the events concurrently.
	Producers int
	// RelayBatch and RelayPipeline set wary's RelayOptions.BatchSize and
	// Pipeline (0: the library's defaults).
	RelayBatch, RelayPipeline int
	// Timeout bounds one run.
	Timeout time.Duration
}

// Scenario is one contender at one shape of load.
type Scenario struct {
	Contender string // "wary", "stream", "decode", "least", "watermill", "floor", "ceiling" or "raw"
	PerTx     int    // events per producer transaction (0 for raw)
	Aggs      int    // aggregates the events spread over; 0: every event its own
}

// Name is the scenario's row label.
func (s Scenario) Name() string {
	if s.Contender == "raw" {
		return "raw amqp091-go, 256 confirms in flight"
	}
	agg := "100 aggregates"
	if s.Aggs == 0 {
		agg = "distinct aggregates"
	}
	switch s.Contender {
	case "watermill":
		return fmt.Sprintf("watermill forwarder, %d/tx", s.PerTx)
	case "floor":
		return fmt.Sprintf("floor: domain rows only, %d/tx", s.PerTx)
	case "ceiling":
		return fmt.Sprintf("ceiling: domain rows, then raw publish, %d/tx", s.PerTx)
	case "stream":
		return fmt.Sprintf("wary stream, %d/tx, %s", s.PerTx, agg)
	case "decode":
		return fmt.Sprintf("decode + raw, wary's rows, %d/tx, %s", s.PerTx, agg)
	case "least":
		return fmt.Sprintf("least row + decode + raw, %d/tx", s.PerTx)
	}
	return fmt.Sprintf("wary relay, %d/tx, %s", s.PerTx, agg)
}

// outbox reports whether the scenario relays an outbox (a wary row or
// Watermill).
func (s Scenario) outbox() bool {
	return s.Contender != "raw" && s.Contender != "floor" && s.Contender != "ceiling"
}

// Scenarios are the rows of a sitting, in their interleaving order.
// Watermill's forwarder has no notion of aggregates (it relays one topic in
// offset order), so it runs once per transaction size, as does the floor
// (the producers' transactions without the outbox), and the ceiling (the
// floor's transactions, each one's events then published with raw
// amqp091-go: what no outbox relay can beat on the machine, which must
// both commit the producers' transactions and carry every event through
// the broker). Decode + raw (runDecode) is the most a relay reading wary's
// outbox rows from the log can do: the wary contenders' transactions, the
// rows published raw from the log with no table work.
func Scenarios() []Scenario {
	return []Scenario{
		{"wary", 1, 100}, {"wary", 1, 0}, {"stream", 1, 100}, {"stream", 1, 0}, {"decode", 1, 100}, {"decode", 1, 0}, {"least", 1, 0}, {"watermill", 1, 100}, {"floor", 1, 0}, {"ceiling", 1, 0},
		{"wary", 100, 100}, {"wary", 100, 0}, {"stream", 100, 100}, {"stream", 100, 0}, {"decode", 100, 100}, {"decode", 100, 0}, {"least", 100, 0}, {"watermill", 100, 100}, {"floor", 100, 0}, {"ceiling", 100, 0},
		{"raw", 0, 0},
	}
}

// Result is one run's measurement.
type Result struct {
	Events int
	// Total runs from the first producer's start (the first publish, for
	// raw) until the consumer has received every event (the floor: until
	// the last commit).
	Total time.Duration
	// Produce runs from the start until the last producer transaction
	// committed (zero for raw).
	Produce time.Duration
	// PgCPU is the CPU time the PostgreSQL server used from the start
	// until the end of Total, all its processes counted (-1: unknown, the
	// server is not on this machine).
	PgCPU time.Duration
	// PgSplit is PgCPU by kind of process (pgCPU.usedBy; nil: unknown).
	PgSplit map[string]time.Duration
	// GoCPU is the CPU time this process used over the same span: the
	// producers, the relay or forwarder (or the raw publisher) and the
	// consumer.
	GoCPU time.Duration
	// BrokerCPU is the local RabbitMQ's (beam.smp) over the same span
	// (-1: unknown, the broker is not on this machine).
	BrokerCPU time.Duration
	// Relay is how wary's relay spent its claims (polling), or its
	// counters (streaming).
	Relay string
	// OldestXact is the age of the oldest transaction open on the server
	// (any database, any client), sampled every 100 ms during the run.
	// Watermill's subscriber reads only rows of transactions older than
	// the oldest open one, so a long transaction elsewhere stalls it.
	OldestXact time.Duration
}

// Rate is events per second end to end.
func (r Result) Rate() float64 { return float64(r.Events) / r.Total.Seconds() }

// CommitRate is events per second the producers committed.
func (r Result) CommitRate() float64 {
	if r.Produce == 0 {
		return 0
	}
	return float64(r.Events) / r.Produce.Seconds()
}

// Tail is how long after the last commit the consumer had everything.
func (r Result) Tail() time.Duration { return r.Total - r.Produce }

// CPUPerEvent is PostgreSQL's CPU per event in microseconds (-1: unknown).
func (r Result) CPUPerEvent() float64 { return r.perEvent(r.PgCPU) }

// GoCPUPerEvent is this process's CPU per event in microseconds.
func (r Result) GoCPUPerEvent() float64 { return r.perEvent(r.GoCPU) }

// BrokerCPUPerEvent is RabbitMQ's CPU per event in microseconds (-1:
// unknown).
func (r Result) BrokerCPUPerEvent() float64 { return r.perEvent(r.BrokerCPU) }

// perEvent is d per event in microseconds (-1 when d is, or no event).
func (r Result) perEvent(d time.Duration) float64 {
	if d < 0 || r.Events == 0 {
		return -1
	}
	return float64(d) / float64(time.Microsecond) / float64(r.Events)
}

// Sitting holds the connections shared by the runs.
type Sitting struct {
	cfg   Config
	wconn *rabbit.Conn     // wary's driver connection (topology, relay)
	aconn *amqp.Connection // consumer and raw publisher
	cpu   *pgCPU           // the server's CPU (nil: not on this machine)
	// noCPU says why cpu is nil.
	noCPU error
	seq   int
}

// meter is a run's clock: its start, and the servers' and this process's
// CPU at the start.
type meter struct {
	start time.Time
	cpu   *pgCPU
	cpu0  map[string]time.Duration
	proc0 procCPU
}

// begin starts a run's clock.
func (s *Sitting) begin() meter {
	m := meter{cpu: s.cpu}
	if m.cpu != nil {
		var err error
		if m.cpu0, err = m.cpu.usedBy(); err != nil {
			m.cpu = nil
		}
	}
	m.proc0 = readProcCPU()
	m.start = time.Now()
	return m
}

// result is r with the CPU used since the run began.
func (m meter) result(r Result) Result {
	r.PgCPU, r.PgSplit = m.pgCPU(), m.pgSplit()
	return m.proc0.since(r)
}

// pgCPU is the server's CPU time since begin (-1: unknown).
func (m meter) pgCPU() time.Duration {
	by := m.pgSplit()
	if by == nil {
		return -1
	}
	var t time.Duration
	for _, d := range by {
		t += d
	}
	return t
}

// received ends a run whose producers committed everything produced
// after its start: it waits for the consumer to have all n events, and
// measures the run.
func (m meter) received(ctx context.Context, cons *consumer, n int, produced time.Duration) (Result, error) {
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, err
	}
	return m.result(Result{Events: n, Total: at.Sub(m.start), Produce: produced}), nil
}

// pgSplit is the server's CPU time since begin by kind of process (nil:
// unknown).
func (m meter) pgSplit() map[string]time.Duration {
	if m.cpu == nil {
		return nil
	}
	by, err := m.cpu.usedBy()
	if err != nil {
		return nil
	}
	for k := range by {
		by[k] -= m.cpu0[k]
	}
	return by
}

// Open connects to both servers.
func Open(ctx context.Context, cfg Config) (*Sitting, error) {
	if cfg.WatermillEvents == 0 {
		cfg.WatermillEvents = cfg.Events
	}
	if cfg.Producers < 1 {
		cfg.Producers = 8
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	pc, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cpu, noCPU := localPostgres(ctx, pc)
	_ = pc.Close(ctx)
	wconn, err := rabbit.Dial(ctx, cfg.RabbitURL, nil)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	aconn, err := amqp.Dial(cfg.RabbitURL)
	if err != nil {
		wconn.Close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	return &Sitting{cfg: cfg, wconn: wconn, aconn: aconn, cpu: cpu, noCPU: noCPU}, nil
}

// Close closes the connections.
func (s *Sitting) Close() {
	_ = s.aconn.Close()
	_ = s.wconn.Close()
}

// Run runs one scenario on a fresh quorum queue (and, for the outbox
// contenders, a fresh PostgreSQL schema) and removes both afterwards. The
// floor has no queue, only the schema.
func (s *Sitting) Run(ctx context.Context, sc Scenario) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	s.seq++
	if sc.Contender == "floor" {
		pool, drop, err := s.freshPool(ctx)
		if err != nil {
			return Result{}, err
		}
		defer drop()
		oldest := s.watchXacts(ctx)
		res, err := s.runFloor(ctx, pool, sc, s.cfg.Events)
		res.OldestXact = oldest()
		return res, err
	}
	n := s.cfg.Events
	if sc.Contender == "watermill" {
		n = s.cfg.WatermillEvents
	}
	name, cons, drop, err := s.queue(ctx, sc.Contender, n)
	if err != nil {
		return Result{}, err
	}
	defer drop()
	if sc.Contender == "raw" {
		return s.runRaw(ctx, name, n, cons)
	}
	pool, dropSchema, err := s.freshPool(ctx)
	if err != nil {
		return Result{}, err
	}
	defer dropSchema()
	oldest := s.watchXacts(ctx)
	var res Result
	switch sc.Contender {
	case "wary", "stream":
		res, err = s.runWary(ctx, pool, name, sc, n, cons)
	case "watermill":
		res, err = s.runWatermill(ctx, pool, name, sc, n, cons)
	case "ceiling":
		res, err = s.runCeiling(ctx, pool, name, sc, n, cons)
	case "decode":
		res, err = s.runDecode(ctx, pool, name, sc, n, cons)
	case "least":
		res, err = s.runLeast(ctx, pool, name, sc, n, cons)
	default:
		err = fmt.Errorf("unknown contender %q", sc.Contender)
	}
	res.OldestXact = oldest()
	return res, err
}

// queue declares a fresh quorum queue (and its exchange, of the same
// name) for one run of contender and starts the consumer of its n events;
// drop stops the consumer and deletes both.
func (s *Sitting) queue(ctx context.Context, contender string, n int) (name string, cons *consumer, drop func(), err error) {
	name = fmt.Sprintf("peers.%s.%d.%d", contender, time.Now().UnixNano(), s.seq)
	top := rabbit.Topology{Exchange: name, Queue: name}
	if err := rabbit.Declare(ctx, s.wconn, top); err != nil {
		return "", nil, nil, fmt.Errorf("declare: %w", err)
	}
	del := func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		_ = top.Delete(dctx, s.wconn)
	}
	cons, err = s.consume(ctx, name, n)
	if err != nil {
		del()
		return "", nil, nil, err
	}
	return name, cons, func() { cons.stop(); del() }, nil
}

// watchXacts samples the age of the oldest open transaction on the server
// every 100 ms until the returned function is called, which returns the
// largest age seen.
func (s *Sitting) watchXacts(ctx context.Context) func() time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		max time.Duration
	)
	wg.Go(func() {
		conn, err := pgx.Connect(ctx, s.cfg.PostgresURL)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			var age float64
			err := conn.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM max(now() - xact_start)), 0)::float8
				FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)`).Scan(&age)
			if err == nil {
				max = maxDur(max, time.Duration(age*float64(time.Second)))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() time.Duration { cancel(); wg.Wait(); return max }
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// freshPool returns a pool whose search_path is a new schema, with the
// producers' domain table (orders: id, payload), and a function that
// closes the pool and drops the schema.
func (s *Sitting) freshPool(ctx context.Context) (*pgxpool.Pool, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := pgx.Identifier{"peers_" + hex.EncodeToString(b[:])}.Sanitize()
	admin, err := pgx.Connect(ctx, s.cfg.PostgresURL)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".orders (id text PRIMARY KEY, payload text NOT NULL)"); err != nil {
		_ = admin.Close(ctx)
		return nil, nil, fmt.Errorf("create schema: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(s.cfg.PostgresURL)
	if err != nil {
		_ = admin.Close(ctx)
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(s.cfg.Producers + 8)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_ = admin.Close(ctx)
		return nil, nil, err
	}
	return pool, func() {
		pool.Close()
		dctx := context.WithoutCancel(ctx)
		_, _ = admin.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close(dctx)
	}, nil
}

// consumer receives from one queue until it has n distinct events.
type consumer struct {
	done chan struct{} // closed when all n arrived
	at   time.Time     // when (valid after done)
	err  error
	stop func()
}

// consume starts a consumer (amqp091-go, prefetch 1,000, acks of many at
// once) on queue: the same consumer for every contender.
func (s *Sitting) consume(ctx context.Context, queue string, n int) (*consumer, error) {
	ch, err := s.aconn.Channel()
	if err != nil {
		return nil, fmt.Errorf("consumer channel: %w", err)
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("qos: %w", err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("consume: %w", err)
	}
	c := &consumer{done: make(chan struct{})}
	var wg sync.WaitGroup
	c.stop = func() { _ = ch.Close(); wg.Wait() }
	wg.Go(func() {
		seen := make(map[string]struct{}, n)
		unacked := 0
		for d := range ds {
			id := d.MessageId
			if id == "" {
				id, _ = d.Headers["_watermill_message_uuid"].(string)
			}
			seen[id] = struct{}{}
			unacked++
			full := len(seen) == n
			if full && c.at.IsZero() {
				c.at = time.Now()
				close(c.done)
			}
			if unacked >= 250 || full { // prefetch 1,000 > 250: never stalls
				if err := d.Ack(true); err != nil {
					if c.at.IsZero() {
						c.err = fmt.Errorf("ack: %w", err)
						close(c.done)
					}
					return
				}
				unacked = 0
			}
		}
		if c.at.IsZero() && c.err == nil {
			c.err = errors.New("consumer channel closed")
			close(c.done)
		}
	})
	return c, nil
}

// wait waits for the consumer to have everything, and returns when.
func (c *consumer) wait(ctx context.Context, n int) (time.Time, error) {
	select {
	case <-c.done:
		return c.at, c.err
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("waiting for %d events: %w", n, ctx.Err())
	}
}

// runRaw publishes n messages to queue's exchange with amqp091-go on one
// channel with at most 256 unconfirmed publishes.
func (s *Sitting) runRaw(ctx context.Context, exchange string, n int, cons *consumer) (Result, error) {
	ch, err := s.confirmChannel()
	if err != nil {
		return Result{}, err
	}
	defer ch.Close()
	m := s.begin()
	events := make(chan [2]int, 1)
	events <- [2]int{0, n}
	close(events)
	if err := publishRaw(ctx, ch, exchange, events); err != nil {
		return Result{}, err
	}
	at, err := cons.wait(ctx, n)
	if err != nil {
		return Result{}, err
	}
	return m.result(Result{Events: n, Total: at.Sub(m.start)}), nil
}

// confirmChannel opens a channel in confirm mode on the raw connection.
func (s *Sitting) confirmChannel() (*amqp.Channel, error) {
	ch, err := s.aconn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return ch, nil
}

// publishRaw publishes the events of each range [first, last) from
// events, until it is closed, on ch (in confirm mode) with at most 256
// unconfirmed publishes, and waits for the last confirms.
func publishRaw(ctx context.Context, ch *amqp.Channel, exchange string, events <-chan [2]int) error {
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	confirm := func() error {
		select {
		case c, ok := <-confirms:
			if !ok || !c.Ack {
				return errors.New("raw: publish not confirmed")
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	out := 0
	for r := range events {
		for i := r[0]; i < r[1]; i++ {
			if out == 256 {
				if err := confirm(); err != nil {
					return err
				}
				out--
			}
			err := ch.PublishWithContext(ctx, exchange, "", false, false, amqp.Publishing{
				MessageId: fmt.Sprintf("r%09d", i), Body: payload(i, aggregate(0, i, 0)), DeliveryMode: amqp.Persistent})
			if err != nil {
				return fmt.Errorf("raw publish: %w", err)
			}
			out++
		}
	}
	for ; out > 0; out-- {
		if err := confirm(); err != nil {
			return err
		}
	}
	return nil
}

// produce runs the producers: n events in transactions of perTx, the
// transactions dealt round-robin to s.cfg.Producers goroutines, each
// transaction written by write(event indexes) in a transaction of its own,
// and committed(event indexes) called once it committed, if not nil.
// It returns when all have committed.
func (s *Sitting) produce(ctx context.Context, pool *pgxpool.Pool, n, perTx int, write func(ctx context.Context, tx pgx.Tx, first, last int) error,
	committed func(first, last int)) error {
	txs := (n + perTx - 1) / perTx
	var wg sync.WaitGroup
	errs := make([]error, s.cfg.Producers)
	for p := range s.cfg.Producers {
		wg.Go(func() {
			for t := p; t < txs; t += s.cfg.Producers {
				first, last := t*perTx, min((t+1)*perTx, n)
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(ctx, tx, first, last) })
				if err != nil {
					errs[p] = fmt.Errorf("producer %d, events %d-%d: %w", p, first, last-1, err)
					return
				}
				if committed != nil {
					committed(first, last)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// execer is what addOrders writes with: a pgx.Tx, or a connection in a
// transaction block of its own (runLeast's).
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// addOrders writes the domain rows of events first to last-1 in tx, one
// statement: the producers' own work, which every outbox contender's and
// the floor's transactions do.
func addOrders(ctx context.Context, tx execer, run, first, last, aggs int) error {
	ids := make([]string, 0, last-first)
	bodies := make([]string, 0, last-first)
	for i := first; i < last; i++ {
		ids = append(ids, fmt.Sprintf("o%09d", i))
		bodies = append(bodies, string(payload(i, aggregate(run, i, aggs))))
	}
	_, err := tx.Exec(ctx, `INSERT INTO orders (id, payload) SELECT * FROM unnest($1::text[], $2::text[])`, ids, bodies)
	if err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	return nil
}

// aggregate is event i's aggregate: one of aggs, or its own (aggs 0),
// unique per run.
func aggregate(run, i, aggs int) string {
	if aggs > 0 {
		return fmt.Sprintf("agg-%03d", i%aggs)
	}
	return fmt.Sprintf("agg-%d-%d", run, i)
}

// payload is event i's body (about 70 bytes of JSON).
func payload(i int, agg string) []byte {
	return fmt.Appendf(nil, `{"event":%d,"aggregate":%q,"type":"order.placed","amount":1234}`, i, agg)
}

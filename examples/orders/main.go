// Command orders runs wary's whole mission end to end, with faults
// injected on purpose, and checks the outcome:
//
//   - an order service writes each order change and its event to the
//     outbox in one transaction;
//   - the relay publishes the outbox, and crashes once after publishing and
//     before marking rows sent (so it publishes them again);
//   - the broker duplicates one event, delivers one order's events out of
//     order, and redelivers one event late (the consumer holding it died):
//     after the event behind it was parked, or at once where its session
//     or message group holds that event back;
//   - a billing consumer applies the events through the inbox with version
//     checks: duplicates are dropped, a gap is retried, and a gap that
//     stays open is parked with the events behind it, then replayed in
//     order by an operator; confirming an order stages a payment with an
//     idempotency key in the same transaction;
//   - the payment call runs after the commit, and the caller crashes once
//     after the provider charged and before recording it (so it calls
//     again, with the same key).
//
// It prints a report and exits with status 1 if any event was lost, any
// effect was applied twice, any order was not charged exactly once, or an
// injected fault did not happen.
//
// By default everything is embedded (SQLite and the in-memory broker), and
// only that is built:
//
//	go -C examples run ./orders
//
// Every other service, and tracing, is built in only under a build tag of
// its name, so that the first run compiles, and a fresh machine downloads,
// nothing it does not run (no pgx, no AMQP client, no Kafka, AWS or Azure
// SDK, no OpenTelemetry SDK). With -trace it also prints the OpenTelemetry
// spans of one order (order-1), from Outbox.Add through the relay and the
// broker to the inbox commit, as a tree and with the stdout exporter:
//
//	go -C examples run -tags trace ./orders -trace
//
// Flags switch to real services, each with its tag:
//
//	go -C examples run -tags postgres ./orders -postgres postgres://postgres@127.0.0.1:5432/test
//	go -C examples run -tags rabbit ./orders -broker 'amqp://guest:guest@127.0.0.1:5672/?exchange=orders'
//	WARY_RABBIT_URL=amqp://guest:guest@127.0.0.1:5672/ go -C examples run -tags rabbit ./orders -broker rabbit://orders
//	go -C examples run -tags kafka ./orders -broker 'kafka://orders?brokers=127.0.0.1:9092'
//	go -C examples run -tags sqsfifo ./orders -broker 'sqsfifo://orders.fifo?region=us-east-1&endpoint=http://127.0.0.1:4566'
//	WARY_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://…' go -C examples run -tags servicebus ./orders -broker servicebus://orders
//	go -C examples run -tags nats ./orders -broker 'nats://127.0.0.1:4222/ORDERS?consumer=billing&subject=orders'
//	PUBSUB_EMULATOR_HOST=127.0.0.1:8085 go -C examples run -tags gcppubsub ./orders -broker gcppubsub://projects/wary/topics/orders
//
// The last against pstest, started by
//
//	go -C drivers/gcppubsub run ./psemu/cmd/psemu -addr 127.0.0.1:8085 -project wary -topic orders -subscription billing -ordering
//
// Tags combine (-tags postgres,kafka,trace). A flag whose service the
// build left out fails the run with the command that builds it in.
//
// The PostgreSQL tables go to a fresh schema, dropped at the end. The
// RabbitMQ exchange and its queue EXCHANGE.billing are declared (after
// deleting what an earlier run left) and deleted at the end. On Kafka the
// topic must exist; the subscription is the consumer group billing. The
// SQS FIFO queue and the Service Bus queue must exist, and are both the
// topic and the subscription.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
)

func main() {
	var cfg Config
	flag.StringVar(&cfg.Broker, "broker", "mem://orders", "topic URL: mem://TOPIC (built in); with -tags rabbit: rabbit://EXCHANGE (server in WARY_RABBIT_URL) or amqp://USER:PASS@HOST:PORT/?exchange=EXCHANGE; with -tags kafka: kafka://TOPIC?brokers=HOST:PORT; with -tags sqsfifo: sqsfifo://QUEUE.fifo?region=R&endpoint=URL; with -tags servicebus: servicebus://QUEUE (connection string in WARY_SERVICEBUS_CONNECTION_STRING); with -tags nats: nats://HOST:PORT/STREAM?consumer=NAME&subject=SUBJECT; with -tags gcppubsub: gcppubsub://projects/P/topics/T (subscription projects/P/subscriptions/billing; emulator in PUBSUB_EMULATOR_HOST). E.g. go -C examples run -tags kafka ./orders -broker 'kafka://orders?brokers=127.0.0.1:9092'")
	flag.StringVar(&cfg.Subscription, "subscription", "", "subscription URL (default: derived from -broker)")
	flag.StringVar(&cfg.Postgres, "postgres", "", "PostgreSQL URL, with -tags postgres (default: an embedded SQLite database)")
	traceFlag := flag.Bool("trace", false, "with -tags trace: print the OpenTelemetry spans of one order (order-1), from Outbox.Add to the inbox commit, with the stdout exporter")
	flag.Parse()
	var tr *traced
	if *traceFlag {
		var err error
		if tr, err = installTracing(); err != nil {
			log.Print(err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt) // Ctrl-C still drops what the run made
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, os.Stdout, cfg)
	if err != nil {
		log.Print(err)
		cancel()
		os.Exit(1)
	}
	if tr != nil {
		if err := tr.print(ctx, os.Stdout, "order-1"); err != nil {
			log.Print(err)
		}
	}
	if !rep.OK() {
		os.Exit(1)
	}
}

// Config selects the broker and the database.
type Config struct {
	Broker       string // topic URL ("" or mem://...: in memory)
	Subscription string // subscription URL ("": derived from Broker)
	Postgres     string // PostgreSQL URL ("": SQLite)
	// SettleTimeout is how long the consumer waits for every event to be
	// settled (0: 30s).
	SettleTimeout time.Duration
}

// Report is what a run found.
type Report struct {
	History conformance.Report
	// Totals are the history's counts with copies (the metrics count
	// those).
	Totals conformance.Totals
	Orders int
	// Published counts the events the relay published (distinct IDs);
	// Publishes the messages that reached the broker, copies included.
	Published, Publishes int
	// Deliveries counts every delivery; Redeliveries those that came back
	// after a nack (the inbox's retries and the injected redelivery).
	Deliveries, Redeliveries int
	Inbox                    idem.Stats
	Effects                  int // effects applied (rows in billing_effects)
	StillParked              int // parked after the operator's replay
	Charges                  map[string]int
	ProviderCalls            int
	Faults                   Faults
}

// Faults says which injected faults happened.
type Faults struct {
	RelayCrash, BrokerDuplicate, Reorder, Redelivery, PaymentCrash bool
}

func (f Faults) all() bool {
	return f.RelayCrash && f.BrokerDuplicate && f.Reorder && f.Redelivery && f.PaymentCrash
}

// OK reports whether nothing was lost, no effect was applied twice, every
// order was charged exactly once, and every injected fault happened.
func (r Report) OK() bool {
	if !r.History.Valid() || len(r.Charges) != r.Orders || r.StillParked != 0 || !r.Faults.all() {
		return false
	}
	for _, n := range r.Charges {
		if n != 1 {
			return false
		}
	}
	return true
}

// The faults, by message ID.
const (
	orders       = 5
	crashAt      = 2                   // the relay dies after its 2nd publish
	duplicated   = "order-5/confirmed" // the broker delivers it twice
	reordered    = "order-3/placed"    // the broker delivers it after order-3/confirmed
	redelivered  = "order-4/placed"    // the consumer dies holding it: back once its follower is parked
	follower     = "order-4/confirmed" // the event behind it
	paymentCrash = "payment:order-2:1" // the caller dies after the provider charged
)

// Run runs the mission with cfg's broker and database, writes its report
// to w, and returns it. An error means the run could not be carried out.
func Run(ctx context.Context, w io.Writer, cfg Config) (Report, error) {
	br, err := openBroker(ctx, cfg.Broker, cfg.Subscription)
	if err != nil {
		return Report{}, err
	}
	defer br.close()
	br.settle = cfg.SettleTimeout
	if cfg.Postgres != "" {
		return runPostgres(ctx, w, cfg.Postgres, br)
	}
	s, err := openSQLite(ctx)
	if err != nil {
		return Report{}, err
	}
	defer s.close()
	return mission(ctx, w, s, br)
}

func mission[Tx any](ctx context.Context, w io.Writer, db *shop[Tx], br *brokers) (Report, error) {
	rep := Report{Orders: orders}
	quiet := broker.Telemetry{Logger: slog.New(slog.DiscardHandler)} // the relay, the inbox and the payments log nothing
	say := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	say("broker:    %s", br.name)
	say("database:  %s", db.name)
	for _, q := range append([]string{
		`CREATE TABLE orders (id TEXT PRIMARY KEY, version BIGINT NOT NULL, status TEXT NOT NULL, total BIGINT NOT NULL)`,
	}, billingTables...) {
		if err := inTx(ctx, db, func(tx Tx) error { return db.exec(ctx, tx, q) }); err != nil {
			return rep, err
		}
	}

	// 1. The order service: each change and its event in one transaction.
	box, err := outbox.New[Tx](db.store, nil)
	if err != nil {
		return rep, err
	}
	change := func(id string, version int64, status string, total int) error {
		// The order service's own span: Outbox.Add records its context
		// with the row (a no-op unless tracing is on, see -trace).
		ctx, span := otel.Tracer("orders").Start(ctx, "order "+status)
		defer span.End()
		return inTx(ctx, db, func(tx Tx) error {
			if err := db.exec(ctx, tx, `INSERT INTO orders (id, version, status, total) VALUES ($1, $2, $3, $4)
				ON CONFLICT (id) DO UPDATE SET version = excluded.version, status = excluded.status`, id, version, status, total); err != nil {
				return err
			}
			// The body in JSON (the default codec, as billing decodes
			// it), its content type in a header.
			m, err := outbox.NewMessage(nil, id+"/"+status, id, version, "order."+status, OrderEvent{Order: id, Total: total})
			if err != nil {
				return err
			}
			_, err = box.Add(ctx, tx, m)
			return err
		})
	}
	for i := 1; i <= orders; i++ {
		id := fmt.Sprintf("order-%d", i)
		if err := change(id, 1, "placed", 10*i); err != nil {
			return rep, err
		}
		if err := change(id, 2, "confirmed", 10*i); err != nil {
			return rep, err
		}
	}
	say("orders:    %d placed and confirmed: %d events written to the outbox with the orders", orders, 2*orders)

	// 2. The relay, through a broker that duplicates and reorders, dies
	// once after publishing and before marking.
	h := conformance.NewHistory()
	chaos, topic := newChaosTopic(br.topic, duplicated, reordered)
	count := 0
	// Batches of crashAt rows: the relay publishes a claimed batch in one
	// call, so the crash leaves exactly one batch published and not
	// marked.
	relayOpts := &outbox.RelayOptions{Owner: "relay-1", Concurrency: 1, BatchSize: crashAt, Telemetry: quiet}
	// The test failpoint, in the context the relay runs with: it records
	// each message published and, the first time, kills the relay after
	// the crashAt-th.
	sent := func(crash bool) context.Context {
		return failpoint.WithAfterPublish(ctx, func(m *broker.Message) error {
			h.Sent(m.ID)
			if count++; crash && count == crashAt {
				return fmt.Errorf("relay process killed after publishing %s", m.ID)
			}
			return nil
		})
	}
	relay, err := outbox.NewRelay(db.store, topic, relayOpts)
	if err != nil {
		return rep, err
	}
	if _, err := relay.Drain(sent(true)); err == nil || relay.Stats().Published != 0 {
		return rep, fmt.Errorf("the relay failpoint did not fire (%v)", err)
	}
	rep.Faults.RelayCrash = true
	say("relay:     crashed after publishing %d events, before marking them sent (injected)", crashAt)
	chaos.arm()
	restarted, err := outbox.NewRelay(db.store, topic, relayOpts)
	if err != nil {
		return rep, err
	}
	n, err := restarted.Drain(sent(false))
	if err != nil {
		return rep, err
	}
	if err := chaos.flush(ctx); err != nil {
		return rep, err
	}
	rep.Published, rep.Publishes = n, chaos.publishes
	rep.Faults.BrokerDuplicate, rep.Faults.Reorder = chaos.fired.duplicate, chaos.fired.reorder
	say("relay:     restarted and published all %d (the %d it had published again, with the same IDs)", n, crashAt)
	say("broker:    duplicated %s; delivers %s after the event that follows it (injected)", duplicated, reordered)

	// 3. The billing consumer: inbox, version check, payment staged with
	// an idempotency key in the same transaction.
	// Gaps retried through the broker and parked, which the report
	// narrates; the default on a queue without order holds them in the
	// store instead (docs/gaps.md).
	inboxOpts := &idem.Options{Telemetry: quiet,
		MaxAttempts: 3, Versions: billingVersions, Gaps: idem.GapsRetry}
	if br.sub.Capabilities().RedeliveryHorizon == capability.HorizonUnknown {
		// The driver cannot say how late a copy may come: the inbox needs
		// a retention chosen by us (a finite horizon is the default, an
		// unbounded one keeps claims for ever).
		inboxOpts.Retention = 7 * 24 * time.Hour
	}
	inbox, err := idem.NewInbox[Tx](db.store, "billing", br.sub.Capabilities(), inboxOpts)
	if err != nil {
		return rep, err
	}
	provider := newProvider()
	crashed := false
	payments, err := keys.New[Tx](db.store, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true},
		&keys.Options{CallTimeout: 50 * time.Millisecond, Telemetry: quiet})
	if err != nil {
		return rep, err
	}
	billing := db.billing(payments) // behind the inbox's version checks (Options.Versions)
	if err := consume(ctx, br.sub, br.topic.Capabilities(), inbox, billing, h, &rep, br.settle); err != nil {
		return rep, err
	}
	s := inbox.Stats()
	when := "once " + follower + " behind it was settled"
	if br.sub.Capabilities().HeadOfLine {
		when = "at once (its session or group holds " + follower + " back)"
	}
	say("consumer:  the consumer holding %s died; the broker redelivered it %s (injected)", redelivered, when)
	say("billing:   %d applied, %d duplicates dropped, %d version gaps (%d retries), %d parked (%d held behind a gap)",
		s.Applied, s.Duplicates, s.Gaps, s.Retried, s.Parked, s.Held)

	// 4. The operator replays what was parked, in version order.
	parked, err := inbox.Parked(ctx, idem.ParkedFilter{})
	if err != nil {
		return rep, err
	}
	for _, p := range parked {
		say("parked:    %s (%s)", p.MessageID, p.Reason)
	}
	res, err := inbox.ReplayAll(ctx, billing)
	if err != nil {
		return rep, err
	}
	for agg, r := range res {
		say("operator:  replayed %s: %d applied, %d still parked", agg, r.Replayed, r.Remaining)
		rep.StillParked += r.Remaining
	}

	// 5. The payment calls, after the commits.
	// The test failpoint, in the context of the calls: the billing
	// process dies once, after the provider charged, before recording it.
	calls := failpoint.WithAfterCall(ctx, func(key string) error {
		if key == paymentCrash && !crashed {
			crashed = true
			return errors.New("billing process killed after the provider charged, before recording it")
		}
		return nil
	})
	if _, err := payments.CallStaged(calls, provider.call, 0); err == nil || !crashed {
		return rep, errors.New("the payment failpoint did not fire")
	}
	rep.Faults.PaymentCrash = true
	say("payments:  crashed after the provider charged for %s, before recording it (injected)", strings.TrimSuffix(strings.TrimPrefix(paymentCrash, "payment:"), ":1"))
	time.Sleep(60 * time.Millisecond) // the dead caller's hold on the key expires
	if _, err := payments.CallStaged(calls, provider.call, 0); err != nil {
		return rep, err
	}
	rep.Charges, rep.ProviderCalls = provider.totals()
	say("payments:  retried with the same key: %d calls to the provider, %d charges for %d orders", rep.ProviderCalls, len(rep.Charges), orders)

	// 6. The check: committed effects, read back from the database.
	ids, err := db.column(ctx, `SELECT message_id FROM billing_effects`)
	if err != nil {
		return rep, err
	}
	h.Applied(ids...)
	rep.Effects = len(ids)
	rep.Inbox = inbox.Stats()
	rep.History = h.Check()
	rep.Totals = h.Totals()
	writeReport(w, &rep)
	return rep, nil
}

// billingTables are the billing consumer's tables: its view of each
// order, and one row per effect applied (which the report counts).
var billingTables = []string{
	`CREATE TABLE billing_orders (id TEXT PRIMARY KEY, version BIGINT NOT NULL, status TEXT NOT NULL)`,
	`CREATE TABLE billing_effects (message_id TEXT NOT NULL)`,
}

// billingVersions is the table the billing consumer's version checks
// update (its inbox's Options.Versions).
var billingVersions = idem.VersionTable{Table: "billing_orders", IDColumn: "id", VersionColumn: "version"}

// The billing consumer's handler, run in the inbox transaction after the
// version check (its inbox's Options.Versions is billingVersions), is
// written for each database: billingSQLite (setup.go) and billingPostgres
// (postgres.go), each on its store's transactions. Both record the effect,
// keep the order's status, and stage one payment per confirmed order with
// an idempotency key (billingPayment).

// billingPayment returns the idempotency key and the request of the
// payment a confirmed order stages: the key names the operation (one
// payment attempt of this order), never the customer.
func billingPayment(ev idem.Event, order OrderEvent) (key string, charge []byte) {
	return "payment:" + ev.AggregateID + ":1", fmt.Appendf(nil, `{"order":%q,"amount":%d}`, order.Order, order.Total)
}

// DedupWindowError says that nothing arrived on a broker that drops a
// message whose ID it saw within its deduplication window (SQS FIFO): the
// run's event IDs are the same every run, so a run inside the window of
// an earlier one on the same queue publishes only copies the broker drops.
type DedupWindowError struct {
	Window    time.Duration
	Scope     string
	Published int
	Waited    time.Duration
}

func (e *DedupWindowError) Error() string {
	return fmt.Sprintf("consumer: after %s, none of %d events arrived. This broker drops a message whose ID it saw in the last %s (per %s), "+
		"and this example's event IDs are the same every run: a run less than %s after an earlier one on the same queue publishes only copies that the broker drops. "+
		"Wait %s, or run on a fresh queue (SQS: a new QUEUE.fifo)", e.Waited, e.Published, e.Window, e.Scope, e.Window, e.Window)
}

// consume delivers to billing until every published event was settled
// for good (applied, dropped as a duplicate or parked) and nothing more
// arrives for a moment. The first delivery of the redelivered event is
// held, as if its consumer had died, and nacked (without a delay, which
// not every subscription can do) once the event behind it was settled
// for good, so that its gap stays open until the inbox parks it; where the
// broker holds the follower back itself (head-of-line), at once.
func consume[Tx any](ctx context.Context, sub *broker.Subscription, pub capability.Topic, inbox *idem.Inbox[Tx], billing idem.Handler[Tx], h *conformance.History, rep *Report, timeout time.Duration) error {
	done := map[string]bool{}
	nacked := map[string]int{}
	injected := false
	defer func() { rep.Faults.Redelivery = injected && done[redelivered] }()
	var held *broker.Delivery
	release := func() error {
		d := held
		held = nil
		// a lock that expired meanwhile gave it back already
		if err := d.Nack(ctx, 0); err != nil && !errors.Is(err, broker.ErrLockLost) {
			return err
		}
		return nil
	}
	hol := sub.Capabilities().HeadOfLine
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		if time.Now().After(deadline) {
			if w := pub.DedupWindow; rep.Deliveries == 0 && w > 0 {
				return &DedupWindowError{Window: w, Scope: pub.DedupScope.String(), Published: rep.Published, Waited: timeout}
			}
			return fmt.Errorf("consumer: after %s, %d of %d events settled (last error: %v)", timeout, len(done), rep.Published, lastErr)
		}
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		ds, err := sub.Receive(rctx, 10)
		cancel()
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if len(ds) == 0 {
			if len(done) >= rep.Published {
				return nil
			}
			continue
		}
		for _, d := range ds {
			id := d.Message.ID
			h.Delivered(id)
			rep.Deliveries++
			if nacked[id] > 0 {
				rep.Redeliveries++
				nacked[id]--
			}
			if id == redelivered && !injected {
				injected = true
				nacked[id]++
				held = d
				if hol || done[follower] {
					if err := release(); err != nil {
						return err
					}
				}
				continue
			}
			switch r, err := inbox.Handle(ctx, d, billing); r {
			case idem.ResultGapRetried, idem.ResultFailed:
				lastErr = err // nacked by the inbox: a retry
				nacked[id]++
			default: // applied, duplicate, stale, parked, held
				if err != nil && !errors.Is(err, idem.ErrAckAfterCommit) {
					return err
				}
				done[id] = true
				if id == follower && held != nil {
					if err := release(); err != nil {
						return err
					}
				}
			}
		}
	}
}

func inTx[Tx any](ctx context.Context, db *shop[Tx], f func(tx Tx) error) error {
	return db.inTx(ctx, f)
}

func writeReport(w io.Writer, r *Report) {
	h := r.History
	twice := len(h.DuplicateEffects)
	fmt.Fprintf(w, "\nreport\n")
	fmt.Fprintf(w, "  published:  %d events; %d messages reached the broker (%d copies from the relay crash and the broker)\n", r.Published, r.Publishes, r.Publishes-r.Published)
	fmt.Fprintf(w, "  delivered:  %d deliveries of %d events: %d duplicates, %d redeliveries\n", r.Deliveries, h.Delivered, r.Deliveries-h.Delivered-r.Redeliveries, r.Redeliveries)
	fmt.Fprintf(w, "  effects:    %d applied for %d events, %d applied twice\n", r.Effects, h.Applied, twice)
	fmt.Fprintf(w, "  parked:     %d (%d held behind a gap), replayed %d, still parked %d\n", r.Inbox.Parked, r.Inbox.Held, r.Inbox.Replayed, r.StillParked)
	fmt.Fprintf(w, "  payments:   %d provider calls, %d orders charged, %s\n", r.ProviderCalls, len(r.Charges), chargedOnce(r))
	f := r.Faults
	fmt.Fprintf(w, "  faults:     relay crash %s, broker duplicate %s, reorder %s, redelivery %s, payment crash %s\n",
		yes(f.RelayCrash), yes(f.BrokerDuplicate), yes(f.Reorder), yes(f.Redelivery), yes(f.PaymentCrash))
	fmt.Fprintf(w, "  history:    %s\n", h)
	if r.OK() {
		fmt.Fprintln(w, "result: OK: nothing lost, no effect applied twice, every order charged once")
		return
	}
	var why []string
	if len(h.Lost) > 0 {
		why = append(why, fmt.Sprintf("lost %v", h.Lost))
	}
	if twice > 0 {
		why = append(why, fmt.Sprintf("applied twice %v", h.DuplicateEffects))
	}
	if len(h.Unexpected) > 0 {
		why = append(why, fmt.Sprintf("unexpected %v", h.Unexpected))
	}
	if r.StillParked > 0 {
		why = append(why, fmt.Sprintf("%d still parked", r.StillParked))
	}
	if !f.all() {
		why = append(why, "an injected fault did not happen")
	}
	if c := chargedOnce(r); c != "each once" {
		why = append(why, c)
	}
	fmt.Fprintf(w, "result: FAILED: %s\n", strings.Join(why, "; "))
}

func chargedOnce(r *Report) string {
	bad := []string{}
	for k, n := range r.Charges {
		if n != 1 {
			bad = append(bad, fmt.Sprintf("%s charged %d times", k, n))
		}
	}
	if len(r.Charges) != r.Orders {
		bad = append(bad, fmt.Sprintf("%d of %d orders charged", len(r.Charges), r.Orders))
	}
	if len(bad) == 0 {
		return "each once"
	}
	return strings.Join(bad, ", ")
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// OrderEvent is the body of every order event, in JSON.
type OrderEvent struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

// provider is a payment provider that honours idempotency keys and replays
// the first result.
type provider struct {
	mu      sync.Mutex
	calls   int
	charges map[string]int
	results map[string][]byte
}

func newProvider() *provider {
	return &provider{charges: map[string]int{}, results: map[string][]byte{}}
}

func (p *provider) call(_ context.Context, key string, intent []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if r, ok := p.results[key]; ok {
		return r, nil // a retry: replay, do not charge again
	}
	p.charges[key]++
	p.results[key] = []byte("charge-" + key)
	return p.results[key], nil
}

func (p *provider) totals() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int{}
	for k, v := range p.charges {
		m[k] = v
	}
	return m, p.calls
}

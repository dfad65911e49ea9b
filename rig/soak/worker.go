package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	_ "github.com/wary-go/wary/drivers/gcppubsub" // registers gcppubsub://
	"github.com/wary-go/wary/drivers/kafka"
	_ "github.com/wary-go/wary/drivers/nats"       // registers nats://
	_ "github.com/wary-go/wary/drivers/rabbit"     // registers rabbit:// and amqp://
	_ "github.com/wary-go/wary/drivers/servicebus" // registers servicebus://
	_ "github.com/wary-go/wary/drivers/sqsfifo"    // registers sqsfifo://
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/outbox"
)

// ChildEnv is the environment variable that makes ChildMain run a worker:
// Run sets it, as JSON, on the child processes it starts.
const ChildEnv = "WARY_SOAK_CHILD"

// Worker roles.
const (
	roleConsumer = "consumer"
	roleRelay    = "relay"
)

// Log line kinds written by workers.
const (
	lineDelivery  = 'D' // a delivery reached the handler
	linePublished = 'P' // the relay published a message
	lineSlowStart = 'S' // the slow handler started sleeping, holding the claim
	lineSlowEnd   = 'E' // the slow handler woke up
	lineGapStats  = 'G' // the inbox's gap counters grew (gapStats)
)

// workerSpec is what a worker needs; a child process reads it from ChildEnv.
type workerSpec struct {
	Role        string
	Name        string
	Store       string // storePostgres or storeMySQL
	DSN         string // the store's URL or DSN, through the database proxy
	Schema      string // PostgreSQL: the run's schema (MySQL: the DSN's database)
	URL         string // the topic (relay) or subscription (consumer) URL
	Log         string
	Arm         string        // the lock-expiry trigger file
	SlowFor     time.Duration // how long the armed handler sleeps
	Concurrency int
	Unsafe      bool // no inbox, no version check (Config.unsafe)
}

// ChildMain runs the worker that ChildEnv describes, if it is set, and
// exits the process; without ChildEnv it returns at once. Call it first in
// the main (or TestMain) of a binary that calls Run.
func ChildMain() {
	v, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "soak child: %s: %v\n", ChildEnv, err)
		os.Exit(2)
	}
	// The parent holds our stdin open; EOF means it is gone.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "soak child: parent gone")
		os.Exit(3)
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runWorker(ctx, spec, childMux(spec.URL), nil); err != nil {
		fmt.Fprintf(os.Stderr, "soak child %s: %v\n", spec.Name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childMux returns the mux a child opens url with: the default one, except
// for Kafka, whose group clients get a short session timeout so that a
// killed consumer's partitions move on quickly, and a rebalance timeout of
// 20s instead of kgo's 60s. The latter works around kfake: it expires a
// member parked in JoinGroup when the rebalance waits longer than that
// member's session (for a member killed after it heartbeated), and drops
// the parked request unanswered (pkg/kfake groups.go, handleJoin parks the
// member without renewing its session; removeMember never replies), where
// Kafka keeps a member awaiting join alive. kgo waits for the JoinGroup
// response for the rebalance timeout plus 10s, blocking commits meanwhile:
// the consumer sat 70s on partitions the group had given away, and when it
// was the one left after the last rebalance the run stalled (issue 17).
// With 20s, it rejoins after 30s. The rebalance timeout stays well above
// the subscription's RevokeTimeout (10s).
func childMux(url string) *broker.URLMux {
	if !strings.HasPrefix(url, "kafka:") {
		return broker.DefaultURLMux()
	}
	o := &kafka.URLOpener{ClientOpts: []kgo.Opt{
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ProducerLinger(0),
	}}
	m := new(broker.URLMux)
	m.RegisterTopic("kafka", o)
	m.RegisterSubscription("kafka", o)
	return m
}

// eventLog appends one line per event to a worker's log file.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*eventLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventLog{f: f}, nil
}

// line writes kind, the wall-clock time and id, with one write call.
func (l *eventLog) line(kind byte, id string) {
	b := fmt.Appendf(nil, "%c %d %s\n", kind, time.Now().UnixNano(), id)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(b)
}

func (l *eventLog) Close() error { return l.f.Close() }

// stateTable is the consumer's version table; effectsTable records every
// applied effect in commit order, without a unique constraint, so that an
// effect applied twice shows.
const (
	stateTable   = "soak_state"
	effectsTable = "soak_effects"
)

// runWorker runs spec's role until ctx is done. opened, if set, receives
// the subscription or topic once open (the in-process "kill" closes it).
func runWorker(ctx context.Context, spec workerSpec, mux *broker.URLMux, opened func(io.Closer)) error {
	lg, err := openLog(spec.Log)
	if err != nil {
		return err
	}
	defer lg.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	switch spec.Store {
	case storeMySQL:
		db, err := mysqlWorkerDB(ctx, spec, logger)
		if err != nil {
			return err
		}
		defer db.close()
		return runRole(ctx, spec, mux, db, lg, logger, opened)
	case storePostgres:
		db, err := postgresWorkerDB(ctx, spec)
		if err != nil {
			return err
		}
		defer db.close()
		return runRole(ctx, spec, mux, db, lg, logger, opened)
	}
	return fmt.Errorf("soak: unknown store %q", spec.Store)
}

func runRole[Tx any](ctx context.Context, spec workerSpec, mux *broker.URLMux, db *workerDB[Tx], lg *eventLog, logger *slog.Logger, opened func(io.Closer)) error {
	if spec.Role == roleRelay {
		return runRelay(ctx, spec, mux, db.st, lg, logger, opened)
	}
	return runConsumer(ctx, spec, mux, db, lg, logger, opened)
}

func runRelay[Tx any](ctx context.Context, spec workerSpec, mux *broker.URLMux, st idem.Store[Tx], lg *eventLog, logger *slog.Logger, opened func(io.Closer)) error {
	topic, err := mux.OpenTopic(ctx, spec.URL)
	if err != nil {
		return err
	}
	defer topic.Close()
	if opened != nil {
		opened(topic)
	}
	r, err := outbox.NewRelay(st, topic, &outbox.RelayOptions{
		Owner: spec.Name, Concurrency: spec.Concurrency, PollInterval: 200 * time.Millisecond,
		MaxAttempts: math.MaxInt32, Backoff: broker.Backoff{Initial: 50 * time.Millisecond, Max: time.Second},
		PublishTimeout: 10 * time.Second, PurgeInterval: -1, Telemetry: broker.Telemetry{Logger: logger},
	})
	if err != nil {
		return err
	}
	// The soak logs each message the relay published, before it is marked.
	err = r.Run(failpoint.WithAfterPublish(ctx, func(m *broker.Message) error { lg.line(linePublished, m.ID); return nil }))
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func runConsumer[Tx any](ctx context.Context, spec workerSpec, mux *broker.URLMux, db *workerDB[Tx], lg *eventLog, logger *slog.Logger, opened func(io.Closer)) error {
	sub, err := mux.OpenSubscription(ctx, spec.URL)
	if err != nil {
		return err
	}
	defer sub.Close()
	if opened != nil {
		opened(sub)
	}
	in, err := idem.NewInbox(db.st, "soak", sub.Capabilities(), &idem.Options{
		Versions:  idem.VersionTable{Table: stateTable, IDColumn: "id", VersionColumn: "version"},
		Retention: 24 * time.Hour, AllowShortRetention: true, PurgeInterval: -1,
		MaxAttempts: math.MaxInt32, CommitTimeout: 10 * time.Second, Telemetry: broker.Telemetry{Logger: logger},
	})
	if err != nil {
		return err
	}
	// apply runs behind the inbox's version checks (Options.Versions), and
	// writes its rows in tx, the inbox's transaction (a pgx.Tx on
	// PostgreSQL, a *sql.Tx on MySQL).
	apply := func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		ev, err := idem.ParseEvent(d.Message)
		if err != nil {
			return err
		}
		if ev.Version == 1 {
			if err := db.exec(ctx, tx, db.insertState, ev.AggregateID); err != nil {
				return err
			}
		}
		if err := db.exec(ctx, tx, db.insertEffect, d.Message.ID, ev.AggregateID, ev.Version); err != nil {
			return err
		}
		if ctx.Value(deliveringKey{}) != d.Message.ID {
			// an early event applied after its predecessor, in the
			// predecessor's transaction: its own delivery was acked when
			// it was held, so a slow pause here would expire the
			// predecessor's lock, not redeliver this message
			return nil
		}
		return slowIfArmed(ctx, spec, lg, d.Message.ID)
	}
	// GapsAuto's rule: the inbox holds gaps in the store where the
	// subscription keeps no order per aggregate (the stores, PostgreSQL and
	// MySQL, can).
	o := sub.Capabilities().Ordering
	gs := &gapStats{lg: lg, holds: o == capability.OrderNone || o == capability.OrderQueue}
	wrapped := func(ctx context.Context, d *broker.Delivery) error {
		_, err := in.Handle(ctx, d, apply)
		gs.note(in.Stats())
		return err
	}
	if spec.Unsafe {
		wrapped = func(ctx context.Context, d *broker.Delivery) error {
			ev, err := idem.ParseEvent(d.Message)
			if err != nil {
				return err
			}
			// The effect commits first and the slow pause comes between
			// commit and ack: the copy the broker delivers meanwhile
			// applies it again, whatever stops this process afterwards.
			if err := db.execNoTx(ctx, db.insertEffect, d.Message.ID, ev.AggregateID, ev.Version); err != nil {
				return err
			}
			if err := slowIfArmed(ctx, spec, lg, d.Message.ID); err != nil {
				return err
			}
			return d.Ack(ctx)
		}
	}
	// No drain: a consumer that stops, killed or closed, cuts its handlers
	// off (on the memory target a kill is this cancel).
	err = sub.Run(ctx, func(ctx context.Context, d *broker.Delivery) error {
		lg.line(lineDelivery, d.Message.ID+" "+strconv.Itoa(d.Attempt))
		return wrapped(context.WithValue(ctx, deliveringKey{}, d.Message.ID), d)
	}, &broker.RunOptions{Concurrency: spec.Concurrency, PerKey: true, MaxLockRenewal: -1, DrainTimeout: -1,
		Backoff: broker.Backoff{Initial: 20 * time.Millisecond, Max: 250 * time.Millisecond}})
	if ctx.Err() != nil || errors.Is(err, broker.ErrClosed) {
		return nil
	}
	return err
}

// gapStats writes the growth of an inbox's gap counters (idem.Stats'
// Early, EarlyApplied, Gaps and Retried) to the worker's log, as a line
// "G ns early,earlyApplied,gaps,retried,holds" of deltas since the last
// one: the lines of all workers add up to the run's counts, but for
// what a killed consumer counted after its last line (a transaction it
// did not commit).
type gapStats struct {
	lg    *eventLog
	holds bool
	mu    sync.Mutex
	last  [4]int64
}

func (g *gapStats) note(s idem.Stats) {
	now := [4]int64{s.Early, s.EarlyApplied, s.Gaps, s.Retried}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range now { // a handler may bring an older snapshot
		now[i] = max(now[i], g.last[i])
	}
	if now == g.last {
		return
	}
	var d [4]int64
	for i := range now {
		d[i] = now[i] - g.last[i]
	}
	g.last = now
	g.lg.line(lineGapStats, fmt.Sprintf("%d,%d,%d,%d,%t", d[0], d[1], d[2], d[3], g.holds))
}

// deliveringKey is the context key of the message ID a Run handler was
// delivered (the apply function also runs for early events of the same
// aggregate, in that delivery's transaction).
type deliveringKey struct{}

// slowIfArmed makes this handler the slow one if the trigger file exists
// and this process wins the rename: it sleeps past the lock timeout inside
// the inbox transaction, holding the claim, so that the broker delivers the
// message again meanwhile.
func slowIfArmed(ctx context.Context, spec workerSpec, lg *eventLog, id string) error {
	if spec.Arm == "" {
		return nil
	}
	if err := os.Rename(spec.Arm, fmt.Sprintf("%s.%s.%d", spec.Arm, spec.Name, os.Getpid())); err != nil {
		return nil // not armed, or another handler won
	}
	lg.line(lineSlowStart, id)
	t := time.NewTimer(spec.SlowFor)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	lg.line(lineSlowEnd, id)
	return ctx.Err()
}

package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/outbox"
)

// Target is the broker a run soaks.
type Target struct {
	// Name names the run ("rabbit").
	Name string
	// TopicURL and SubscriptionURL are opened by the relays and consumers.
	// "{broker}" in them is replaced by the address of the proxy in front
	// of BrokerAddr.
	TopicURL, SubscriptionURL string
	// BrokerAddr, if set, is the broker's HOST:PORT: workers reach it
	// through a toxiproxy, and broker-reset cuts their connections there.
	BrokerAddr string
	// Env is set in the workers' environment ("{broker}" replaced as in
	// the URLs): a connection string that a driver reads from there.
	Env map[string]string
	// BrokerReset cuts the workers' broker connections where BrokerAddr
	// cannot (Kafka advertises its own addresses); it returns how many
	// connections it cut.
	BrokerReset func(ctx context.Context) (int, error)
	// BrokerRestart restarts the broker or fails it over; it returns how
	// many partitions, nodes or connections it moved (0: not fired).
	BrokerRestart func(ctx context.Context) (int, error)
	// LockTimeout is the subscription's lock timeout (0: none, and
	// NotApplicable must say why for LockExpiry).
	LockTimeout time.Duration
	// NotApplicable gives, for each kind the target cannot do, the reason.
	NotApplicable map[Kind]string
	// InProcess, if set, is the mux of a broker living in this process:
	// workers are goroutines opening their URLs on it.
	InProcess *broker.URLMux
	// SingleActive says that the broker gives the subscription to one
	// consumer at a time (RabbitMQ's single active consumer): consumers
	// added by the rebalance are hot standbys, seen to fire once they run
	// beside the active one, and to take over when it is killed (the
	// report counts the consumers that handled messages).
	SingleActive bool
	// Concurrency is each consumer's handler concurrency (default 4).
	Concurrency int
	// DeliveryLimit says, for the report, how the subscription limits
	// deliveries, or why it has no limit.
	DeliveryLimit string
	// DeadLettered, if set, counts the messages in the subscription's
	// dead-letter queue; the run fails if there is any (every message is
	// applied once; a gap is held, or retried below the limit).
	DeadLettered func(ctx context.Context) (int, error)
}

// Config configures a run.
type Config struct {
	// Messages is the number of events (default 10000); Aggregates the
	// number of aggregates they are spread over (default 100).
	Messages, Aggregates int
	// Seed derives the fault schedule.
	Seed uint64
	// Postgres is the PostgreSQL URL of the store (the inbox, the outbox
	// and the soak's tables, on package idem/postgres); the run works in a
	// fresh schema, dropped at the end.
	Postgres string
	// MySQL, set instead of Postgres, is the DSN of a MySQL or MariaDB
	// server (go-sql-driver/mysql's format, over tcp(HOST:PORT)) for the
	// store, on package idem/mysql; the run works in a fresh database,
	// dropped at the end.
	MySQL string
	// Dir receives the workers' logs.
	Dir string
	// Timeout bounds the run (default 10 minutes).
	Timeout time.Duration
	// Logf receives progress lines (default: none).
	Logf func(format string, args ...any)

	// unsafe makes consumers apply effects without the inbox and the
	// version check: the soak's own tests use it to see a run fail.
	unsafe bool
}

// StallTimeout is how long the end of a run may see no new effect before
// it fails as stalled.
const StallTimeout = 60 * time.Second

// StepTimeout bounds how long a fault may take to be seen to fire.
const StepTimeout = 60 * time.Second

// Run runs a soak of target and returns its report. The error is for a run
// that could not be set up or was canceled; a run that went wrong returns a
// report whose OK is false.
func Run(ctx context.Context, cfg Config, target Target) (rep *Report, err error) {
	if cfg.Messages <= 0 {
		cfg.Messages = 10000
	}
	if cfg.Aggregates <= 0 {
		cfg.Aggregates = 100
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if target.Concurrency <= 0 {
		target.Concurrency = 4
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	r := &runner{cfg: cfg, t: target, rep: &Report{Name: target.Name, Seed: cfg.Seed, Messages: cfg.Messages,
		Fired: map[Kind]int{}, NotApplicable: map[Kind]string{}, DeliveryLimit: target.DeliveryLimit, DeadLettered: -1}}
	defer r.cleanup()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	err = r.run(ctx)
	r.rep.Duration = time.Since(start)
	if err != nil {
		r.rep.Failures = append(r.rep.Failures, err.Error())
	}
	r.stopAll()
	if err := r.check(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return r.rep, nil
}

type runner struct {
	cfg Config
	t   Target
	rep *Report

	db        database
	dbProxy   *Proxy
	brProxy   *Proxy
	workerDSN string // the store's DSN through dbProxy
	topicURL  string
	subURL    string
	exe       string
	env       []string // KEY=VALUE for the workers
	arm       string
	ids       []string
	written   atomic.Int64
	target    atomic.Int64
	limit     int64 // the most the trickle raises target to
	prodDone  chan struct{}
	prodErr   error // set before prodDone is closed
	consumers []*worker
	relay     *worker
	all       []*worker
	seq       int
}

func newSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *runner) setup(ctx context.Context) error {
	var err error
	if r.t.InProcess == nil {
		if r.exe, err = os.Executable(); err != nil {
			return err
		}
	}
	if r.db, err = openDatabase(ctx, r.cfg); err != nil {
		return err
	}
	r.rep.Store = r.db.describe(ctx)
	if r.dbProxy, err = NewProxy(r.db.kind(), r.db.upstream()); err != nil {
		return err
	}
	r.workerDSN = r.db.workerDSN(r.dbProxy.Addr())
	r.topicURL, r.subURL = r.t.TopicURL, r.t.SubscriptionURL
	if r.t.BrokerAddr != "" {
		if r.brProxy, err = NewProxy("broker", r.t.BrokerAddr); err != nil {
			return err
		}
		r.topicURL = strings.ReplaceAll(r.topicURL, "{broker}", r.brProxy.Addr())
		r.subURL = strings.ReplaceAll(r.subURL, "{broker}", r.brProxy.Addr())
	}
	for k, v := range r.t.Env {
		if r.brProxy != nil {
			v = strings.ReplaceAll(v, "{broker}", r.brProxy.Addr())
		}
		r.env = append(r.env, k+"="+v)
	}
	r.arm = filepath.Join(r.cfg.Dir, "slow.arm")
	return nil
}

// cleanup kills every worker still running (their process groups), then
// removes the schema (or database) and the proxies.
func (r *runner) cleanup() {
	for _, w := range r.all {
		if !w.exited() {
			w.kill()
		}
	}
	for _, w := range r.all {
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
		}
		if w.stdin != nil {
			w.stdin.Close()
		}
	}
	if r.db != nil {
		r.db.close()
	}
	if r.dbProxy != nil {
		r.dbProxy.Close()
	}
	if r.brProxy != nil {
		r.brProxy.Close()
	}
}

// start starts a worker of role, named after it and a sequence number.
func (r *runner) start(role string) (*worker, error) {
	r.seq++
	name := fmt.Sprintf("%s%d", role, r.seq)
	spec := workerSpec{Role: role, Name: name, Store: r.db.kind(), DSN: r.workerDSN, Schema: r.db.schema(),
		Log: filepath.Join(r.cfg.Dir, name+".log"), Concurrency: r.t.Concurrency, Unsafe: r.cfg.unsafe}
	if role == roleRelay {
		spec.URL, spec.Concurrency = r.topicURL, 8
	} else {
		spec.URL = r.subURL
		if r.t.LockTimeout > 0 {
			spec.Arm, spec.SlowFor = r.arm, 2*r.t.LockTimeout+500*time.Millisecond
		}
	}
	w, err := startWorker(spec, r.exe, r.env, r.t.InProcess)
	if err != nil {
		return nil, err
	}
	r.all = append(r.all, w)
	return w, nil
}

// produce writes the events through the outbox, 100 per transaction, but
// never beyond r.target, which the schedule raises as it goes.
func (r *runner) produce(ctx context.Context) error {
	n, aggs := r.cfg.Messages, r.cfg.Aggregates
	run := newSuffix()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < n; {
		end := min(i+100, n, int(r.target.Load()))
		if end <= i {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			continue
		}
		msgs := make([]*outbox.Message, 0, end-i)
		for j := i; j < end; j++ {
			msgs = append(msgs, &outbox.Message{ID: fmt.Sprintf("soak-%s-%07d", run, j),
				AggregateID: fmt.Sprintf("agg-%04d", j%aggs), Version: int64(j/aggs + 1), Type: "soak.event",
				Payload: fmt.Appendf(nil, `{"n":%d}`, j)})
		}
		if err := r.db.add(ctx, msgs); err != nil {
			return fmt.Errorf("soak: outbox: %w", err)
		}
		for _, m := range msgs {
			r.ids = append(r.ids, m.ID)
		}
		r.written.Store(int64(end))
		i = end
	}
	return nil
}

// applied counts the distinct messages whose effect committed.
func (r *runner) applied(ctx context.Context) (int, error) {
	return r.db.count(ctx, "SELECT count(DISTINCT msg_id) FROM "+effectsTable)
}

// until polls cond every 50ms until it holds, restarting workers that
// ended on their own and raising the producer's target by trickle per
// poll, for at most d.
func (r *runner) until(ctx context.Context, d time.Duration, what string, trickle int64, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	nextLog := time.Now().Add(10 * time.Second)
	for {
		if time.Now().After(nextLog) {
			nextLog = time.Now().Add(10 * time.Second)
			got, _ := r.applied(ctx)
			unsent, _ := r.db.count(ctx, "SELECT count(*) FROM wary_outbox WHERE state = 0") // the outbox's backlog: its pending rows
			r.cfg.Logf("soak %s: waiting for %s: %d written, %d unsent, %d applied", r.t.Name, what, r.written.Load(), unsent, got)
		}
		if err := r.restartEnded(); err != nil {
			return err
		}
		select {
		case <-r.prodDone:
			if r.prodErr != nil {
				return r.prodErr
			}
		default:
		}
		ok, err := cond()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if ok {
			return nil
		}
		if t := r.target.Load(); trickle > 0 && t < r.limit {
			r.target.Store(min(t+trickle, r.limit))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("soak: %s: not within %s", what, d)
		case <-tick.C:
		}
	}
}

// restartEnded starts a new worker for each one that ended without being
// asked to.
func (r *runner) restartEnded() error {
	for i, w := range r.consumers {
		if w.unexpected() {
			r.cfg.Logf("soak %s: worker ended on its own, restarted: %s", r.t.Name, w.failure())
			r.rep.WorkerRestarts++
			w.markStopped()
			nw, err := r.start(roleConsumer)
			if err != nil {
				return err
			}
			r.consumers[i] = nw
		}
	}
	if r.relay != nil && r.relay.unexpected() {
		r.cfg.Logf("soak %s: worker ended on its own, restarted: %s", r.t.Name, r.relay.failure())
		r.rep.WorkerRestarts++
		r.relay.markStopped()
		nw, err := r.start(roleRelay)
		if err != nil {
			return err
		}
		r.relay = nw
	}
	if r.rep.WorkerRestarts > 20 {
		return errors.New("soak: more than 20 workers ended on their own")
	}
	return nil
}

// stopAll asks every worker to stop, and kills those that do not within
// 30s.
func (r *runner) stopAll() {
	for _, w := range r.all {
		if !w.exited() {
			w.term()
		}
	}
	deadline := time.After(30 * time.Second)
	for _, w := range r.all {
		select {
		case <-w.done:
		case <-deadline:
			w.kill()
		}
	}
}

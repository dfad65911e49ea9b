package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/store"
)

// RelayOptions configures a Relay. Nil means defaults.
type RelayOptions struct {
	// Owner names this relay instance in claims and logs (default
	// "relay-" and a random suffix). Instances sharing a store need
	// distinct owners.
	Owner string
	// BatchSize is the most rows one claim takes (default 500). A claim
	// takes what is due, up to this: under a steady trickle batches stay
	// small, and a backlog drains in fewer round trips and confirm waits
	// (BENCHMARKS.md: 500 against 100, 1.3-1.7x the throughput to RabbitMQ,
	// the same commit-to-publish latency at 1,000 rows/s).
	BatchSize int
	// PerAggregate is the most rows of one aggregate one claim takes
	// (default 10); they are published one after the other.
	PerAggregate int
	// Concurrency is how many aggregates are published at once when a
	// batch has to be published aggregate by aggregate, after a failure
	// (default 8).
	Concurrency int
	// Pipeline is how many claimed batches Run publishes at once (default
	// 2): it claims the next batch while earlier ones wait for the broker's
	// confirms. While the relay is behind, each claim takes its share of
	// the aggregates with due rows (1/Pipeline of them, PerAggregate rows
	// each, up to BatchSize), so that on few aggregates every batch in
	// flight holds heads of its own rather than one holding them all.
	// Only stores whose claims exclude each other (store.ConcurrentClaimer:
	// PostgreSQL) pipeline; on others Run holds one batch at a time. On
	// PostgreSQL each batch in flight holds a pooled connection until it
	// is marked: keep Pipeline well below the pool's size.
	Pipeline int
	// PollInterval is how often Run looks for rows when nothing woke it
	// (default 1s). On PostgreSQL, Run also wakes on NOTIFY.
	PollInterval time.Duration
	// NoListen turns off LISTEN/NOTIFY: Run only polls.
	NoListen bool
	// Stream makes Run read committed rows from the store's log
	// (store.Streamer: PostgreSQL logical replication, see
	// docs/outbox-wal.md) instead of claiming them from the table, on
	// stores that can. One relay streams at a time; others stand by, and
	// take over when its stream is released. While the server cannot
	// stream, Run polls the table, and tries the stream again every
	// StreamRetry (default 30s); while the server is out of reach (a
	// restart), every PollInterval. A stream that fails once open is
	// opened again after PollInterval, doubling up to StreamRetry while
	// each new stream fails before it confirmed a position. Published
	// rows are deleted in bulk, at once (KeepSent applies to rows
	// published by claims only). The stream's rows go to Pipeline lanes
	// by aggregate, each publishing windows of at most BatchSize rows one
	// after the other.
	Stream      bool
	StreamRetry time.Duration
	// MaxAttempts is how many failed publishes quarantine a row (default
	// 10). A row that can never be published (broker.ErrTooLarge,
	// broker.ErrInvalid, an error marked broker.Permanent, or a row that
	// does not decode or breaks Add's rules: ErrInvalidMessage) is
	// quarantined at its first failure.
	MaxAttempts int
	// Backoff gives the delay before a failed row is tried again, by
	// attempt (default 1s doubling to 5m).
	Backoff broker.Backoff
	// PublishTimeout bounds each Publish call (default 30s).
	PublishTimeout time.Duration
	// Lease is how long a lease-based claim (the SQLite store) survives a
	// relay that stopped without releasing it (default 30s).
	Lease time.Duration
	// KeepSent is how long sent and discarded rows are kept before Purge
	// deletes them (default 7 days). Run purges every PurgeInterval
	// (default 10m; negative: never), PurgeBatch rows per transaction
	// (default 1000).
	KeepSent      time.Duration
	PurgeInterval time.Duration
	PurgeBatch    int
	// Telemetry's Logger receives failures and quarantines, its
	// TracerProvider the relay's "publish" spans and its MeterProvider its
	// latency histograms and the outbox's backlog gauges (see the package
	// doc, Telemetry); Now is the relay's clock.
	broker.Telemetry
}

// Relay publishes committed outbox rows to a topic. See the package
// documentation for its guarantees. A Relay is safe for concurrent use;
// several relays, in one process or many, may share a store.
type Relay struct {
	store store.RelayStore
	topic *broker.Topic
	o     RelayOptions

	wake     broadcast    // fired by Wake
	changed  broadcast    // fired by Requeue and Discard (a streaming relay sweeps)
	landed   broadcast    // fired when a large batch is marked or released
	bigAloft atomic.Int64 // large batches claimed and not yet marked or released

	depth      int          // claim loops (Run), 1 when claims do not pipeline
	behind     atomic.Bool  // the last batch claimed was large
	aggs       atomic.Int64 // aggregates with due rows, as last seen (share)
	headsAloft atomic.Int64 // aggregates held by batches in flight

	streamer  store.Streamer // the store's log (RelayOptions.Stream), or nil
	waker     store.Wake     // the store's wake-up (store.Waker), or nil
	streaming atomic.Bool    // the relay streams (RelayOptions.Stream)
	standby   atomic.Bool    // another relay holds the stream
	idled     atomic.Bool    // the wake-up was told the relay is idle since it was last told it is busy
	listening atomic.Bool    // the wake-up listens
	idle      atomic.Int64   // times Run went to wait for work
	rate      rateMeter
	tel       *relayTel

	// pause waits between attempts to stream (sleep; a test records).
	pause func(ctx context.Context, d time.Duration) bool

	published, failed, quarantined, claims, crashes atomic.Int64
	lastErr                                         atomic.Pointer[relayError]
}

type relayError struct {
	msg string
	at  time.Time
}

// NewRelay returns a relay publishing store's rows to topic.
func NewRelay[Tx any](p store.Provider[Tx], topic *broker.Topic, opts *RelayOptions) (*Relay, error) {
	if topic == nil {
		return nil, fmt.Errorf("%w: NewRelay needs a topic", broker.ErrInvalid)
	}
	st, err := check.Driver(p)
	if err != nil {
		return nil, err
	}
	var o RelayOptions
	if opts != nil {
		o = *opts
	}
	if o.Owner == "" {
		o.Owner = "relay-" + broker.NewID()[:12]
	}
	c := check.Options{What: "relay options"}
	c.Count("BatchSize", o.BatchSize)
	c.Count("PerAggregate", o.PerAggregate)
	c.Count("Concurrency", o.Concurrency)
	c.Count("Pipeline", o.Pipeline)
	c.Count("MaxAttempts", o.MaxAttempts)
	c.Count("PurgeBatch", o.PurgeBatch)
	c.Duration("PollInterval", o.PollInterval, false)
	c.Duration("PublishTimeout", o.PublishTimeout, false)
	c.Duration("Lease", o.Lease, false)
	c.Duration("KeepSent", o.KeepSent, false)
	c.Duration("PurgeInterval", o.PurgeInterval, true)
	c.Duration("StreamRetry", o.StreamRetry, false)
	c.Backoff("Backoff", o.Backoff)
	if err := c.Err(); err != nil {
		return nil, err
	}
	def := func(p *int, v int) {
		if *p < 1 {
			*p = v
		}
	}
	def(&o.BatchSize, 500)
	def(&o.PerAggregate, 10)
	def(&o.Concurrency, 8)
	def(&o.Pipeline, 2)
	def(&o.MaxAttempts, 10)
	def(&o.PurgeBatch, 1000)
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defd(&o.PollInterval, time.Second)
	defd(&o.PublishTimeout, 30*time.Second)
	defd(&o.Lease, 30*time.Second)
	defd(&o.KeepSent, 7*24*time.Hour)
	defd(&o.PurgeInterval, 10*time.Minute)
	defd(&o.StreamRetry, 30*time.Second)
	if o.Backoff == (broker.Backoff{}) {
		o.Backoff = broker.Backoff{Initial: time.Second, Max: 5 * time.Minute}
	}
	o.Telemetry = o.Telemetry.WithDefaults()
	r := &Relay{store: st, topic: topic, o: o, depth: 1, pause: sleep}
	r.idled.Store(true) // the wake-up learns of the first work
	if cc, ok := st.(store.ConcurrentClaimer); ok && cc.ConcurrentClaims() {
		r.depth = o.Pipeline
	}
	if s, ok := st.(store.Streamer); ok && o.Stream {
		r.streamer = s
	}
	if w, ok := st.(store.Waker); ok && !o.NoListen {
		// The wake-up lasts unless renewed: the relay renews it each time
		// it wakes and finds nothing, at least every PollInterval, so only
		// a relay that stopped (or stalled that long) loses it.
		r.waker = w.Waker(o.Owner, 2*o.PollInterval+30*time.Second)
	}
	r.rate.start = o.Now()
	newRelayTel(r)
	return r, nil
}

// Statement is this relay's part of the guarantee, as built: the
// publication its options give and the publish half of the transport its
// topic's capabilities give (the delivery half is the consumer's).
func (r *Relay) Statement() guarantee.Statement {
	tc := r.topic.Capabilities()
	p := guarantee.Pipeline{Topic: &tc, Inbox: &guarantee.Inbox{},
		Outbox: &guarantee.Outbox{MaxAttempts: r.o.MaxAttempts, Backoff: r.o.Backoff, PublishTimeout: r.o.PublishTimeout}}
	return guarantee.Explain(p).Stages("publication", "transport")
}

// Owner returns the relay's owner name.
func (r *Relay) Owner() string { return r.o.Owner }

// Wake makes a running Run look for rows now instead of at its next poll.
// A producer in the same process may call it after committing.
func (r *Relay) Wake() {
	r.wake.fire()
}

// woken returns a channel closed by the next Wake.
func (r *Relay) woken() <-chan struct{} { return r.wake.wait() }

// broadcast wakes every goroutine waiting on it each time it fires.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next fire (nil: nobody waits yet)
}

// wait returns a channel that the next fire closes.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// fire closes the channel of every wait before it.
func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Run publishes rows until ctx is done, then releases its claims and
// returns nil. It runs RelayOptions.Pipeline claim loops (one on a store
// that claims by lease): each claims a batch, publishes it and marks it,
// claims again at once while there is work, and otherwise waits for a
// notification (a store that wakes relays, store.Waker), a Wake, or at
// most PollInterval (see pace for the whole policy). It purges sent rows
// older than KeepSent every PurgeInterval. Errors of the store or the
// broker are logged and retried after PollInterval; Run returns early only
// if the topic is closed.
func (r *Relay) Run(ctx context.Context) error {
	st := r.Statement()
	r.o.Logger.Log(ctx, st.Level(), "idem: relay started", slog.String("owner", r.o.Owner), slog.Any("guarantee", st))
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer r.observeOutbox()()
	if r.waker != nil {
		wg.Go(func() { r.listen(ctx) })
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		r.busy(rctx) // a stopped relay waits for no notification
		if err := r.store.ReleaseOutbox(rctx, r.o.Owner); err != nil {
			r.o.Logger.Warn("idem: relay: release", slog.String("owner", r.o.Owner), slog.String("error", err.Error()))
		}
	}()
	if r.streamer != nil {
		return r.runStream(ctx, r.streamer)
	}
	return r.poll(ctx)
}

// poll runs the relay's claim loops until ctx is done.
func (r *Relay) poll(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	depth := r.depth
	var workers sync.WaitGroup
	var fatal atomic.Pointer[error]
	for i := range depth {
		workers.Go(func() {
			if err := r.work(ctx, i == 0); err != nil {
				fatal.CompareAndSwap(nil, &err)
				cancel()
			}
		})
	}
	workers.Wait()
	if err := fatal.Load(); err != nil {
		return *err
	}
	return nil
}

// work is one of Run's claim loops: it claims a batch, publishes it and
// marks it, and claims again or waits as pace says. The first loop also
// purges.
func (r *Relay) work(ctx context.Context, purge bool) error {
	nextPurge := r.o.Now()
	for {
		if purge && r.o.PurgeInterval > 0 && !r.o.Now().Before(nextPurge) {
			nextPurge = r.o.Now().Add(r.o.PurgeInterval)
			if _, err := r.Purge(ctx); err != nil && ctx.Err() == nil {
				r.noteErr("purge", err)
			}
		}
		woken := r.woken() // before the claim: a Wake during it is not lost
		claimed, _, err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, broker.ErrClosed) {
			return err
		}
		if err != nil {
			r.noteErr("run", err)
		}
		p := pace(r.o.PollInterval, claimed, err, r.aloft, func() time.Duration { return r.goIdle(ctx) })
		if p.again {
			continue
		}
		if p.idle {
			r.idle.Add(1)
		}
		t := time.NewTimer(p.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-p.landed:
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// goIdle is called by a claim loop that found nothing. While the relay
// listens, its store's wake-up (store.Wake.Idle) says how long to wait:
// -1 to claim once more, 0 to wait as usual, or a shorter wait.
func (r *Relay) goIdle(ctx context.Context) time.Duration {
	if r.waker == nil || !r.listening.Load() {
		return 0
	}
	r.idled.Store(true)
	d, err := r.waker.Idle(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.noteErr("idle", err)
		}
		return 0
	}
	if d > 0 {
		d = min(d, r.o.PollInterval)
	}
	return d
}

// busy tells the store's wake-up that the relay found work (or stops):
// producers stop waking it.
func (r *Relay) busy(ctx context.Context) {
	if r.waker == nil {
		return
	}
	if err := r.waker.Busy(ctx); err != nil && ctx.Err() == nil {
		r.noteErr("busy", err)
	}
}

func (r *Relay) listen(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		err := r.waker.Listen(ctx, func() {
			r.Wake()
			r.listening.Store(true)
		})
		r.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		r.noteErr("listen", err)
		if !sleep(ctx, r.o.Backoff.Delay(min(attempt, 8))) {
			return
		}
		r.Wake() // notifications may have been missed meanwhile
	}
}

func (r *Relay) noteErr(op string, err error) {
	if err == nil {
		err = errors.New("stopped")
	}
	r.lastErr.Store(&relayError{msg: op + ": " + err.Error(), at: r.o.Now()})
	r.o.Logger.Warn("idem: relay: "+op, slog.String("owner", r.o.Owner), slog.String("error", err.Error()))
}

// RunOnce claims one batch, publishes it and records the outcome. It
// returns how many rows it published.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	_, n, err := r.runOnce(ctx)
	return n, err
}

// Drain runs batches until none is due, then releases its claims (a
// lease), and returns how many rows it published. Rows backing off after a
// failure are left for later.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		claimed, n, err := r.runOnce(ctx)
		total += n
		if err != nil || claimed == 0 {
			return total, errors.Join(err, r.store.ReleaseOutbox(context.WithoutCancel(ctx), r.o.Owner))
		}
	}
}

// Purge deletes sent and discarded rows older than KeepSent, in
// transactions of at most PurgeBatch rows, and returns how many.
func (r *Relay) Purge(ctx context.Context) (int, error) {
	before := r.o.Now().Add(-r.o.KeepSent)
	total := 0
	for {
		n, err := r.store.PurgeOutbox(ctx, before, r.o.PurgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("idem: relay: purge: %w", err)
		}
		if n < r.o.PurgeBatch || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// Quarantined lists quarantined rows (at most limit, if positive).
func (r *Relay) Quarantined(ctx context.Context, limit int) ([]Row, error) {
	rs, err := r.store.ListOutbox(ctx, store.OutboxFilter{States: []store.OutboxState{store.OutboxQuarantined}, Limit: limit})
	return rows(rs), err
}

// Requeue makes a quarantined row pending again, with its attempts reset,
// and reports whether it was quarantined.
func (r *Relay) Requeue(ctx context.Context, rowID int64) (bool, error) {
	ok, err := r.store.SetOutboxState(ctx, rowID, store.OutboxPending, r.o.Now(), store.OutboxQuarantined)
	if ok {
		r.Wake()
		r.changed.fire()
	}
	return ok, err
}

// Discard gives up on a pending or quarantined row: it is never published,
// and the later rows of its aggregate flow again. Consumers that check
// versions will see a gap where it was.
func (r *Relay) Discard(ctx context.Context, rowID int64) (bool, error) {
	ok, err := r.store.SetOutboxState(ctx, rowID, store.OutboxDiscarded, r.o.Now(), store.OutboxPending, store.OutboxQuarantined)
	if ok {
		r.Wake()
		r.changed.fire()
	}
	return ok, err
}

// RelayStats are a relay's counters since it was created.
type RelayStats struct {
	Published   int64 // rows published and marked sent
	Failed      int64 // failed publishes (each retried or quarantined)
	Quarantines int64 // rows this relay quarantined
	Claims      int64 // batches claimed (streaming: windows published) with at least one row
	Crashes     int64 // claims released by a test's failpoint (failpoint.WithAfterPublish)
	// Throughput is rows published per second over the last minute (or
	// since the relay was created, if that is shorter).
	Throughput float64
	// Listening reports whether the relay's store wakes it when rows are
	// committed (PostgreSQL: an open LISTEN connection).
	Listening bool
	// Idle counts the times Run found nothing to do and went to wait for a
	// notification, a Wake or PollInterval.
	Idle int64
	// Streaming reports whether the relay publishes from the store's log
	// (RelayOptions.Stream), and Standby whether it waits while another
	// relay does.
	Streaming, Standby bool
	// LastError is the latest failure ("" if none), at LastErrorAt.
	LastError   string
	LastErrorAt time.Time
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	s := RelayStats{Published: r.published.Load(), Failed: r.failed.Load(), Quarantines: r.quarantined.Load(),
		Claims: r.claims.Load(), Crashes: r.crashes.Load(), Throughput: r.rate.perSecond(r.o.Now()),
		Listening: r.listening.Load(), Idle: r.idle.Load(), Streaming: r.streaming.Load(), Standby: r.standby.Load()}
	if e := r.lastErr.Load(); e != nil {
		s.LastError, s.LastErrorAt = e.msg, e.at
	}
	return s
}

// RelayHealth is the outbox's backlog with this relay's counters.
type RelayHealth struct {
	Health
	RelayStats
}

// Health reports the backlog (from the store) and this relay's counters.
// An operator alerts on OldestUnsentAge and Quarantined.
func (r *Relay) Health(ctx context.Context) (RelayHealth, error) {
	h, err := r.store.OutboxHealth(ctx, r.o.Now())
	return RelayHealth{Health: Health(h), RelayStats: r.Stats()}, err
}

// rateMeter counts events per second over the last minute.
type rateMeter struct {
	mu      sync.Mutex
	start   time.Time
	buckets [60]struct{ sec, n int64 }
}

func (m *rateMeter) add(now time.Time, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := now.Unix()
	b := &m.buckets[s%60]
	if b.sec != s {
		b.sec, b.n = s, 0
	}
	b.n += n
}

func (m *rateMeter) perSecond(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := now.Unix()
	var n int64
	for _, b := range m.buckets {
		if b.sec > s-60 && b.sec <= s {
			n += b.n
		}
	}
	window := now.Sub(m.start).Seconds()
	if window > 60 {
		window = 60
	}
	if window < 1 {
		window = 1
	}
	return float64(n) / window
}

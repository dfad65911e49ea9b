package outbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/wary-go/wary/internal/wotel"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/internal/check"
	"github.com/wary-go/wary/idem/internal/defaults"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/signal"
)

// RelayOptions configures a Relay: how it publishes. Nil means defaults.
// Where its rows come from (claims from the table, a lease, the
// database's log) is the store's choice, set in the store's options (see
// postgres.Options.Source and sqlite.Options.Source).
type RelayOptions struct {
	// Owner names this relay instance in claims and logs (default
	// "relay-" and a random suffix). Instances sharing a store need
	// distinct owners.
	Owner string
	// BatchSize is the most rows one batch takes (default 500). A claim
	// takes what is due, up to this: under a steady trickle batches stay
	// small, and a backlog drains in fewer round trips and confirm waits
	// (BENCHMARKS.md: 500 against 100, 1.3-1.7x the throughput to RabbitMQ,
	// the same commit-to-publish latency at 1,000 rows/s).
	BatchSize int
	// Concurrency is how many aggregates are published at once when a
	// batch has to be published aggregate by aggregate, after a failure
	// (default 8).
	Concurrency int
	// PollInterval is how often the relay's source looks for rows when
	// nothing woke it, and how soon the relay tries again after a failure
	// (default 1s). On PostgreSQL, the source also wakes on NOTIFY.
	PollInterval time.Duration
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

// Relay publishes committed outbox rows to a topic: it takes batches from
// the source its store hands out, publishes them, and settles them. See
// the package documentation for its guarantees. A Relay is safe for
// concurrent use; several relays, in one process or many, may share a
// store.
type Relay struct {
	st    relayStore
	topic *broker.Topic
	o     RelayOptions

	wake    signal.Broadcast // fired by Wake
	changed signal.Broadcast // fired by Requeue, Discard and Purge (rows left in the table may flow again)
	sources sources
	n       counters
	rate    rateMeter
	tel     *relayTel
}

// sources are the relay's open sources: Run's, and the one RunOnce and
// Drain share.
type sources struct {
	mu   sync.Mutex
	run  seam.Source[Row]
	once *sharedSource
}

// sharedSource is the source RunOnce and Drain share, with the calls that
// use it now. A Drain that ends closes it, or, while other calls still
// publish its batches, leaves it to the last of them to close: a source is
// closed (a lease given up) only once its batches are settled.
type sharedSource struct {
	src     seam.Source[Row]
	users   int
	closing bool // a Drain ended: the last user closes it
}

// counters are a relay's counters.
type counters struct {
	published, failed, quarantined, batches atomic.Int64
	publishing, settling                    atomic.Int64 // nanoseconds
	lastErr                                 atomic.Pointer[relayError]
}

type relayError struct {
	msg string
	at  time.Time
}

// NewRelay returns a relay publishing the rows of the store s to topic.
func NewRelay[Tx any](s idem.Store[Tx], topic *broker.Topic, opts *RelayOptions) (*Relay, error) {
	if topic == nil {
		return nil, fmt.Errorf("%w: NewRelay needs a topic", broker.ErrInvalid)
	}
	st, err := check.Part[relayStore](s, "the relay's part")
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
	c.Count("Concurrency", o.Concurrency)
	c.Count("MaxAttempts", o.MaxAttempts)
	c.Count("PurgeBatch", o.PurgeBatch)
	c.Duration("PollInterval", o.PollInterval, false)
	c.Duration("PublishTimeout", o.PublishTimeout, false)
	c.Duration("KeepSent", o.KeepSent, false)
	c.Duration("PurgeInterval", o.PurgeInterval, true)
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
	def(&o.Concurrency, 8)
	def(&o.PurgeBatch, 1000)
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defd(&o.PollInterval, time.Second)
	defd(&o.KeepSent, 7*24*time.Hour)
	defd(&o.PurgeInterval, 10*time.Minute)
	defaults.Relay(&o.MaxAttempts, &o.Backoff, &o.PublishTimeout) // the guarantee assumes the same
	t := &o.Telemetry
	wotel.Defaults(&t.Logger, &t.TracerProvider, &t.MeterProvider, &t.Now)
	r := &Relay{st: st, topic: topic, o: o}
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
	r.wake.Fire()
}

// open opens a source from the relay's store.
func (r *Relay) open(ctx context.Context) (seam.Source[Row], error) {
	src, err := r.st.OutboxSource(ctx, seam.SourceConfig{Owner: r.o.Owner, BatchSize: r.o.BatchSize, PollInterval: r.o.PollInterval,
		Now: r.o.Now, Logger: r.o.Logger, Note: r.noteErr, Woken: r.wake.Wait, Changed: r.changed.Wait})
	if err != nil {
		return nil, fmt.Errorf("idem: relay: open the source: %w", err)
	}
	return src, nil
}

// closeSource closes src, giving up what it holds.
func (r *Relay) closeSource(ctx context.Context, src seam.Source[Row]) error {
	cctx, cancel := seam.Detach(ctx)
	defer cancel()
	if err := src.Close(cctx); err != nil {
		return fmt.Errorf("idem: relay: close the source: %w", err)
	}
	return nil
}

// Run publishes rows until ctx is done, then settles what it holds,
// closes its source and returns nil. It takes each batch the store's
// source hands out (as many at once as the source allows: claims that
// pipeline, a lease one at a time, a stream's lanes), publishes it and
// settles it. It purges sent rows older than KeepSent every
// PurgeInterval. Errors of the store or the broker are logged and
// retried; Run returns early only if the topic is closed.
func (r *Relay) Run(ctx context.Context) error {
	st := r.Statement()
	r.o.Logger.Log(ctx, st.Level(), "idem: relay started", slog.String("owner", r.o.Owner), slog.Any("guarantee", st))
	src, err := r.open(ctx)
	if err != nil {
		return err
	}
	r.sources.set(&r.sources.run, src)
	defer r.sources.set(&r.sources.run, nil)
	defer r.observeOutbox(src)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var fatal atomic.Pointer[error]
	if r.o.PurgeInterval > 0 {
		wg.Go(func() { r.purgeEvery(ctx) })
	}
	// Each batch is handled on a worker of its own; a worker that finished
	// waits for the next batch rather than exit, so that its stack, grown
	// by the publish path, is not grown again for each batch.
	idle := make(chan *seam.Batch[Row])
	work := func(b *seam.Batch[Row]) {
		for {
			_, err := r.handle(ctx, src, b)
			switch {
			case errors.Is(err, broker.ErrClosed):
				fatal.CompareAndSwap(nil, &err)
				cancel()
			case err != nil && ctx.Err() == nil:
				r.noteErr("run", err)
			}
			select {
			case b = <-idle:
			case <-ctx.Done():
				return
			}
		}
	}
	for ctx.Err() == nil {
		b, err := src.Next(ctx, true)
		if ctx.Err() != nil {
			if b != nil {
				sctx, cancel := seam.Detach(ctx)
				_ = src.Settle(sctx, b, nil)
				cancel()
			}
			break
		}
		if err != nil {
			r.noteErr("run", err)
			signal.Sleep(ctx, r.o.PollInterval)
			continue
		}
		select {
		case idle <- b: // a worker that finished its batch takes it
		default:
			wg.Go(func() { work(b) })
		}
	}
	wg.Wait()
	if err := r.closeSource(ctx, src); err != nil {
		r.o.Logger.Warn("idem: relay: release", slog.String("owner", r.o.Owner), slog.String("error", err.Error()))
	}
	if err := fatal.Load(); err != nil {
		return *err
	}
	return nil
}

// purgeEvery purges every PurgeInterval until ctx is done.
func (r *Relay) purgeEvery(ctx context.Context) {
	for {
		if _, err := r.Purge(ctx); err != nil && ctx.Err() == nil {
			r.noteErr("purge", err)
		}
		if !signal.Sleep(ctx, r.o.PurgeInterval) {
			return
		}
	}
}

// handle publishes a batch and settles it, and returns how many rows it
// published.
func (r *Relay) handle(ctx context.Context, src seam.Source[Row], b *seam.Batch[Row]) (int, error) {
	r.n.batches.Add(1)
	start := time.Now()
	pctx := ctx
	if b.Lost != nil {
		// The source keeps the claim (a lease, a slot) while the batch is
		// live; if it is lost, another relay has the rows: stop publishing.
		var cancel context.CancelFunc
		pctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(b.Lost, cancel)()
	}
	res := r.publishBatch(pctx, b.Rows)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.PublishTimeout)
	defer cancel()
	if b.Lost != nil && b.Lost.Err() != nil {
		return 0, errors.Join(fmt.Errorf("idem: relay: %w", ErrLeaseLost), src.Settle(fctx, b, nil))
	}
	if res.crashed != nil {
		return 0, errors.Join(fmt.Errorf("idem: relay: after publish: %w", res.crashed), src.Settle(fctx, b, nil))
	}
	if ctx.Err() != nil && len(res.sent) == 0 && len(res.failed) == 0 {
		return 0, src.Settle(fctx, b, nil) // stopping: nothing is recorded
	}
	settle := time.Now()
	err := src.Settle(fctx, b, &seam.Outcome{Sent: res.sent, Failed: res.failed, At: r.o.Now()})
	r.n.publishing.Add(int64(settle.Sub(start)))
	r.n.settling.Add(int64(time.Since(settle)))
	if err != nil {
		return 0, fmt.Errorf("idem: relay: mark %d rows sent (they will be published again): %w", len(res.sent), err)
	}
	r.n.published.Add(int64(len(res.sent)))
	r.rate.add(r.o.Now(), int64(len(res.sent)))
	return len(res.sent), res.fatal
}

func (r *Relay) noteErr(op string, err error) {
	if err == nil {
		err = errors.New("stopped")
	}
	r.n.lastErr.Store(&relayError{msg: op + ": " + err.Error(), at: r.o.Now()})
	r.o.Logger.Warn("idem: relay: "+op, slog.String("owner", r.o.Owner), slog.String("error", err.Error()))
}

// RunOnce takes one batch of the rows due now from the store's source,
// publishes it and records the outcome. It returns how many rows it
// published. On a store whose relays stream the outbox, it fails with
// ErrOtherSource while a streaming relay serves it.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	sh, err := r.acquireOnce(ctx)
	if err != nil {
		return 0, err
	}
	_, n, err := r.runOnce(ctx, sh.src)
	return n, errors.Join(err, r.releaseOnce(ctx, sh, false))
}

// runOnce takes a batch of the rows due now from src and handles it.
func (r *Relay) runOnce(ctx context.Context, src seam.Source[Row]) (taken bool, published int, err error) {
	b, err := src.Next(ctx, false)
	if err != nil {
		return false, 0, fmt.Errorf("idem: relay: %w", err)
	}
	if b == nil {
		return false, 0, nil
	}
	n, err := r.handle(ctx, src, b)
	return true, n, err
}

// acquireOnce returns the source RunOnce and Drain share, opened if none
// is, in use until releaseOnce.
func (r *Relay) acquireOnce(ctx context.Context) (*sharedSource, error) {
	r.sources.mu.Lock()
	defer r.sources.mu.Unlock()
	sh := r.sources.once
	if sh == nil {
		src, err := r.open(ctx)
		if err != nil {
			return nil, err
		}
		sh = &sharedSource{src: src}
		r.sources.once = sh
	}
	sh.users++
	return sh, nil
}

// releaseOnce ends a use of sh; closing says that a Drain ended. The last
// use after a Drain ended closes sh, and the next call opens another.
func (r *Relay) releaseOnce(ctx context.Context, sh *sharedSource, closing bool) error {
	r.sources.mu.Lock()
	sh.users--
	sh.closing = sh.closing || closing
	last := sh.closing && sh.users == 0
	if last {
		r.sources.once = nil
	}
	r.sources.mu.Unlock()
	if !last {
		return nil
	}
	return r.closeSource(ctx, sh.src)
}

// Drain runs batches until none is due, then closes its source (giving up
// a lease; once other RunOnce and Drain calls are done with it), and
// returns how many rows it published. Rows backing off after a failure
// are left for later.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		sh, err := r.acquireOnce(ctx)
		if err != nil {
			return total, err
		}
		taken, n, err := r.runOnce(ctx, sh.src)
		total += n
		done := err != nil || !taken
		if cerr := r.releaseOnce(ctx, sh, done); done {
			return total, errors.Join(err, cerr)
		}
	}
}

// set sets *p under the lock.
func (s *sources) set(p *seam.Source[Row], src seam.Source[Row]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*p = src
}

// state is the state of Run's source, or else of RunOnce's.
func (s *sources) state() seam.SourceState {
	s.mu.Lock()
	src := s.run
	if src == nil && s.once != nil {
		src = s.once.src
	}
	s.mu.Unlock()
	if src == nil {
		return seam.SourceState{}
	}
	return src.State()
}

// Purge deletes sent and discarded rows older than KeepSent, in
// transactions of at most PurgeBatch rows, and returns how many.
func (r *Relay) Purge(ctx context.Context) (int, error) {
	before := r.o.Now().Add(-r.o.KeepSent)
	total := 0
	defer func() {
		// A purge that deleted rows may have moved others (a sliced
		// outbox): a streaming source looks at the table again. One that
		// deleted nothing left it as it was, and asks for nothing (the
		// purge Run starts with would stop the stream's lanes for a sweep).
		if total > 0 {
			r.changed.Fire()
		}
	}()
	for {
		n, err := r.st.PurgeOutbox(ctx, before, r.o.PurgeBatch)
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
	rs, err := r.st.ListOutbox(ctx, Filter{States: []State{Quarantined}, Limit: limit})
	return rs, err
}

// Requeue makes a quarantined row pending again, with its attempts reset,
// and reports whether it was quarantined.
func (r *Relay) Requeue(ctx context.Context, rowID int64) (bool, error) {
	ok, err := r.st.SetOutboxState(ctx, rowID, Pending, r.o.Now(), Quarantined)
	if ok {
		r.Wake()
		r.changed.Fire()
	}
	return ok, err
}

// Discard gives up on a pending or quarantined row: it is never published,
// and the later rows of its aggregate flow again. Consumers that check
// versions will see a gap where it was.
func (r *Relay) Discard(ctx context.Context, rowID int64) (bool, error) {
	ok, err := r.st.SetOutboxState(ctx, rowID, Discarded, r.o.Now(), Pending, Quarantined)
	if ok {
		r.Wake()
		r.changed.Fire()
	}
	return ok, err
}

// RelayStats are a relay's counters since it was created.
type RelayStats struct {
	Published   int64 // rows published and marked sent
	Failed      int64 // failed publishes (each retried or quarantined)
	Quarantines int64 // rows this relay quarantined
	Claims      int64 // batches taken from the source (claims, streamed windows, sweeps)
	// Throughput is rows published per second over the last minute (or
	// since the relay was created, if that is shorter).
	Throughput float64
	// Listening reports whether the relay's store wakes it when rows are
	// committed (PostgreSQL: an open LISTEN connection).
	Listening bool
	// Idle counts the times the source found nothing to do and went to
	// wait for a notification, a Wake or PollInterval.
	Idle int64
	// Streaming reports whether the relay publishes from the store's log
	// (a streaming source, see docs/outbox-wal.md), and Standby whether it
	// waits while another relay does (or, polling, while the outbox is
	// streamed).
	Streaming, Standby bool
	// SlotReleases counts the times the relay's source dropped its
	// stream's slot over the store's WAL budget (it polled, then streamed
	// from a new slot), the last at SlotReleasedAt.
	SlotReleases   int64
	SlotReleasedAt time.Time
	// LastError is the latest failure ("" if none), at LastErrorAt.
	LastError   string
	LastErrorAt time.Time
	// PublishTime is the time spent on the batches the relay published
	// and settled, from taking each from its source to settling it, and
	// SettleTime the time spent settling them (marking their rows sent or
	// failed in the store); divided by Claims, the means per batch.
	PublishTime, SettleTime time.Duration
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	ss := r.sources.state()
	s := RelayStats{Published: r.n.published.Load(), Failed: r.n.failed.Load(), Quarantines: r.n.quarantined.Load(),
		Claims: r.n.batches.Load(), Throughput: r.rate.perSecond(r.o.Now()),
		Listening: ss.Listening, Idle: ss.Idle, Streaming: ss.Streaming, Standby: ss.Standby,
		SlotReleases: ss.Released, SlotReleasedAt: ss.ReleasedAt,
		PublishTime: time.Duration(r.n.publishing.Load()), SettleTime: time.Duration(r.n.settling.Load())}
	if e := r.n.lastErr.Load(); e != nil {
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
	h, err := r.st.OutboxHealth(ctx, r.o.Now())
	return RelayHealth{Health: h, RelayStats: r.Stats()}, err
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

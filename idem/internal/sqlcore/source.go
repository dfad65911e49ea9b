package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/signal"
	"github.com/wary-go/wary/idem/outbox"
)

// PollOptions are a polling source's settings (the store's).
type PollOptions struct {
	// PerAggregate is the most rows of one aggregate a claim takes.
	PerAggregate int
	// Pipeline is how many claimed batches are live at once, on a dialect
	// whose claims exclude each other (SkipLocked); a lease claims one at
	// a time.
	Pipeline int
	// Lease is how long a claim by lease survives a relay that stopped
	// without releasing it.
	Lease time.Duration
	// Wake, if not nil, is the store's wake-up: the source listens, and
	// tells it when it goes idle and when it finds work again.
	Wake Wake
	// Guard, if not nil, reports an error matching outbox.ErrOtherSource
	// while a source of another kind serves the outbox: the source then
	// stands by. It is asked at Next without wait, and by the claim loops
	// at most every PollInterval.
	Guard func(ctx context.Context) error
	// Claim, if not nil, claims instead of the outbox's ClaimOutbox (a
	// test's wrapper).
	Claim func(ctx context.Context, c Claim) (Batch, error)
}

// Wake is a relay's wake-up (PostgreSQL: LISTEN, and the wake flags that
// make producers NOTIFY only while a relay waits).
type Wake interface {
	// Listen calls notify once when it starts listening and once per
	// wake-up, until ctx is done (it then returns nil) or listening fails
	// (the source listens again after a backoff).
	Listen(ctx context.Context, notify func()) error
	// Idle is called, while listening, by a claim loop that found
	// nothing, before it waits. It returns how long the loop may wait
	// before it claims again: 0 for as long as the source polls (a
	// notification will wake it), a positive duration to poll sooner, a
	// negative one to claim again at once.
	Idle(ctx context.Context) (time.Duration, error)
	// Busy is called when a claim found rows, and when the source closes.
	Busy(ctx context.Context) error
}

// DefaultPerAggregate is the most rows of one aggregate a claim takes
// when a store's source options leave it unset (postgres and sqlite
// SourceOptions.PerAggregate).
const DefaultPerAggregate = 10

// PollSource is the source that claims rows from the outbox table:
// Pipeline claim loops (one on a lease) that each claim a batch, hand it
// to the relay, wait for it to be settled, and claim again at once while
// there is work, or wait for a wake-up (the store's, or the relay's Wake)
// or at most PollInterval (see pace for the whole policy).
type PollSource[Tx any] struct {
	o     *Outbox[Tx]
	c     seam.SourceConfig
	p     PollOptions
	depth int

	ready  chan *seam.Batch[outbox.Row]
	once   sync.Once
	cancel context.CancelFunc
	wg     sync.WaitGroup

	woke       signal.Broadcast // fired by the store's wake-up
	landed     signal.Broadcast // fired when a large batch is settled
	bigAloft   atomic.Int64     // large batches handed out and not yet settled
	behind     atomic.Bool      // the last batch claimed was large
	aggs       atomic.Int64     // aggregates with due rows, as last seen (share)
	headsAloft atomic.Int64     // aggregates held by live batches

	idled     atomic.Bool  // the wake-up was told the source is idle since it was last told it is busy
	listening atomic.Bool  // the wake-up listens
	standby   atomic.Bool  // another kind of source serves the outbox
	idle      atomic.Int64 // times a loop went to wait for work

	gmu     sync.Mutex // serialises guard
	guarded time.Time  // when the guard was last asked
	gerr    error      // and what it said (outbox.ErrOtherSource, or nil)
}

// pollHandle is a live batch's part of the source.
type pollHandle struct {
	b       Batch
	land    func()
	cleared chan struct{} // closed once the wake-up was told the source is busy (nil: not told)
	done    chan struct{} // closed once settled
	err     error         // the settle's
}

// PollSource returns a polling source on o for a relay configured by c.
func (o *Outbox[Tx]) PollSource(c seam.SourceConfig, p PollOptions) *PollSource[Tx] {
	s := &PollSource[Tx]{o: o, c: c, p: p, depth: 1, ready: make(chan *seam.Batch[outbox.Row])}
	if o.d.SkipLocked {
		s.depth = max(p.Pipeline, 1)
	}
	s.idled.Store(true) // the wake-up learns of the first work
	return s
}

var _ seam.Source[outbox.Row] = (*PollSource[any])(nil)

// Next implements seam.Source[outbox.Row].
func (s *PollSource[Tx]) Next(ctx context.Context, wait bool) (*seam.Batch[outbox.Row], error) {
	if !wait {
		if err := s.guard(ctx, true); err != nil {
			return nil, err
		}
		b, _, err := s.claim(ctx, s.c.Now())
		return b, err
	}
	s.once.Do(func() {
		// The loops outlive this Next: Close stops them (no deadline),
		// and each of their store calls has its own bound.
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.cancel = cancel
		if s.p.Wake != nil {
			s.wg.Go(func() { s.listen(lctx) })
		}
		for range s.depth {
			s.wg.Go(func() { s.loop(lctx) })
		}
	})
	select {
	case b := <-s.ready:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Settle implements seam.Source[outbox.Row].
func (s *PollSource[Tx]) Settle(ctx context.Context, b *seam.Batch[outbox.Row], out *seam.Outcome) error {
	h := b.Handle.(*pollHandle)
	var err error
	if out == nil {
		err = h.b.Release(ctx)
	} else {
		err = h.b.Complete(ctx, out.Sent, out.Failed, out.At)
	}
	if h.cleared != nil {
		<-h.cleared
	}
	h.land()
	h.err = err
	close(h.done)
	return err
}

// release settles b recording nothing (its rows come again) once the
// loop that claimed it stops, within seam.DetachTimeout.
func (s *PollSource[Tx]) release(ctx context.Context, b *seam.Batch[outbox.Row]) {
	rctx, cancel := seam.Detach(ctx)
	defer cancel()
	_ = s.Settle(rctx, b, nil)
}

// State implements seam.Source[outbox.Row].
func (s *PollSource[Tx]) State() seam.SourceState {
	return seam.SourceState{Kind: "poll", Listening: s.listening.Load(), Standby: s.standby.Load(), Idle: s.idle.Load()}
}

// Close implements seam.Source[outbox.Row]: it stops the claim loops, tells the
// wake-up that the relay waits no more, and gives up the lease.
func (s *PollSource[Tx]) Close(ctx context.Context) error {
	s.once.Do(func() {}) // no loops from now on
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.busy(ctx)
	return s.o.ReleaseOutbox(ctx, s.c.Owner)
}

// claim claims one batch of the rows due at now (the share of a claim
// loop, behind a backlog), and returns it (nil if no row is due)
// with its number of rows.
func (s *PollSource[Tx]) claim(ctx context.Context, now time.Time) (*seam.Batch[outbox.Row], int, error) {
	aggs := s.share()
	claim := s.o.ClaimOutbox
	if s.p.Claim != nil {
		claim = s.p.Claim
	}
	b, err := claim(ctx, Claim{Owner: s.c.Owner, Now: now, Limit: s.c.BatchSize, PerAggregate: s.p.PerAggregate,
		Aggregates: aggs, Lease: s.p.Lease})
	if err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	rows := b.Rows()
	heads := s.noteHeads(rows, aggs)
	if len(rows) == 0 {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		return nil, 0, b.Release(rctx)
	}
	h := &pollHandle{b: b, land: s.takeOff(len(rows), heads), done: make(chan struct{})}
	if s.p.Wake != nil && s.idled.Swap(false) {
		// Work again after idling: producers stop notifying now, not after
		// the batch (their notifying commits are serialised). Concurrently
		// with the publish; a loop claims again before it waits (goIdle).
		h.cleared = make(chan struct{})
		go func() { defer close(h.cleared); s.busy(ctx) }()
	}
	return &seam.Batch[outbox.Row]{Rows: rows, Lost: b.Lost(), Handle: h}, len(rows), nil
}

// loop is one of the claim loops: it claims a batch, hands it out and
// waits until it is settled, and claims again or waits as pace says.
func (s *PollSource[Tx]) loop(ctx context.Context) {
	for {
		// Before the claim: a wake-up during it is not lost.
		woken, woke := s.c.Woken(), s.woke.Wait()
		claimed, err := 0, s.guard(ctx, false)
		if errors.Is(err, outbox.ErrOtherSource) {
			if !s.wait(ctx, step{wait: s.c.PollInterval}, woken, woke) {
				return
			}
			continue
		}
		b, n, err := s.claim(ctx, s.c.Now())
		if ctx.Err() != nil {
			if b != nil {
				s.release(ctx, b)
			}
			return
		}
		if err != nil {
			s.c.Note("run", err)
		}
		if b != nil {
			claimed = n
			h := b.Handle.(*pollHandle)
			select {
			case s.ready <- b:
			case <-ctx.Done():
				s.release(ctx, b)
				return
			}
			select {
			case <-h.done: // settled by the relay
				err = h.err
			case <-ctx.Done():
				return // the relay settles it before it closes the source
			}
		}
		p := pace(s.c.PollInterval, claimed, err, s.aloft, func() time.Duration { return s.goIdle(ctx) })
		if p.again {
			continue
		}
		if p.idle {
			s.idle.Add(1)
		}
		if !s.wait(ctx, p, woken, woke) {
			return
		}
	}
}

// wait waits as p says, or for a wake-up; it reports false once ctx is
// done.
func (s *PollSource[Tx]) wait(ctx context.Context, p step, woken, woke <-chan struct{}) bool {
	t := time.NewTimer(p.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-p.landed:
	case <-woken:
	case <-woke:
	case <-t.C:
	}
	return true
}

// guard asks the store's Guard (always if force, otherwise at most every
// PollInterval) and notes whether the source stands by.
func (s *PollSource[Tx]) guard(ctx context.Context, force bool) error {
	if s.p.Guard == nil {
		return nil
	}
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if !force && time.Since(s.guarded) < s.c.PollInterval {
		return s.gerr
	}
	err := s.p.Guard(ctx)
	other := errors.Is(err, outbox.ErrOtherSource)
	if err != nil && !other {
		if ctx.Err() == nil {
			s.c.Note("guard", err)
		}
		return s.gerr // the claim finds out whether the store answers
	}
	s.guarded, s.gerr = time.Now(), err
	if other && !s.standby.Swap(true) {
		s.c.Logger.Warn("idem: relay: standing by", slog.String("owner", s.c.Owner), slog.String("error", err.Error()))
		s.c.Note("standby", err)
	}
	if !other {
		s.standby.Store(false)
	}
	return err
}

// takeOff notes a claimed batch of heads aggregates live, and whether it
// is large (at least half of BatchSize rows: the relay is behind, with a
// backlog); the function it returns notes that the batch was settled.
func (s *PollSource[Tx]) takeOff(rows, heads int) (land func()) {
	s.headsAloft.Add(int64(heads))
	big := 2*rows >= s.c.BatchSize
	s.behind.Store(big)
	if big {
		s.bigAloft.Add(1)
	}
	return func() {
		s.headsAloft.Add(-int64(heads))
		if big {
			s.bigAloft.Add(-1)
			s.landed.Fire()
		}
	}
}

// share returns the most aggregates the next claim should take (0: as
// many as BatchSize). While the relay is behind on a store whose claims
// pipeline, a claim takes its share of the aggregates with due rows (as
// many as were last seen, divided by Pipeline), so that each claim loop
// has a batch live. Otherwise, on few aggregates, one batch would hold
// every aggregate's head, and the other loops would find nothing until it
// is settled: the broker would wait for each claim and each mark. The
// batch still fills up to BatchSize rows, PerAggregate per aggregate.
func (s *PollSource[Tx]) share() int {
	if s.depth < 2 || !s.behind.Load() {
		return 0
	}
	seen := int(s.aggs.Load())
	if seen == 0 {
		return 0
	}
	return (seen + s.depth - 1) / s.depth
}

// noteHeads counts the aggregates (heads) a claim of at most limit
// aggregates (0: BatchSize) took, and updates how many aggregates have due
// rows (counting those live batches hold): if the claim took fewer than
// it could, it saw them all; if it took as many as it could, there may be
// more, and the count at least doubles, so that a share that became too
// small grows back (to BatchSize, where share no longer bounds a claim).
func (s *PollSource[Tx]) noteHeads(rows []outbox.Row, limit int) int {
	heads := 0
	for i := range rows {
		if i == 0 || rows[i].AggregateID != rows[i-1].AggregateID {
			heads++
		}
	}
	if limit == 0 {
		limit = s.c.BatchSize
	}
	seen := int64(heads) + s.headsAloft.Load()
	if heads < limit {
		s.aggs.Store(seen)
	} else if a := s.aggs.Load(); 2*seen > a {
		s.aggs.Store(2 * seen)
	}
	return heads
}

// aloft returns a channel closed when the next large live batch is
// settled, or nil if none is live.
func (s *PollSource[Tx]) aloft() <-chan struct{} {
	landed := s.landed.Wait() // before the count: a landing after it closes landed
	if s.bigAloft.Load() == 0 {
		return nil
	}
	return landed
}

// goIdle is called by a claim loop that found nothing. While the source
// listens, the store's wake-up (Wake.Idle) says how long to wait: -1 to
// claim once more, 0 to wait as usual, or a shorter wait.
func (s *PollSource[Tx]) goIdle(ctx context.Context) time.Duration {
	if s.p.Wake == nil || !s.listening.Load() {
		return 0
	}
	s.idled.Store(true)
	d, err := s.p.Wake.Idle(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.c.Note("idle", err)
		}
		return 0
	}
	if d > 0 {
		d = min(d, s.c.PollInterval)
	}
	return d
}

// busy tells the store's wake-up that the source found work (or closes):
// producers stop waking it.
func (s *PollSource[Tx]) busy(ctx context.Context) {
	if s.p.Wake == nil {
		return
	}
	if err := s.p.Wake.Busy(ctx); err != nil && ctx.Err() == nil {
		s.c.Note("busy", err)
	}
}

// listen runs the store's wake-up: each notification wakes the claim
// loops. A listener that fails listens again after a backoff.
func (s *PollSource[Tx]) listen(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.p.Wake.Listen(ctx, func() {
			// Listening before the loops wake: a loop that saw the
			// source not listening would wait PollInterval without
			// asking the wake-up to have producers notify it.
			s.listening.Store(true)
			s.woke.Fire()
		})
		s.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped")
		}
		s.c.Note("listen", err)
		if !signal.Sleep(ctx, min(backoff<<min(attempt-1, 12), max(s.c.PollInterval, backoff))) {
			return
		}
		s.woke.Fire() // notifications may have been missed meanwhile
	}
}

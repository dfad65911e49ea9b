package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/signal"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// logStream is one source's open stream (stream.go). Recv is called from
// one goroutine; the other methods are safe for concurrent use with it.
type logStream interface {
	// Fresh reports whether rows committed before the stream's position
	// may be only in the table: the position was created by this open (no
	// earlier one existed, or it was lost), or by an earlier one whose
	// source stopped before it called Drained. The source publishes them
	// from the table, then calls Drained.
	Fresh() bool
	// Drained records that the rows committed before the stream's
	// position were published from the table: later opens are not Fresh.
	Drained(ctx context.Context) error
	// Recv returns the next event: a commit's outbox rows in insertion
	// order, or a position with no rows when every commit up to it has
	// been returned (a keepalive, or commits without outbox rows).
	Recv(ctx context.Context) (streamEvent, error)
	// Clear reports whether the table holds no row that Publishable would
	// leave out or that would hold an aggregate's later rows back: none
	// quarantined, and no pending row that failed before, was requeued,
	// or is for the claims only (Settle's passed, or moved by the purge).
	// While it holds, and nothing the source does changes it, windows go
	// out without Publishable.
	Clear(ctx context.Context) (bool, error)
	// Publishable returns the rows of rows (a window of streamed rows, each
	// aggregate's in sequence order) that may be published: those not
	// settled otherwise (sent by a claim, discarded, quarantined, failed)
	// whose aggregate has no earlier unsent row outside rows and aloft
	// (the rows of earlier windows live), nor an earlier row in rows that
	// it leaves for claims. held counts the rows it leaves in the table
	// for claims (not those already sent or discarded).
	Publishable(ctx context.Context, rows, aloft []outbox.Row) (publish []outbox.Row, held int, err error)
	// Horizon returns a time at and a log position pos such that every
	// row created before at (by the server's clock) belongs to a
	// transaction that rolled back or committed before pos.
	Horizon(ctx context.Context) (at time.Time, pos uint64, err error)
	// Settle deletes the published rows sent, records failed, and marks
	// passed (the window's rows not published) for the claims only.
	// unseen counts the rows of sent and passed it did not find, after
	// waiting a while for them to become visible: deleted already (a
	// window streamed again), or a row still to become visible, which a
	// sweep's claim then finds.
	Settle(ctx context.Context, sent []int64, failed []seam.OutboxFailure, passed []int64, at time.Time) (unseen int, err error)
	// Confirm tells the server that every commit up to pos is settled.
	// It returns at once; the position goes with the next status report.
	Confirm(pos uint64)
	// Close ends the stream (the position stays on the server).
	Close(ctx context.Context) error
}

// streamEvent is what logStream.Recv returns.
type streamEvent struct {
	// Pos is the log position after the commit (or the keepalive's
	// position): confirming it settles the commit.
	Pos uint64
	// Rows are the commit's outbox rows; none for a keepalive.
	Rows []outbox.Row
	// Time is the commit's time (zero for a keepalive).
	Time time.Time
	// Left reports a row of Rows that was not inserted as a fresh pending
	// row (one the purge moved, for the claims only): the table may hold
	// it back, and the windows are checked from it on.
	Left bool
}

// The stream source's modes.
const (
	modeOpening int32 = iota
	modeStreaming
	modeStandby  // another relay holds the stream
	modeFallback // the server cannot stream: the table is polled
)

// streamSource is the source of a relay on a store with
// SourceOptions.Stream: it opens the stream and hands out windows of the
// rows it brings; while another relay holds the stream it stands by,
// trying again every PollInterval; while the server cannot stream it
// polls the table, and tries the stream again every StreamRetry. A stream
// that fails is opened again after a backoff: PollInterval after its
// first failure, doubling with each stream in a row that fails before it
// confirmed a position (made progress), up to StreamRetry, so that a
// failure that comes back at once never turns into a loop reopening the
// stream as fast as the server answers. While the server is out of reach
// (restarting), the stream is opened again every PollInterval.
//
// Takeover: a standby source opens the stream at most PollInterval after
// the server let go of the active one's. The server lets go when the
// active relay stops (its source closes) or its connection closes (a
// killed process: at once; a host or network that fails silently: after
// the server's wal_sender_timeout, 60s by default).
type streamSource struct {
	d    *driver
	c    seam.SourceConfig
	o    SourceOptions
	open func(ctx context.Context, owner string) (logStream, error)
	// pause waits between attempts to stream (a test records).
	pause func(ctx context.Context, d time.Duration) bool

	ready  chan *seam.Batch[outbox.Row]
	quiet  signal.Broadcast // fired when the mode changes, or the stream has nothing in hand
	once   sync.Once
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mode       atomic.Int32
	released   atomic.Int64  // slots dropped over the WAL budget
	releasedAt atomic.Int64  // the last, in Unix nanoseconds
	settled    atomic.Uint64 // the position up to which everything was settled, while nothing is in hand (0: something is)
	poll       atomic.Pointer[sqlcore.PollSource[pgx.Tx]]
}

// claimHandle is a batch the stream source claimed from the table (rows
// committed before a fresh stream, or left in the table by windows).
type claimHandle struct {
	b    sqlcore.Batch
	err  error
	done chan struct{}
}

// pollHandle is a batch of the polling source the stream source runs
// while the server cannot stream.
type pollHandle struct {
	p *sqlcore.PollSource[pgx.Tx]
	b *seam.Batch[outbox.Row]
}

func (s *driver) streamSource(c seam.SourceConfig, o SourceOptions) *streamSource {
	return &streamSource{d: s, c: c, o: o, pause: signal.Sleep, ready: make(chan *seam.Batch[outbox.Row]),
		open: s.openStream}
}

var _ seam.Source[outbox.Row] = (*streamSource)(nil)

// start starts the source's goroutine once.
func (s *streamSource) start(ctx context.Context, drain bool) {
	s.once.Do(func() {
		// The goroutine outlives this Next: Close stops it (no
		// deadline), and each of its calls has its own bound.
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.cancel = cancel
		s.wg.Go(func() { s.run(ctx, drain) })
	})
}

// Next implements the relay's source (seam.Source). Without wait (RunOnce, Drain), it hands
// out what the stream brings until everything committed before the call
// is settled; while another relay holds the stream it fails with
// ErrStreamHeld, and while the server cannot stream it claims from
// the table.
func (s *streamSource) Next(ctx context.Context, wait bool) (*seam.Batch[outbox.Row], error) {
	var target uint64
	if !wait {
		var pos pglogrepl.LSN
		if err := s.d.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()`).Scan(&pos); err != nil {
			return nil, err
		}
		target = uint64(pos)
	}
	s.start(ctx, !wait)
	for {
		quiet := s.quiet.Wait()
		if !wait {
			switch s.mode.Load() {
			case modeStandby:
				return nil, ErrStreamHeld
			case modeFallback:
				return s.claim(ctx, s.c.Now())
			case modeStreaming:
				if p := s.settled.Load(); p >= target && p > 0 {
					return nil, nil
				}
			}
		} else {
			quiet = nil
		}
		select {
		case b := <-s.ready:
			return b, nil
		case <-quiet:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Settle implements the relay's source (seam.Source).
func (s *streamSource) Settle(ctx context.Context, b *seam.Batch[outbox.Row], out *seam.Outcome) error {
	switch h := b.Handle.(type) {
	case *window:
		return h.l.settle(ctx, h, out)
	case *pollHandle:
		return h.p.Settle(ctx, h.b, out)
	case *claimHandle:
		if out == nil {
			h.err = h.b.Release(ctx)
		} else {
			h.err = h.b.Complete(ctx, out.Sent, out.Failed, out.At)
		}
		close(h.done)
		return h.err
	}
	return fmt.Errorf("idem/postgres: not this source's batch")
}

// State implements the relay's source (seam.Source).
func (s *streamSource) State() seam.SourceState {
	st := seam.SourceState{Kind: "stream", Streaming: s.mode.Load() == modeStreaming, Standby: s.mode.Load() == modeStandby}
	if p := s.poll.Load(); p != nil {
		ps := p.State()
		st.Listening, st.Idle = ps.Listening, ps.Idle
	}
	if st.Released = s.released.Load(); st.Released > 0 {
		st.ReleasedAt = time.Unix(0, s.releasedAt.Load())
	}
	return st
}

// Close implements the relay's source (seam.Source).
func (s *streamSource) Close(ctx context.Context) error {
	s.once.Do(func() {})
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	return nil
}

// setMode sets the mode, and wakes a Next without wait.
func (s *streamSource) setMode(m int32) {
	if s.mode.Swap(m) != m {
		s.quiet.Fire()
	}
}

// claim claims a batch of the rows due at now from the table (nil if
// none).
func (s *streamSource) claim(ctx context.Context, now time.Time) (*seam.Batch[outbox.Row], error) {
	b, err := s.d.Outbox.ClaimOutbox(ctx, sqlcore.Claim{Owner: s.c.Owner, Now: now, Limit: s.c.BatchSize, PerAggregate: s.o.PerAggregate})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(b.Rows()) == 0 {
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		return nil, b.Release(rctx)
	}
	return &seam.Batch[outbox.Row]{Rows: b.Rows(), Handle: &claimHandle{b: b, done: make(chan struct{})}}, nil
}

// claimOut claims a batch of the rows due at now, hands it out and waits
// until it is settled; it returns how many rows it claimed.
func (s *streamSource) claimOut(ctx context.Context, now time.Time) (int, error) {
	b, err := s.claim(ctx, now)
	if err != nil || b == nil {
		return 0, err
	}
	h := b.Handle.(*claimHandle)
	select {
	case s.ready <- b:
	case <-ctx.Done():
		rctx, cancel := seam.Detach(ctx)
		defer cancel()
		return 0, errors.Join(ctx.Err(), h.b.Release(rctx))
	}
	select {
	case <-h.done:
		return len(b.Rows), h.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// drainTable claims every row due now from the table.
func (s *streamSource) drainTable(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.claimOut(ctx, s.c.Now())
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// run opens the stream and publishes from it until ctx is done (see
// streamSource). With drain (a Next without wait started it), it does not
// poll the table while the server cannot stream: Next claims from it.
func (s *streamSource) run(ctx context.Context, drain bool) {
	polled := false // since the last stream: rows it streams may have been claimed
	failures := 0   // streams in a row that failed without progress
	for {
		if s.release(ctx) {
			polled = true
			if !s.fallback(ctx, drain, s.d.pollGuard) {
				return
			}
			continue
		}
		st, err := s.open(ctx, s.c.Owner)
		switch {
		case ctx.Err() != nil:
			if err == nil {
				s.closeStream(ctx, st)
			}
			return
		case errors.Is(err, ErrStreamHeld):
			s.setMode(modeStandby)
			if !s.pause(ctx, s.c.PollInterval) {
				return
			}
			continue
		case err != nil && !errors.Is(err, ErrStreamUnavailable):
			// The server is out of reach (a restart: the table cannot be
			// polled either), or the slot vanished as the stream was
			// opened. Open the stream again after PollInterval.
			s.setMode(modeOpening)
			s.c.Note("stream", err)
			if !s.pause(ctx, s.c.PollInterval) {
				return
			}
			continue
		case err != nil:
			s.c.Logger.Warn("idem: relay: the outbox stream is unavailable; polling the table", slog.String("owner", s.c.Owner),
				slog.Duration("retry", s.o.StreamRetry), slog.String("error", err.Error()))
			s.c.Note("stream", err)
			polled = true
			if !s.fallback(ctx, drain, nil) {
				return
			}
			continue
		}
		progressed, err := s.stream(ctx, st, polled)
		polled = false
		s.setMode(modeOpening)
		s.closeStream(ctx, st)
		if ctx.Err() != nil {
			return
		}
		s.c.Note("stream", err)
		if progressed {
			failures = 0
		}
		failures++
		if !s.pause(ctx, s.reopenDelay(failures)) {
			return
		}
	}
}

// fallback polls the table for StreamRetry (with drain, lets Next claim
// from it); it reports false once ctx is done. With guard, the polling
// stands by while guard says a slot exists (after a release over the WAL
// budget, another relay may stream from a new slot meanwhile).
func (s *streamSource) fallback(ctx context.Context, drain bool, guard func(context.Context) error) bool {
	s.setMode(modeFallback)
	pctx, cancel := context.WithTimeout(ctx, s.o.StreamRetry)
	defer cancel()
	if drain {
		s.pause(pctx, s.o.StreamRetry)
	} else {
		s.pollTable(pctx, guard)
	}
	return ctx.Err() == nil
}

// errOverBudget ends a stream whose slot retains more log than the WAL
// budget: the source releases the slot once the stream let go of it.
var errOverBudget = errors.New("idem/postgres: outbox stream: the slot retains more WAL than the budget")

// release drops the stream's slot if it is over the WAL budget (and no
// relay streams from it), and reports whether it did: the source then
// polls, and streams later from a new slot.
func (s *streamSource) release(ctx context.Context) bool {
	if s.o.WALBudget <= 0 {
		return false
	}
	lag, released, err := s.d.releaseOverBudget(ctx, s.o.WALBudget)
	if err != nil {
		s.c.Note("stream", err)
	}
	if !released {
		return false
	}
	s.releasedAt.Store(s.c.Now().UnixNano())
	s.released.Add(1)
	s.c.Logger.Warn("idem: relay: the outbox stream's slot retained more WAL than the budget; dropped it, polling the table",
		slog.String("owner", s.c.Owner), slog.Int64("retained", lag), slog.Int64("budget", s.o.WALBudget),
		slog.Duration("retry", s.o.StreamRetry))
	s.c.Note("stream", fmt.Errorf("%w: it retained %d bytes (budget %d): dropped; polling the table, then streaming from a new slot",
		errOverBudget, lag, s.o.WALBudget))
	return true
}

// watchBudget checks the slot's retained log every StreamRetry while a
// stream is open, and ends the stream (over, with errOverBudget) once it
// passes the WAL budget: a stalled relay lets go of the slot, and run
// releases it.
func (s *streamSource) watchBudget(ctx context.Context, over context.CancelCauseFunc) {
	for signal.Sleep(ctx, s.o.StreamRetry) {
		st, err := s.d.OutboxStreamStatus(ctx)
		if err == nil && st.LagBytes > s.o.WALBudget {
			over(fmt.Errorf("%w: it retains %d bytes (budget %d)", errOverBudget, st.LagBytes, s.o.WALBudget))
			return
		}
	}
}

// pollTable runs a polling source on the table until ctx is done,
// handing its batches out.
func (s *streamSource) pollTable(ctx context.Context, guard func(context.Context) error) {
	var w sqlcore.Wake
	if !s.o.NoListen {
		w = newWake(s.d, s.c.Owner, 2*s.c.PollInterval+30*time.Second)
	}
	p := s.d.Outbox.PollSource(s.c, sqlcore.PollOptions{PerAggregate: s.o.PerAggregate, Pipeline: s.o.Pipeline, Wake: w, Guard: guard})
	s.poll.Store(p)
	defer func() {
		cctx, cancel := seam.Detach(ctx)
		defer cancel()
		_ = p.Close(cctx) // producers need not notify a streaming relay
	}()
	for {
		b, err := p.Next(ctx, true)
		if err != nil {
			return
		}
		select {
		case s.ready <- &seam.Batch[outbox.Row]{Rows: b.Rows, Lost: b.Lost, Handle: &pollHandle{p: p, b: b}}:
		case <-ctx.Done():
			sctx, cancel := seam.Detach(ctx)
			_ = p.Settle(sctx, b, nil)
			cancel()
			return
		}
	}
}

// reopenDelay is how long run waits before it opens the stream again
// after failures streams in a row failed without progress.
func (s *streamSource) reopenDelay(failures int) time.Duration {
	b := broker.Backoff{Initial: s.c.PollInterval, Max: max(s.o.StreamRetry, s.c.PollInterval)}
	return b.Ceiling(failures)
}

func (s *streamSource) closeStream(ctx context.Context, st logStream) {
	cctx, cancel := seam.Detach(ctx)
	defer cancel()
	if err := st.Close(cctx); err != nil {
		s.c.Logger.Warn("idem: relay: close the outbox stream", slog.String("owner", s.c.Owner), slog.String("error", err.Error()))
	}
}

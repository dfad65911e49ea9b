package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// sweepEvery is how many PollIntervals a streaming source lets pass at
// most between two sweeps of the table (see streamLoop.sweep).
const sweepEvery = 30

// sweepBatches is the most claims one sweep makes.
const sweepBatches = 16

// sweepLag is how far behind the stream's position a sweep claims (see
// streamLoop.sweep).
const sweepLag = time.Second

// The stream's rows are published in Pipeline lanes: an aggregate's rows
// always go to the same lane (by a hash of its ID), and a lane's window is
// handed out only once its windows before it that hold one of its
// aggregates were settled, so each aggregate's rows reach the broker in
// sequence, while windows of distinct aggregates and the lanes publish at
// once, never waiting for each other. A window is checked (Publishable)
// while those before it publish. The slot is confirmed up to the end of
// the oldest commit with a row not settled, whichever lanes its rows went
// to.
//
// Windows are checked against the table only while it may hold what a
// check would find (the loop's clean): a row the stream passed before (for
// the claims only), one that failed, was quarantined or requeued, or one
// the relay's own claims or a purge touched, or that an operator's
// Requeue or Discard did, that the stream may still bring. A window
// publishing unchecked costs the table nothing but its DELETE. The loop
// starts clean if the table is Clear (and the relay claimed nothing since
// its last stream), loses it when a window leaves rows in the table, a
// sweep claims rows, the relay purges rows, or a Requeue or Discard of this
// relay's comes, and finds it again at a sweep once the table is Clear and
// the stream has passed the log's position of that moment (what was
// claimed or discarded then is behind it). What another process does
// meanwhile is not seen until then: a row another relay claims (a relay
// polling the same outbox) is published again by the stream, and a row
// discarded from another process before the stream reached it is
// published all the same. A row a rotation moved (in any process) is seen
// without the table: its insert streams with claims_only set
// (streamEvent.Left), and the loop loses clean from that commit on.

// commit is a streamed commit whose rows are not all settled yet.
type commit struct {
	pos  uint64    // confirmed once this commit and every earlier one settled
	at   time.Time // the server's time at pos
	left int       // its rows not settled yet
}

// entry is a received row and its commit.
type entry struct {
	row outbox.Row
	c   *commit
}

// lane is one of the stream's lanes.
type lane struct {
	pend   []entry   // received rows of the lane's aggregates, in commit order, not yet in a window
	flight []*window // the lane's windows not finished, in order
	rows   int       // their rows (at most laneRows BatchSizes)
	// held is how many of pend's first rows dispatch found of aggregates
	// of heldBy, the windows being published then: while none of those
	// has returned from Publish, the rows stay held and dispatch looks
	// only at the rows after them.
	held   int
	heldBy []*window
}

// laneRows is how many BatchSizes of rows a lane's windows not finished
// hold at most: windows deleting their rows, which may take a while
// (Settle waits for a commit to become visible), do not hold the lane
// back meanwhile.
const laneRows = 4

// laneWindows is how many of a lane's windows may be publishing at once.
// A window waits only for those before it that share one of its
// aggregates: the broker gets each aggregate's rows in order, and rows of
// distinct aggregates do not wait for each other's confirms. A share of
// 256 windows over the lanes (as a reader of the log publishing each row
// raw keeps 256 confirms in flight) measured no better on a quiet machine
// (BENCHMARKS.md, "Where the stream's p50 excess goes").
const laneWindows = 8

// publishing appends to ws the lane's windows whose Publish has not
// returned.
func (ln *lane) publishing(ws []*window) []*window {
	for _, w := range ln.flight {
		select {
		case <-w.published:
		default:
			ws = append(ws, w)
		}
	}
	return ws
}

// stillHeld reports whether the lane's held rows are still held: every
// window that held them is still being published (a window started since
// only holds more).
func (ln *lane) stillHeld() bool {
	for _, w := range ln.heldBy {
		select {
		case <-w.published:
			return false
		default:
		}
	}
	return true
}

// busy reports whether one of ws has aggregate a.
func busy(ws []*window, a string) bool {
	for _, w := range ws {
		if _, ok := w.aggs[a]; ok {
			return true
		}
	}
	return false
}

// window is a run of one lane's streamed rows published together.
type window struct {
	l       *streamLoop
	rows    []outbox.Row
	out     []outbox.Row // the rows handed out (those of rows the check and the window before left)
	commits []*commit    // commits[i] is rows[i]'s
	left    int          // rows not published: left in the table (failed, held back, or settled otherwise)
	unseen  bool         // Settle did not find some of its rows (see stream.Settle): a sweep looks for them
	check   bool         // checked against the table (Publishable) before publishing
	err     error        // the stream must stop: what was not settled is streamed again

	aggs      map[string]struct{} // the aggregates of its rows
	after     []*window           // the lane's windows before it, in flight, with one of its aggregates
	aloft     []outbox.Row        // the rows of the lane's windows in flight before it (if check)
	published chan struct{}       // closed once the window was settled by the relay (or it gave up)
	stopped   map[string]struct{} // aggregates with rows not sent (set before published closes)
	pubErr    error               // set before published closes: the lane's next window stops
}

// probe is a Horizon: rows created before at are settled once the
// confirmed position reaches pos.
type probe struct {
	at  time.Time
	pos uint64
}

// streamLoop publishes one open stream.
type streamLoop struct {
	s         *streamSource
	st        logStream
	lanes     []lane
	finished  chan *window
	sent      chan *window // windows whose Publish returned
	deletes   *deleter     // the DELETEs of windows published whole
	commits   []*commit    // not all settled, in commit order
	pending   int          // rows received, not yet in a window
	aloft     int          // windows in flight that have not finished
	dirty     bool         // rows were left in the table since the last sweep
	swept     time.Time
	settled   time.Time // rows created before it were streamed and settled
	confirmed uint64    // the position last confirmed
	probe     probe     // a Horizon not yet reached
	sweepDue  bool      // a Wake asked for a sweep
	clean     bool      // windows go unchecked (see above)
	recheck   uint64    // clean again once confirmed past it (and Clear)
	recheckAt bool      // recheck is to be taken (a Horizon) at the next sweep
	verifyDue bool      // Clear is to be asked once confirmed past recheck
}

// stream publishes from st until it fails or ctx is done, and reports
// whether it made progress (confirmed a position). A fresh stream starts
// after the rows committed before it, which the source first claims from
// the table.
func (s *streamSource) stream(ctx context.Context, st logStream, polled bool) (progressed bool, err error) {
	if s.o.WALBudget > 0 {
		bctx, over := context.WithCancelCause(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { s.watchBudget(bctx, over) })
		defer func() {
			if c := context.Cause(bctx); errors.Is(c, errOverBudget) {
				err = c
			}
			over(nil)
			wg.Wait()
		}()
		ctx = bctx
	}
	if st.Fresh() {
		n, err := s.drainTable(ctx)
		if err != nil {
			return false, fmt.Errorf("rows committed before the stream: %w", err)
		}
		polled = polled || n > 0
		if err := st.Drained(ctx); err != nil {
			return false, fmt.Errorf("rows committed before the stream: record them drained: %w", err)
		}
	}
	s.setMode(modeStreaming)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	events := make(chan streamEvent, 64)
	failed := make(chan error, 1)
	wg.Go(func() {
		for {
			ev, err := st.Recv(ctx)
			if err != nil {
				failed <- err
				return
			}
			if s.d != nil && s.d.shared != nil {
				if f := s.d.streamed.Load(); f != nil {
					(*f)(ev.Rows)
				}
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	})
	pipeline := s.o.Pipeline
	l := &streamLoop{s: s, st: st, lanes: make([]lane, pipeline),
		finished: make(chan *window, 4*pipeline), sent: make(chan *window, 4*pipeline), swept: s.c.Now(), dirty: true}
	l.deletes = newDeleter(l)
	var dwg sync.WaitGroup
	dwg.Go(func() { l.deletes.run(ctx) })
	defer func() { l.deletes.stop(); dwg.Wait() }()
	l.unclean()
	if !polled {
		// Nothing this source claimed can be ahead in the stream.
		l.recheckAt, l.verifyDue = false, false
		if clear, err := st.Clear(ctx); err != nil {
			s.c.Note("stream", err)
		} else {
			l.clean, l.dirty = clear, !clear // a clear table holds nothing left for a sweep
		}
	}
	err = l.run(ctx, events, failed, &wg)
	cancel()
	s.settled.Store(0)
	for l.aloft > 0 { // the windows live end (unsettled ones are streamed again)
		_ = l.land(<-l.finished)
	}
	return l.confirmed > 0, err
}

func (l *streamLoop) run(ctx context.Context, events <-chan streamEvent, failed <-chan error, wg *sync.WaitGroup) error {
	s := l.s
	t := time.NewTimer(s.c.PollInterval) // one timer, reset each turn
	defer t.Stop()
	for {
		// Wake and the producers' notifications are for the polling
		// relay: the stream sees their rows. A Requeue, Discard or Purge
		// of the relay's asks for a sweep.
		changed := s.c.Changed()
		if l.pending == 0 && l.aloft == 0 && len(l.commits) == 0 {
			s.settled.Store(l.confirmed)
			s.quiet.Fire()
		} else {
			s.settled.Store(0)
		}
		if l.sweeping() && !l.quietSweep(ctx) {
			if l.aloft == 0 {
				l.sweep(ctx)
				continue
			}
		} else {
			for i := range l.lanes {
				l.dispatch(ctx, &l.lanes[i], wg)
			}
		}
		in := events
		if l.pending >= 2*s.c.BatchSize*len(l.lanes) {
			in = nil // enough rows wait: read on once windows land
		}
		t.Reset(s.c.PollInterval)
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return fmt.Errorf("idem: relay: stream: %w", err)
		case w := <-l.finished:
			if err := l.land(w); err != nil {
				return err
			}
		case <-l.sent: // its lane may take its next window, and held rows may go
		case ev := <-in:
			l.receive(ev)
			for more := true; more && l.pending < s.c.BatchSize*len(l.lanes); { // take what is there
				select {
				case ev := <-events:
					l.receive(ev)
				default:
					more = false
				}
			}
		case <-changed:
			l.sweepDue = true
			l.unclean()
		case <-t.C:
		}
	}
}

// laneOf returns the lane of an aggregate's rows.
func (l *streamLoop) laneOf(aggregate string) *lane {
	if len(l.lanes) == 1 {
		return &l.lanes[0]
	}
	// FNV-1a, 32 bits (hash/fnv's New32a), without its allocation.
	h := uint32(2166136261)
	for i := range len(aggregate) {
		h ^= uint32(aggregate[i])
		h *= 16777619
	}
	return &l.lanes[h%uint32(len(l.lanes))]
}

// receive takes a streamed event.
func (l *streamLoop) receive(ev streamEvent) {
	if len(ev.Rows) == 0 {
		if n := len(l.commits); n > 0 {
			// Commits wait: the position is settled once they are.
			c := l.commits[n-1]
			c.pos, c.at = max(c.pos, ev.Pos), later(c.at, ev.Time)
			return
		}
		l.confirm(ev.Pos) // nothing waits: an idle outbox retains no log
		return
	}
	if ev.Left {
		// A row the table may hold back (the purge moved it, from this
		// process or another): its window, and those after it, are
		// checked until a sweep finds the table clear again.
		l.unclean()
	}
	c := &commit{pos: ev.Pos, at: ev.Time, left: len(ev.Rows)}
	l.commits = append(l.commits, c)
	for _, row := range ev.Rows {
		ln := l.laneOf(row.AggregateID)
		ln.pend = append(ln.pend, entry{row: row, c: c})
	}
	l.pending += len(ev.Rows)
}

// dispatch starts publishing ln's next window, if rows wait: at once when
// none of the lane's windows with the broker has one of their aggregates
// (a trickle is published as it comes, whatever other aggregates wait
// for their confirms), and once BatchSize rows wait when one has (those
// rows would wait for it: rows that came meanwhile go together, and the
// lane checks its next full window while the one before it publishes).
// A window deleting its published rows does not hold its lane back.
func (l *streamLoop) dispatch(ctx context.Context, ln *lane, wg *sync.WaitGroup) {
	if len(ln.pend) == 0 || ln.rows >= laneRows*l.s.c.BatchSize {
		return
	}
	var buf [laneWindows]*window
	ws := ln.publishing(buf[:0])
	if len(ws) >= laneWindows {
		return
	}
	take := ln.pend[:min(len(ln.pend), l.s.c.BatchSize)]
	kept := 0 // rows left waiting at the front of pend, in order (a trickle's)
	if len(ws) > 0 && len(take) < l.s.c.BatchSize {
		// A trickle while windows are with the broker: the rows of their
		// aggregates (and so every later row of those) wait, the others go.
		// While the windows that held rows at the last look are all still
		// being published, those rows are still held: only the rows after
		// them are looked at.
		from, free := 0, 0
		if ln.stillHeld() {
			from = min(ln.held, len(take))
		}
		for _, e := range take[from:] {
			if !busy(ws, e.row.AggregateID) {
				free++
			}
		}
		if free == 0 {
			ln.held, ln.heldBy = len(take), append(ln.heldBy[:0], ws...)
			return
		}
		// The held rows move to the front of pend, in order, the others
		// into the window.
		going := make([]entry, 0, free)
		kept = from
		for _, e := range take[from:] {
			if busy(ws, e.row.AggregateID) {
				ln.pend[kept] = e
				kept++
			} else {
				going = append(going, e)
			}
		}
		if kept > 0 {
			ln.heldBy = append(ln.heldBy[:0], ws...)
		}
		take = going
	}
	n := len(take)
	w := &window{l: l, rows: make([]outbox.Row, n), commits: make([]*commit, n), published: make(chan struct{}),
		check: !l.clean, aggs: make(map[string]struct{}, n)}
	for i, e := range take {
		w.rows[i], w.commits[i] = e.row, e.c
		w.aggs[e.row.AggregateID] = struct{}{}
	}
	for _, f := range ln.flight {
		for a := range w.aggs {
			if _, ok := f.aggs[a]; ok {
				w.after = append(w.after, f)
				break
			}
		}
		if w.check { // only a checked window reads them
			w.aloft = append(w.aloft, f.rows...)
		}
	}
	ln.held = kept
	if kept == 0 {
		clear(ln.heldBy)
		ln.heldBy = ln.heldBy[:0]
	}
	switch {
	case kept > 0:
		clear(ln.pend[kept:])
		ln.pend = ln.pend[:kept]
	case n < len(ln.pend):
		clear(ln.pend[:n])
		ln.pend = ln.pend[n:]
	case cap(ln.pend) <= 4*l.s.c.BatchSize:
		clear(ln.pend)
		ln.pend = ln.pend[:0] // its array takes the next rows
	default:
		ln.pend = nil // not held after a large transaction
	}
	l.pending -= n
	ln.flight = append(ln.flight, w)
	ln.rows += n
	l.aloft++
	if !w.check && len(w.after) == 0 {
		// Nothing to check or wait for (a trickle on a clear table): if
		// the relay is waiting for a batch, it takes this one now, with no
		// goroutine to start and hand it over.
		w.stopped, w.out = map[string]struct{}{}, w.rows
		select {
		case l.s.ready <- &seam.Batch[outbox.Row]{Rows: w.rows, Lost: ctx, Handle: w}:
			return
		default:
		}
	}
	wg.Go(func() { l.prepare(ctx, w) })
}

// prepare makes a window ready and hands it to the relay: it is checked
// while the lane's windows before it are live (whose rows count as being
// published), and handed out once those with one of its aggregates were
// settled: the broker gets each aggregate's rows in order, and rows of an
// aggregate a window before stopped at (a failure) stay in the table. A
// window left with nothing to publish is settled at once.
func (l *streamLoop) prepare(ctx context.Context, w *window) {
	fail := func(err error) {
		w.err, w.pubErr = err, err
		close(w.published)
		l.finished <- w
	}
	rows := w.rows
	if w.check {
		var err error
		rows, _, err = l.st.Publishable(ctx, w.rows, w.aloft)
		if err != nil {
			fail(fmt.Errorf("idem: relay: stream: publishable: %w", err))
			return
		}
	}
	w.stopped = map[string]struct{}{}
	for _, p := range w.after {
		select {
		case <-p.published:
		case <-ctx.Done():
			fail(ctx.Err())
			return
		}
		if p.pubErr != nil {
			fail(errors.New("idem: relay: stream: an earlier window failed"))
			return
		}
		for a := range p.stopped {
			w.stopped[a] = struct{}{}
		}
	}
	if len(w.stopped) > 0 {
		// A copy: rows may be w.rows, which land and Settle's passed
		// read whole.
		rows = slices.DeleteFunc(slices.Clone(rows), func(row outbox.Row) bool {
			_, stop := w.stopped[row.AggregateID]
			return stop
		})
	}
	w.out = rows
	if len(rows) == 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		_ = l.settle(sctx, w, &seam.Outcome{At: l.s.c.Now()})
		return
	}
	select {
	case l.s.ready <- &seam.Batch[outbox.Row]{Rows: rows, Lost: ctx, Handle: w}:
	case <-ctx.Done():
		fail(ctx.Err())
	}
}

// settleTimeout bounds the settling of a window with nothing to publish.
const settleTimeout = 30 * time.Second

// settle settles a window the relay published (out) or released (nil):
// what was sent leaves the table, failures are recorded, and the rows
// after a failed row of its aggregate stay pending, for claims. A window
// released is not settled: the stream stops, and its rows are streamed
// again once it is opened again.
func (l *streamLoop) settle(ctx context.Context, w *window, out *seam.Outcome) error {
	if out == nil {
		err := errors.New("idem: relay: stream: a window was released unsettled (streamed again)")
		w.err, w.pubErr = err, err
		close(w.published)
		l.finished <- w
		return nil
	}
	var passed []int64
	if !sentAll(w, out.Sent) {
		sent := make(map[int64]struct{}, len(out.Sent))
		for _, id := range out.Sent {
			sent[id] = struct{}{}
		}
		for _, row := range w.out {
			if _, ok := sent[row.RowID]; !ok {
				w.stopped[row.AggregateID] = struct{}{}
			}
		}
		for _, row := range w.rows {
			if _, ok := sent[row.RowID]; !ok {
				passed = append(passed, row.RowID)
			}
		}
	}
	close(w.published)
	select {
	case l.sent <- w:
	default: // the loop has wake-ups waiting already
	}
	w.left = len(passed)
	if len(out.Failed) == 0 && len(passed) == 0 && l.deletes != nil {
		// Every row went: its DELETE goes with those of the other windows
		// settled meanwhile (see deleter), and the window lands once done.
		l.deletes.add(w, out.Sent)
		return nil
	}
	unseen, err := l.st.Settle(ctx, out.Sent, out.Failed, passed, out.At)
	w.unseen = unseen > 0
	if err != nil {
		w.err = fmt.Errorf("idem: relay: settle %d rows (they will be published again): %w", len(out.Sent), err)
	}
	l.finished <- w
	return err
}

// sentAll reports, without a set, the common case of a window published
// whole: every row of w handed out and sent, in the window's order (as
// the relay reports a batch it published at once). Otherwise settle
// finds what was not sent through a set of what was.
func sentAll(w *window, sent []int64) bool {
	if len(sent) != len(w.rows) || len(w.out) != len(w.rows) {
		return false
	}
	for i := range w.rows {
		if w.rows[i].RowID != sent[i] {
			return false
		}
	}
	return true
}

// maxDelete is the most rows one of the deleter's DELETEs takes.
const maxDelete = 8192

// deleteLinger is how long the deleter, woken with fewer than lingerRows
// rows queued, waits for more before it deletes them: under a trickle of
// one-row windows a DELETE each would cost the relay and the server a
// statement and a commit a row (BENCHMARKS.md, issue 47).
const (
	deleteLinger = 10 * time.Millisecond
	lingerRows   = 256
)

// deleter deletes the rows of the windows whose every row was published,
// off the relay's path: one DELETE for the windows settled while the one
// before it ran (at most maxDelete rows), or within deleteLinger of the
// first under a trickle, rather than one per window. A
// window lands (and its commits may be confirmed) only once its DELETE
// committed: a row the slot has passed is never left pending in the table
// (a sweep or a fallback would publish it again). A DELETE that fails
// fails its windows: the stream stops, and their rows are streamed again.
type deleter struct {
	l       *streamLoop
	mu      sync.Mutex
	queue   []*window
	counts  []int // counts[i] is how many of ids are queue[i]'s
	ids     []int64
	wake    chan struct{} // a window was queued
	stopped chan struct{} // closed by stop
	linger  time.Duration // deleteLinger
}

func newDeleter(l *streamLoop) *deleter {
	return &deleter{l: l, wake: make(chan struct{}, 1), stopped: make(chan struct{}), linger: deleteLinger}
}

// add queues w, whose published rows are sent.
func (d *deleter) add(w *window, sent []int64) {
	d.mu.Lock()
	d.queue, d.counts = append(d.queue, w), append(d.counts, len(sent))
	d.ids = append(d.ids, sent...)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// queued is how many rows are queued.
func (d *deleter) queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ids)
}

// take takes queued windows (every one, or as many as fill maxDelete
// rows, at least one) and their rows.
func (d *deleter) take() ([]*window, []int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, rows := 0, 0
	for n < len(d.queue) && (n == 0 || rows+d.counts[n] <= maxDelete) {
		rows += d.counts[n]
		n++
	}
	ws, ids := d.queue[:n:n], d.ids[:rows:rows]
	d.queue, d.counts, d.ids = d.queue[n:], d.counts[n:], d.ids[rows:]
	if len(d.queue) == 0 {
		d.queue, d.counts, d.ids = nil, nil, nil
	} else {
		select { // the rest next
		case d.wake <- struct{}{}:
		default:
		}
	}
	return ws, ids
}

// run deletes what is queued until stop, and then what is left. Its
// statements outlive ctx (a stream stopping lets its windows' DELETEs
// finish, or their rows would be published again), each bounded by
// settleTimeout.
func (d *deleter) run(ctx context.Context) {
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case <-d.wake:
			if d.queued() < lingerRows {
				linger.Reset(d.linger)
				select {
				case <-linger.C:
				case <-d.stopped:
					linger.Stop()
				}
			}
		case <-d.stopped:
			select {
			case <-d.wake:
			default:
				return
			}
		}
		for {
			ws, ids := d.take()
			if len(ws) == 0 {
				break
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			unseen, err := d.l.st.Settle(sctx, ids, nil, nil, time.Time{})
			cancel()
			for _, w := range ws {
				w.unseen = unseen > 0
				if err != nil {
					w.err = fmt.Errorf("idem: relay: settle %d rows (they will be published again): %w", len(ids), err)
				}
				d.l.finished <- w
			}
		}
	}
}

// stop ends run once nothing is queued.
func (d *deleter) stop() { close(d.stopped) }

// land notes a window that ended, and confirms the position of the
// commits settled, in commit order, up to the first with a row not
// settled. A window that failed settles none of its rows: they are
// streamed again once the stream is opened again.
func (l *streamLoop) land(w *window) error {
	l.aloft--
	l.dirty = l.dirty || w.left > 0 || w.unseen
	ln := l.laneOf(w.rows[0].AggregateID)
	ln.flight = slices.DeleteFunc(ln.flight, func(f *window) bool { return f == w })
	ln.rows -= len(w.rows)
	if w.err != nil {
		return w.err
	}
	if w.left > 0 || w.unseen {
		// Its rows left in the table are for the claims only (Clear sees
		// them until they are claimed), or were settled otherwise; rows
		// Settle did not find (unseen) may be pending still, or become
		// visible later: a sweep claims them.
		l.clean, l.verifyDue = false, true
	}
	for _, c := range w.commits {
		c.left--
	}
	var pos uint64
	i := 0
	for ; i < len(l.commits) && l.commits[i].left == 0; i++ {
		pos = max(pos, l.commits[i].pos)
		l.settled = later(l.settled, l.commits[i].at)
	}
	clear(l.commits[:i])
	l.commits = l.commits[i:]
	if pos > 0 {
		l.confirm(pos)
	}
	return nil
}

// confirm confirms pos, and notes how far the rows settled reach.
func (l *streamLoop) confirm(pos uint64) {
	l.st.Confirm(pos)
	l.confirmed = max(l.confirmed, pos)
	if l.probe.pos > 0 && l.confirmed >= l.probe.pos {
		l.settled = later(l.settled, l.probe.at)
		l.probe = probe{}
	}
}

// sweeping reports whether the table is to be swept now: rows the stream
// left there (a failure, an aggregate blocked behind one) are claimed
// from it every PollInterval while there may be some, at a Wake (a
// requeue or discard), and every sweepEvery PollIntervals anyway (an
// operator's requeue in another process, a failed row's backoff: on a
// clear table only Clear is asked, quietSweep); and, after PollInterval,
// once the windows may go unchecked again (verify).
func (l *streamLoop) sweeping() bool {
	since := l.s.c.Now().Sub(l.swept)
	verify := l.verifyDue && (l.recheckAt || l.confirmed >= l.recheck)
	return l.sweepDue || (l.dirty || verify) && since >= l.s.c.PollInterval || since >= sweepEvery*l.s.c.PollInterval
}

// sweep claims rows from the table (at most sweepBatches batches) while
// nothing streamed is live; rows it publishes are marked sent, and
// the stream then leaves them out (Publishable). It claims only rows due
// by the server's time at the position last confirmed: rows the stream
// has passed (and left in the table), not those it is about to stream
// (a row's creation time, its first due time, precedes its commit). A
// sweep takes a Horizon (a time and a log position) when it has none
// pending: once the confirmed position reaches the horizon's, every row
// created before its time was streamed, and rows due before it (less
// sweepLag, for the producers' clocks) are what the stream left in the
// table. A row it claims anyway (a producer whose clock is behind the
// server's by more than sweepLag, or a transaction the horizon does not
// see) is published by the claim, and the stream leaves it out.
func (l *streamLoop) sweep(ctx context.Context) {
	s := l.s
	l.swept, l.sweepDue = s.c.Now(), false
	claims := 0
	defer func() {
		if ctx.Err() == nil {
			l.verify(ctx, claims)
		}
	}()
	for range sweepBatches {
		if l.probe.pos == 0 {
			at, pos, err := l.st.Horizon(ctx)
			if err != nil {
				s.c.Note("sweep", err)
				return
			}
			l.probe = probe{at: at, pos: pos}
		}
		if l.settled.IsZero() {
			break
		}
		claimed, err := s.claimOut(ctx, l.settled.Add(-sweepLag))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.c.Note("sweep", err)
			return
		}
		claims += claimed
		if claimed == 0 {
			l.dirty = false
			break
		}
	}
}

// unclean makes the windows to come checked, until a sweep finds the table
// Clear once the stream has passed the log's position of the next sweep.
func (l *streamLoop) unclean() {
	l.clean, l.recheckAt, l.verifyDue = false, true, true
}

// verify ends a sweep that claimed claims rows: the windows to come go
// unchecked if the table is Clear and the stream has passed what was
// claimed, discarded or moved before the recheck position (see above).
// Asked once (verifyDue: a sweep comes when the stream has passed it), and
// then at every sweep until the table is Clear.
func (l *streamLoop) verify(ctx context.Context, claims int) {
	if claims > 0 {
		l.unclean()
	}
	if l.clean {
		return
	}
	if l.recheckAt {
		_, pos, err := l.st.Horizon(ctx)
		if err != nil {
			l.s.c.Note("sweep", err)
			return
		}
		l.recheck, l.recheckAt = pos, false
	}
	if l.confirmed < l.recheck {
		return
	}
	clear, err := l.st.Clear(ctx)
	if err != nil {
		l.s.c.Note("sweep", err)
		return
	}
	l.clean, l.verifyDue = clear, false
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

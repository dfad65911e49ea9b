package idem

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
)

// item is one delivery of a transaction: its Handle call's context and
// handler, and, once settled, what Handle returns.
type item[Tx any] struct {
	ctx context.Context
	d   *broker.Delivery
	h   Handler[Tx]
	res Result
	err error
	// turn says, to a call waiting in the group, that it leads the next
	// transaction (true) or that its delivery is settled (false).
	turn chan bool
}

// group gathers concurrent Handle calls into shared transactions
// (Options.Batch): one transaction is in flight at a time; the calls that
// arrive meanwhile wait, and the first of them leads the next one, with up
// to Options.Batch of the waiting calls (itself first). A call that finds
// no transaction in flight starts one without waiting on anything: it
// first yields to the Go scheduler (runtime.Gosched) while that lets more
// calls join (until two yields in a row bring none, or Batch are there),
// so that the calls of goroutines that are runnable, such as a Run's
// workers coming back from the transaction before, share its transaction
// instead of each half of them taking turns (issue 46: 50 deliveries per
// commit with 100 callers on Batch 100 before, 61 to 96 after; see
// BENCHMARKS.md). A lone delivery pays two yields.
type group[Tx any] struct {
	mu      sync.Mutex
	waiting []*item[Tx]
	busy    bool
}

// handleGrouped runs it through the inbox's group (see group) and
// returns when it is settled.
func (in *Inbox[Tx]) handleGrouped(it *item[Tx]) {
	g := &in.group
	it.turn = make(chan bool, 1)
	g.mu.Lock()
	g.waiting = append(g.waiting, it)
	in.stats.waiting.Store(int64(len(g.waiting)))
	if g.busy {
		g.mu.Unlock()
		if lead := <-it.turn; !lead {
			return
		}
		g.mu.Lock()
	}
	g.busy = true
	for n, still := len(g.waiting), 0; n < in.o.Batch && still < 2; n = len(g.waiting) {
		g.mu.Unlock()
		runtime.Gosched()
		g.mu.Lock()
		if still++; len(g.waiting) > n {
			still = 0
		}
	}
	n := min(len(g.waiting), in.o.Batch)
	batch := slices.Clone(g.waiting[:n])
	g.waiting = slices.Delete(g.waiting, 0, n)
	in.stats.waiting.Store(int64(len(g.waiting)))
	g.mu.Unlock()

	in.handleBatch(it.ctx, batch)

	for _, b := range batch {
		if b != it {
			b.turn <- false
		}
	}
	g.mu.Lock()
	if len(g.waiting) > 0 {
		next := g.waiting[0]
		g.mu.Unlock()
		next.turn <- true
		return
	}
	g.busy = false
	g.mu.Unlock()
}

// handleBatch processes its in one transaction, with Handle's guarantees
// for each delivery, and sets each item's result: it claims every message
// (in message-ID order, so that concurrent transactions cannot deadlock on
// each other's claims), locks their aggregates (lockAggregates: in the
// store's order, for the same reason), runs each item's handler in the
// order given, commits, and then acknowledges all of them with one driver
// call. When a handler fails, the transaction is rolled back, that
// delivery is settled as Handle would settle it, and the rest is tried
// again without it, so one failing message does not sink the others. ctx
// is the context of the transaction's own work (begin, claim); each
// handler gets its item's.
func (in *Inbox[Tx]) handleBatch(ctx context.Context, its []*item[Tx]) {
	in.purgeDue(ctx)
	in.expireDue(ctx)
	pending := make([]*item[Tx], 0, len(its))
	for _, it := range its {
		if err := checkID(it.d.Message.ID); err != nil {
			it.res, it.err = in.poison(it.ctx, it.d, err)
			continue
		}
		pending = append(pending, it)
	}
	for tried := 0; len(pending) > 0; {
		outs, failed, t, err := in.tryBatch(ctx, pending)
		switch {
		case err != nil && in.retryConflict(ctx, err, tried):
			// A deadlock's victim: all of pending again, none nacked.
			tried++
			continue
		case err == nil:
			ds := make([]*broker.Delivery, len(pending))
			for k, it := range pending {
				in.count(outs[k])
				it.res, ds[k] = outs[k], it.d
			}
			for k, err := range in.ackAll(ctx, ds) {
				pending[k].err = err
			}
			in.retryStalled(ctx, t)
			return
		case errors.Is(err, errStore) && broker.IsPermanent(err):
			// The store refused a value of one of the messages: handle
			// them one by one, which settles that one for good.
			for _, it := range pending {
				it.res, it.err = in.handle(it.ctx, it.d, it.h)
			}
			return
		case errors.Is(err, errStore):
			ds := make([]*broker.Delivery, len(pending))
			for k, it := range pending {
				it.res, ds[k] = ResultFailed, it.d
			}
			err = in.abort(ctx, ds, err)
			for _, it := range pending {
				it.err = err
			}
			return
		}
		it := pending[failed]
		it.res, it.err = in.fail(it.ctx, it.d, err)
		pending = slices.Delete(pending, failed, failed+1)
	}
}

// tryBatch runs one attempt at its. On a handler error it returns the
// index of the failing item; on a store error, an error matching
// errStore. The transaction is committed only when every handler
// succeeded; it then returns the transaction's run, with the held
// successors that failed in it (see heal).
func (in *Inbox[Tx]) tryBatch(ctx context.Context, its []*item[Tx]) ([]Result, int, *txRun[Tx], error) {
	ds := make([]*broker.Delivery, len(its))
	for i, it := range its {
		ds[i] = it.d
	}
	tx, began, claimed, err := in.beginClaim(ctx, ds)
	if err != nil {
		return nil, 0, nil, storeErr("begin and claim", err)
	}
	outs := make([]Result, len(its))
	if !began { // duplicates all, and nothing was begun
		for i := range outs {
			outs[i] = ResultDuplicate
		}
		return outs, 0, nil, nil
	}
	locked, err := in.lockAggregates(ctx, tx, ds, claimed)
	if err != nil {
		in.rollback(ctx, tx)
		return nil, 0, nil, storeErr("lock aggregates", err)
	}
	t := &txRun[Tx]{locked: locked}
	for i, it := range its {
		out, err := in.run(it.ctx, tx, it.d, it.h, claimed[i], t)
		if err != nil {
			in.rollback(ctx, tx)
			return nil, i, nil, err
		}
		outs[i] = out
	}
	if err := in.commit(ctx, tx); err != nil {
		return nil, 0, nil, storeErr("commit", err)
	}
	in.stats.commits.Add(1)
	return outs, 0, t, nil
}

// lockAggregates takes, in tx, before any handler runs, the locks of the
// aggregates of ds whose claims c are new (those whose events the version
// checks will look at), all in the store's one order
// (earlyStore.LockAggregates), and returns the set of them; nil where
// there are no version checks or the store has no such locks. The claims
// were taken before, in message-ID order, and the version checks' rows
// come after: every transaction takes its locks in the same order of
// kinds, and each kind in one order, so that shared transactions of
// concurrent inboxes never deadlock on each other (a deadlock's victim
// would be nacked, and a nack counts toward the broker's delivery limit).
// Where gaps are retried, no version check takes these locks, but the
// rows of the version table that shared transactions update are still
// guarded by them: only one of them at a time touches an aggregate.
func (in *Inbox[Tx]) lockAggregates(ctx context.Context, tx Tx, ds []*broker.Delivery, c []seam.Claimed) (map[string]bool, error) {
	if in.locks == nil {
		return nil, nil
	}
	locked := make(map[string]bool, len(ds))
	aggs := make([]string, 0, len(ds))
	for i, d := range ds {
		agg := d.Message.Headers.Get(HeaderAggregateID)
		if agg == "" || !c[i].New || c[i].Held || locked[agg] {
			continue
		}
		locked[agg] = true
		aggs = append(aggs, agg)
	}
	if len(aggs) == 0 {
		return nil, nil
	}
	if err := in.locks.LockAggregates(ctx, tx, in.consumer, aggs); err != nil {
		return nil, err
	}
	return locked, nil
}

// beginClaim begins the transaction of ds and claims them in it: their
// distinct IDs in ID order (so that concurrent transactions cannot
// deadlock on each other's claims), with the held check for those subject
// to holding. It answers per delivery: of several copies of an ID in ds,
// only the first can be New. If began is false nothing was claimed.
func (in *Inbox[Tx]) beginClaim(ctx context.Context, ds []*broker.Delivery) (tx Tx, began bool, claims []seam.Claimed, err error) {
	if len(ds) == 1 { // the common case, without the sort and the maps below
		d := ds[0]
		r := seam.ClaimRequest{Consumer: in.consumer, IDs: []string{d.Message.ID}, At: in.o.Now()}
		if in.holds(d) {
			r.Aggregates = []string{d.Message.Headers.Get(HeaderAggregateID)}
		}
		return in.storeBeginClaim(ctx, r)
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ds[a].Message.ID, ds[b].Message.ID) })
	r := seam.ClaimRequest{Consumer: in.consumer, At: in.o.Now()}
	aggs := make([]string, 0, len(ds))
	held := false
	pos := make(map[string]int, len(ds)) // ID -> index in r.IDs
	for _, i := range order {
		d := ds[i]
		if _, dup := pos[d.Message.ID]; dup {
			continue
		}
		pos[d.Message.ID] = len(r.IDs)
		r.IDs = append(r.IDs, d.Message.ID)
		agg := ""
		if in.holds(d) {
			agg, held = d.Message.Headers.Get(HeaderAggregateID), true
		}
		aggs = append(aggs, agg)
	}
	if held {
		r.Aggregates = aggs
	}
	tx, began, got, err := in.storeBeginClaim(ctx, r)
	if err != nil || !began {
		return tx, false, nil, err
	}
	claims = make([]seam.Claimed, len(ds))
	for i, d := range ds {
		if j, ok := pos[d.Message.ID]; ok {
			claims[i] = got[j]
			delete(pos, d.Message.ID) // later copies are duplicates
		}
	}
	return tx, true, claims, nil
}

// storeBeginClaim is the store's BeginClaim of r in its span.
func (in *Inbox[Tx]) storeBeginClaim(ctx context.Context, r seam.ClaimRequest) (tx Tx, began bool, claims []seam.Claimed, err error) {
	cctx, span := childSpan(ctx, "inbox claim")
	tx, began, claims, err = in.store.BeginClaim(cctx, r)
	endChild(span, err)
	if err != nil || !began {
		return tx, false, nil, err
	}
	return tx, true, claims, nil
}

// ackAll acknowledges ds after their transaction committed, with one
// driver call (broker.AckAll), and returns each one's failure (matching
// ErrAckAfterCommit), nil for those acknowledged.
func (in *Inbox[Tx]) ackAll(ctx context.Context, ds []*broker.Delivery) []error {
	sctx := settleCtx(ctx)
	errs := broker.AckAll(sctx, ds)
	for i, err := range errs {
		if err != nil {
			errs[i] = in.ackFailed(ds[i], err)
		}
	}
	return errs
}

// prepare is what runs in d's transaction after its claim c and before
// its handler: a duplicate is reported (ok false); a message held behind a
// parked one of its aggregate is parked too (ResultHeld, ok false); a
// message with failed attempts has them forgotten. ok true: run the
// handler.
func (in *Inbox[Tx]) prepare(ctx context.Context, tx Tx, d *broker.Delivery, c seam.Claimed) (r Result, ok bool, err error) {
	if !c.New {
		return ResultDuplicate, false, nil
	}
	if c.Held {
		now := in.o.Now()
		p := parkedFrom(in.consumer, d, "held behind a parked message of aggregate "+d.Message.Headers.Get(HeaderAggregateID), 0, now, now)
		if err := in.store.Park(ctx, tx, p); err != nil {
			return 0, false, storeErr("park", err)
		}
		return ResultHeld, false, nil
	}
	if d.Attempt > 1 {
		if err := in.store.ClearFailure(ctx, tx, in.consumer, d.Message.ID); err != nil {
			return 0, false, storeErr("clear failure", err)
		}
	}
	return 0, true, nil
}

package sqlcore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wary-go/wary/idem/store"
)

func (o *Outbox[Tx]) takeLease(ctx context.Context, q Querier, r store.OutboxClaim) (bool, error) {
	n, err := q.Exec(ctx, o.q.lease, r.Owner, o.c.d.Time(r.Now.Add(r.Lease)), o.c.d.Time(r.Now))
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	return n == 1, nil
}

// claimLeased claims under the relay lease with as little writing as
// possible: it looks (with a plain read) whether the lease is free or ours
// and a row is due, takes or renews the lease in a short write transaction
// only when it is not ours for at least half its length, and reads the rows
// outside any write transaction. Only the lease holder marks rows, so the
// rows it read stay its own until it marks them or its lease runs out.
func (o *Outbox[Tx]) claimLeased(ctx context.Context, r store.OutboxClaim) (store.OutboxBatch, error) {
	var free, renew bool
	var rows []store.OutboxRow
	err := o.d.Read(ctx, func(q Querier) error {
		var owner string
		var until time.Time
		err := q.QueryRow(ctx, o.q.peek, o.c.d.Time(r.Now)).Scan(&owner, nullTimeDest{&until})
		if err != nil {
			return err
		}
		mine := owner == r.Owner && until.After(r.Now)
		free = owner == "-" || owner != "" && (mine || !until.After(r.Now)) // "": nothing due
		renew = !mine || until.Before(r.Now.Add(r.Lease/2))
		return nil
	})
	if err != nil || !free {
		return &batch[Tx]{o: o}, err
	}
	if renew {
		ok := false
		err := o.c.inTx(ctx, func(q Querier) error {
			var err error
			ok, err = o.takeLease(ctx, q, r)
			return err
		})
		if err != nil || !ok {
			return &batch[Tx]{o: o}, err
		}
	}
	err = o.d.Read(ctx, func(q Querier) error {
		var err error
		rows, err = o.claim(ctx, q, r)
		return err
	})
	if err != nil || len(rows) == 0 {
		return &batch[Tx]{o: o, rows: rows}, err
	}
	k := &leaseKeeper[Tx]{o: o, owner: r.Owner, length: r.Lease, base: r.Now, start: time.Now(),
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	return &leasedBatch[Tx]{&batch[Tx]{o: o, rows: rows, keeper: k}}, nil
}

// leasedBatch is a batch claimed under the relay lease.
type leasedBatch[Tx any] struct{ *batch[Tx] }

var _ store.LeasedBatch = (*leasedBatch[any])(nil)

func (b *leasedBatch[Tx]) LeaseLost() <-chan struct{} { return b.keeper.lost }

// leaseKeeper renews the relay lease while its batch is held, every third
// of the lease's length, and closes lost when the lease is gone (it ran
// out, and another relay took it). The lease's clock is the claim's, moved
// on by the time since.
type leaseKeeper[Tx any] struct {
	o      *Outbox[Tx]
	owner  string
	length time.Duration
	base   time.Time // the claim's Now
	start  time.Time // when the claim was made, on the wall clock

	lost, stop, done chan struct{}
	once             sync.Once
}

func (k *leaseKeeper[Tx]) now() time.Time { return k.base.Add(time.Since(k.start)) }

func (k *leaseKeeper[Tx]) run() {
	defer close(k.done)
	t := time.NewTicker(max(k.length/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), k.length)
		var ok bool
		err := k.o.c.inTx(ctx, func(q Querier) error {
			var err error
			ok, err = k.renew(ctx, q, k.now())
			return err
		})
		cancel()
		if err == nil && !ok {
			close(k.lost)
			return
		}
		// A failed renewal (the database busy) is tried again at the next
		// tick; if the lease runs out meanwhile, Complete finds it gone.
	}
}

// renew extends the lease from now if owner still holds it, and reports
// whether it did.
func (k *leaseKeeper[Tx]) renew(ctx context.Context, q Querier, now time.Time) (bool, error) {
	n, err := q.Exec(ctx, k.o.q.renew, k.owner, k.o.c.d.Time(now.Add(k.length)), k.o.c.d.Time(now))
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	return n == 1, nil
}

// halt stops the renewals and waits for the last one to end.
func (k *leaseKeeper[Tx]) halt() {
	k.once.Do(func() { close(k.stop) })
	<-k.done
}

// IdleOutbox implements store.OutboxIdler: if no adding transaction is
// between its wake lock and its end, it sets the wake flag, so that every
// transaction adding rows from now on notifies, and reports true. Those
// that held the lock read the flag unset and did not notify; they have all
// ended, so a claim made after IdleOutbox returns true sees their rows.
func (o *Outbox[Tx]) IdleOutbox(ctx context.Context) (bool, error) {
	if o.q.wakeTry == "" {
		return false, nil
	}
	var ok bool
	err := o.c.inTx(ctx, func(q Querier) error {
		if err := q.QueryRow(ctx, o.q.wakeTry, o.wakeKey).Scan(&ok); err != nil || !ok {
			return err
		}
		_, err := q.Exec(ctx, o.q.setIdle, true)
		return err
	})
	return ok && err == nil, err
}

// BusyOutbox implements store.OutboxIdler: it clears the wake flag.
func (o *Outbox[Tx]) BusyOutbox(ctx context.Context) error {
	if o.q.wakeTry == "" {
		return nil
	}
	return o.c.inTx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, o.q.setIdle, false)
		return err
	})
}

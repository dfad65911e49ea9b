package sqlcore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wary-go/wary/idem/outbox"
)

func (o *Outbox[Tx]) takeLease(ctx context.Context, q Querier, r Claim) (bool, error) {
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
func (o *Outbox[Tx]) claimLeased(ctx context.Context, r Claim) (Batch, error) {
	var free, renew bool
	var rows []outbox.Row
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
		stop: make(chan struct{}), done: make(chan struct{})}
	k.lost, k.markLost = context.WithCancel(context.Background())
	go k.run()
	return &batch[Tx]{o: o, rows: rows, keeper: k}, nil
}

// leaseKeeper renews the relay lease while its batch is held, every third
// of the lease's length, and ends lost when the lease is gone (it ran
// out, and another relay took it). The lease's clock is the claim's, moved
// on by the time since.
type leaseKeeper[Tx any] struct {
	o      *Outbox[Tx]
	owner  string
	length time.Duration
	base   time.Time // the claim's Now
	start  time.Time // when the claim was made, on the wall clock

	lost       context.Context // done once the lease is gone
	markLost   context.CancelFunc
	stop, done chan struct{}
	once       sync.Once
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
			k.markLost()
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

// IdleOutbox is for idem/postgres's wake-up: if no adding transaction is
// between its wake lock and its end, it sets owner's wake flag (a row of
// the wake table, lasting ttl unless renewed), so that every transaction
// adding rows from now on notifies, and reports true. It also deletes the
// flags of relays that stopped renewing theirs (they crashed).
//
// Why a relay that goes idle never sleeps through a commit. An adding
// transaction A takes the wake lock shared in its first statement S1 (the
// sequence counters) and holds it until it ends; it reads the flags in a
// later statement S2 (its last insert), which in READ COMMITTED takes a
// snapshot of its own after S1 returned, and notifies if one is set.
// IdleOutbox (transaction I) gets the lock exclusively only if no
// transaction holds it shared, and sets the flag while holding it. Either:
//   - A was granted the lock before I tried: I got it, so A had ended
//     before I committed, and the claim the relay makes after IdleOutbox
//     returns true (Relay.goIdle claims once more) sees A's rows; or
//   - A asked for the lock after I got it: S1 waits until I ends, and
//     PostgreSQL releases a transaction's locks only after its commit is
//     visible, so S2's snapshot sees the flag set and A notifies at its
//     commit; the relay listens (it goes idle only while listening) and
//     its flag stays set until it claims rows again (only it clears its
//     own flag), after which it claims once more before it waits.
//
// Where the add is one statement (OneStatementAdd, PostgreSQL), S1 and S2
// are two commands of the VOLATILE function that statement calls
// (WakeNotify): the function's second command takes a snapshot of its own
// after its first returned, as S2 does here (see addOneStatement).
//
// Under REPEATABLE READ or SERIALIZABLE, S2 reuses the transaction's
// first snapshot, perhaps taken before I committed: such a transaction
// always notifies (the Notify statement, or WakeNotify's function,
// checks the isolation level).
// A relay's flag that the sweep deleted (it did not renew it within ttl:
// it was stalled that long) costs that relay notifications until it
// renews, and it then finds the flag gone and sets it again (RenewIdle);
// meanwhile it still polls. A crashed relay's flag costs only needless
// notifications, until another relay sweeps it.
func (o *Outbox[Tx]) IdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	if o.q.wakeTry == "" {
		return false, nil
	}
	var ok bool
	err := o.d.Auto(ctx, func(q Querier) error {
		return q.QueryRow(ctx, o.q.setIdle, o.wakeKey, wakeName(owner), ttl.Seconds()).Scan(&ok)
	})
	return ok && err == nil, err
}

// RenewIdleOutbox (idem/postgres's wake-up) extends owner's wake
// flag by ttl, and reports false if it is not set (it was swept).
func (o *Outbox[Tx]) RenewIdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	if o.q.wakeTry == "" {
		return false, nil
	}
	var n int64
	err := o.d.Auto(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, o.q.renewIdle, wakeName(owner), ttl.Seconds())
		return err
	})
	return n == 1, err
}

// BusyOutbox (idem/postgres's wake-up) clears owner's wake flag;
// other relays' flags stay set.
func (o *Outbox[Tx]) BusyOutbox(ctx context.Context, owner string) error {
	if o.q.wakeTry == "" {
		return nil
	}
	return o.d.Auto(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, o.q.setBusy, wakeName(owner))
		return err
	})
}

// wakeName is the wake table's row of a relay ("outbox" is the single flag
// of earlier versions).
func wakeName(owner string) string { return "relay:" + owner }

// WakeKey is the advisory lock key of the wake flags, for the tests.
func (o *Outbox[Tx]) WakeKey() int64 { return o.wakeKey }

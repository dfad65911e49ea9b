package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/idem/internal/sqlcore"
)

// busyPoll is how soon a relay that found nothing looks again while an
// adding transaction that did not notify may still commit, or while it has
// not yet found nothing idleAfter times in a row since it last had work:
// under a steady stream of commits a relay polls rather than ask for
// notifications, whose commits are serialised.
const busyPoll = time.Millisecond

// idleAfter is how many claims in a row must find nothing before a relay
// that had work asks for notifications (about as many milliseconds).
const idleAfter = 10

// wakeStore is what a wake needs of the store: the relay's wake flag
// (sqlcore.Outbox) and LISTEN.
type wakeStore interface {
	// IdleOutbox sets owner's flag, for ttl: adding transactions notify
	// from now on. It returns false (and changes nothing) while an adding
	// transaction that did not notify may still commit.
	IdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	// RenewIdleOutbox extends owner's flag by ttl and reports whether it
	// was still set.
	RenewIdleOutbox(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	// BusyOutbox clears owner's flag.
	BusyOutbox(ctx context.Context, owner string) error
	// ListenOutbox is sqlcore.Wake.Listen.
	ListenOutbox(ctx context.Context, notify func()) error
}

// wake is a relay's wake-up on PostgreSQL. Adding transactions NOTIFY only
// while a relay waits, because the commits of notifying transactions are
// serialised, which would halve the producers' commit rate. Each relay has
// its own wake flag, named by its owner: a relay that finds work clears
// only its own, so another relay waiting meanwhile is still notified. A
// relay that found nothing idleAfter times in a row sets its flag before it
// waits, and renews it while it keeps waiting (a flag not renewed within
// its ttl belongs to a relay that stopped, and may be deleted); a relay
// that claimed rows after waiting, or stops, clears it.
type wake struct {
	s     wakeStore
	owner string
	ttl   time.Duration

	waiting atomic.Bool  // this relay set its flag
	empty   atomic.Int64 // claims in a row that found nothing, since the relay had work
}

func newWake(s wakeStore, owner string, ttl time.Duration) *wake {
	w := &wake{s: s, owner: owner, ttl: ttl}
	w.empty.Store(idleAfter) // no work yet: ask for notifications at once
	return w
}

var _ sqlcore.Wake = (*wake)(nil)

// Listen implements [sqlcore.Wake].
func (w *wake) Listen(ctx context.Context, notify func()) error { return w.s.ListenOutbox(ctx, notify) }

// Idle implements [sqlcore.Wake]: it polls (busyPoll) until the relay found
// nothing idleAfter times in a row, or while a producer that did not
// notify may still commit; otherwise it sets or renews the relay's flag,
// and asks for one more claim when it just set it (rows may have committed
// before).
func (w *wake) Idle(ctx context.Context) (time.Duration, error) {
	if !w.waiting.Load() && w.empty.Add(1) < idleAfter {
		return busyPoll, nil
	}
	if w.waiting.Load() {
		set, err := w.s.RenewIdleOutbox(ctx, w.owner, w.ttl)
		if err != nil || set {
			return 0, err
		}
		w.waiting.Store(false) // swept: set it again
	}
	set, err := w.s.IdleOutbox(ctx, w.owner, w.ttl)
	switch {
	case err != nil:
		return 0, err
	case !set:
		return busyPoll, nil
	}
	w.waiting.Store(true)
	return -1, nil
}

// Busy implements [sqlcore.Wake]: it clears the relay's flag if it set it.
func (w *wake) Busy(ctx context.Context) error {
	w.empty.Store(0)
	if !w.waiting.Swap(false) {
		return nil
	}
	if err := w.s.BusyOutbox(ctx, w.owner); err != nil {
		w.waiting.Store(true) // still set, as far as we know
		return err
	}
	return nil
}

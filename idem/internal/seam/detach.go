package seam

import (
	"context"
	"time"
)

// DetachTimeout bounds each store or broker call that must run although
// its caller's context ended (Detach): the one bound of idem's cleanup
// calls, stated once.
const DetachTimeout = 10 * time.Second

// Detach returns ctx without its cancellation (its values kept), bounded
// by DetachTimeout, and the function that releases it, for a call that
// must run when its caller gave up: a rollback, the release of a claim or
// a connection, a batch settled with nothing recorded, an external call's
// outcome recorded. A store or broker that does not answer then fails the
// call with context.DeadlineExceeded instead of holding its caller for
// ever.
//
// The work a caller's context does not bound on purpose keeps its own
// bound instead: an inbox's commits and rollbacks (idem.Options.CommitTimeout),
// settles (broker.SubscriptionOptions.SettleTimeout), a relay's marks
// (outbox.RelayOptions.PublishTimeout); a goroutine that runs until its
// owner's Close stops it has no deadline, only that cancellation.
func Detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), DetachTimeout)
}

package admin

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/outbox"
)

// Outbox lists the outbox rows f selects, in row order.
func (a *Admin) Outbox(ctx context.Context, f outbox.Filter) ([]outbox.Row, error) {
	return a.d.listOutbox(ctx, f)
}

// RequeueOutbox makes quarantined rows pending again, with their attempts
// reset: a running relay tries them again. It returns the rows it
// requeued and those it skipped (no such row, or not quarantined).
func (a *Admin) RequeueOutbox(ctx context.Context, rowIDs ...int64) (done, skipped []int64, err error) {
	return a.setOutbox(ctx, rowIDs, outbox.Pending, outbox.Quarantined)
}

// DiscardOutbox gives up on pending or quarantined rows: they are never
// published, and the later rows of their aggregates flow again
// (consumers that check versions see a gap where they were). It returns
// the rows it discarded and those it skipped (no such row, or sent or
// discarded already).
func (a *Admin) DiscardOutbox(ctx context.Context, rowIDs ...int64) (done, skipped []int64, err error) {
	return a.setOutbox(ctx, rowIDs, outbox.Discarded, outbox.Pending, outbox.Quarantined)
}

func (a *Admin) setOutbox(ctx context.Context, ids []int64, to outbox.State, from ...outbox.State) (done, skipped []int64, err error) {
	done, skipped = []int64{}, []int64{}
	for _, id := range ids {
		ok, err := a.d.setOutboxState(ctx, id, to, time.Now(), from...)
		if err != nil {
			return done, skipped, err
		}
		if ok {
			done = append(done, id)
		} else {
			skipped = append(skipped, id)
		}
	}
	return done, skipped, nil
}

// OutboxStatus is the outbox's backlog and, where relays stream the
// outbox from the database's log, the stream's slot.
type OutboxStatus struct {
	outbox.Health
	// Stream is the stream's slot, or nil if the store does not stream or
	// no relay ever did (no slot, none released).
	Stream *outbox.StreamStatus
}

// OutboxStatus reports the outbox's backlog as of now, and the stream's
// slot where there is one.
func (a *Admin) OutboxStatus(ctx context.Context) (OutboxStatus, error) {
	h, err := a.d.outboxHealth(ctx, time.Now())
	if err != nil {
		return OutboxStatus{}, err
	}
	s := OutboxStatus{Health: h}
	st, ok, err := a.d.streamStatus(ctx)
	if err != nil {
		return OutboxStatus{}, err
	}
	if ok && (st.Exists || st.Released > 0) {
		s.Stream = &st
	}
	return s, nil
}

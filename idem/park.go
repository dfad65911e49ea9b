package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Parked lists the consumer's parked messages matching f, each aggregate's
// in replay order.
func (in *Inbox[Tx]) Parked(ctx context.Context, f ParkedFilter) ([]Parked, error) {
	return in.store.ListParked(ctx, in.consumer, f)
}

// Discard deletes the parked messages matching f (all of the consumer's,
// for the zero filter) and returns how many it deleted. Their effects are
// never applied; the inbox keeps their claims, so copies still arriving are
// duplicates.
func (in *Inbox[Tx]) Discard(ctx context.Context, f ParkedFilter) (int, error) {
	return in.store.DiscardParked(ctx, in.consumer, f)
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Replayed counts parked messages whose handler succeeded (which, for
	// a versioned handler, includes stale copies it skipped).
	Replayed int
	// Remaining counts the aggregate's messages still parked.
	Remaining int
	// Stopped is the message the replay stopped at, with its new reason
	// and attempt count, or nil if none.
	Stopped *Parked
}

// Replay applies the parked messages of one aggregate (aggregateID, or the
// messages without one for "") in order: version, then sequence, then
// parking order. Each runs in its own transaction, which also deletes it
// from the park; the inbox claim made when it was parked stays. Replay
// stops at the first message whose handler returns an error (a gap that is
// still open returns a *ParkError): that message and the ones after it stay
// parked, its reason and attempts updated, and Stopped says which. A
// *ParkError stop is not an error of Replay; other handler errors are
// returned. Messages parked while Replay runs are replayed too.
//
// The handler receives a detached delivery: settling it has no effect.
// Its Attempt is the message's failed attempts plus one.
func (in *Inbox[Tx]) Replay(ctx context.Context, aggregateID string, h Handler[Tx]) (ReplayResult, error) {
	var res ReplayResult
	f := ParkedFilter{AggregateID: aggregateID, HasAggregate: true}
	for {
		list, err := in.store.ListParked(ctx, in.consumer, f)
		if err != nil {
			return res, fmt.Errorf("idem: replay: %w", err)
		}
		if len(list) == 0 {
			return res, nil
		}
		for i := range list {
			p := &list[i]
			done, herr := in.replayOne(ctx, p, h)
			if herr == nil {
				if done {
					res.Replayed++
				}
				continue
			}
			res.Remaining = len(list) - i
			if errors.Is(herr, errStore) {
				return res, herr
			}
			now := in.o.Now()
			if err := in.store.UpdateParked(ctx, in.consumer, p.ID, herr.Error(), now); err != nil {
				return res, fmt.Errorf("idem: replay: %w", err)
			}
			p.Reason, p.Attempts, p.LastSeen = herr.Error(), p.Attempts+1, now
			res.Stopped = p
			in.o.Logger.Info("idem: replay stopped", slog.String("consumer", in.consumer), slog.String("message_id", p.MessageID),
				slog.String("aggregate_id", p.AggregateID), slog.String("reason", p.Reason))
			var pe *ParkError
			if errors.As(herr, &pe) {
				return res, nil
			}
			return res, fmt.Errorf("idem: replay of %q: %w", p.MessageID, herr)
		}
	}
}

// replayOne deletes p from the park and runs h, in one transaction. It
// reports false when p was gone (replayed concurrently).
func (in *Inbox[Tx]) replayOne(ctx context.Context, p *Parked, h Handler[Tx]) (bool, error) {
	tx, err := in.store.Begin(ctx)
	if err != nil {
		return false, storeErr("begin", err)
	}
	ok, err := in.store.DeleteParked(ctx, tx, in.consumer, p.ID)
	if err != nil || !ok {
		_ = in.store.Rollback(context.WithoutCancel(ctx), tx)
		if err != nil {
			return false, storeErr("unpark", err)
		}
		return false, nil
	}
	d, err := detached(ctx, p)
	if err == nil {
		err = call(ctx, tx, d, h)
	}
	if err != nil {
		_ = in.store.Rollback(context.WithoutCancel(ctx), tx)
		return false, err
	}
	if err := in.store.Commit(ctx, tx); err != nil {
		return false, storeErr("commit", err)
	}
	in.stats.replayed.Add(1)
	return true, nil
}

// ReplayAll replays every aggregate that has parked messages, as Replay
// does, and returns the results by aggregate ID. It continues past
// aggregates that stop; errors are joined.
func (in *Inbox[Tx]) ReplayAll(ctx context.Context, h Handler[Tx]) (map[string]ReplayResult, error) {
	list, err := in.store.ListParked(ctx, in.consumer, ParkedFilter{})
	if err != nil {
		return nil, fmt.Errorf("idem: replay: %w", err)
	}
	out := map[string]ReplayResult{}
	var errs []error
	for _, p := range list {
		if _, done := out[p.AggregateID]; done {
			continue
		}
		r, err := in.Replay(ctx, p.AggregateID, h)
		out[p.AggregateID] = r
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// detached builds a delivery for a parked message whose settlement goes
// nowhere.
func detached(ctx context.Context, p *Parked) (*broker.Delivery, error) {
	rs := &replaySub{msg: &driver.Message{
		ID: p.MessageID, Key: p.Key, Headers: p.Headers, Body: p.Body,
		AckID: p.ID, Attempt: p.Attempts + 1, Redelivered: true, PublishTime: p.FirstSeen,
	}}
	sub := broker.NewSubscription(rs, &broker.SubscriptionOptions{Logger: slog.New(slog.DiscardHandler)})
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// replaySub is a driver.Subscription that yields one message once and
// ignores settlement.
type replaySub struct {
	msg *driver.Message
}

func (r *replaySub) ReceiveBatch(ctx context.Context, _ int) ([]*driver.Message, error) {
	if r.msg == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	m := r.msg
	r.msg = nil
	return []*driver.Message{m}, nil
}
func (*replaySub) SendAcks(context.Context, []driver.AckID) error                   { return nil }
func (*replaySub) SendNacks(context.Context, []driver.AckID, time.Duration) error   { return nil }
func (*replaySub) SendDeadLetters(context.Context, []driver.AckID, string) error    { return nil }
func (*replaySub) ExtendLocks(context.Context, []driver.AckID, time.Duration) error { return nil }
func (*replaySub) Capabilities() driver.Capabilities                                { return driver.Capabilities{} }
func (*replaySub) Classify(error) driver.ErrorInfo                                  { return driver.ErrorInfo{} }
func (*replaySub) As(any) bool                                                      { return false }
func (*replaySub) ErrorAs(error, any) bool                                          { return false }
func (*replaySub) Close() error                                                     { return nil }

package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Parked lists the consumer's parked messages matching f, by aggregate and
// each aggregate's in replay order. Set f.Limit to bound the listing; the
// bodies are loaded.
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
	// Replayed counts parked messages whose handler succeeded, including
	// those it found stale (SkipStale).
	Replayed int
	// Remaining counts the aggregate's messages still parked.
	Remaining int
	// Stopped is the message the replay stopped at, with its new reason
	// and attempt count, or nil if none.
	Stopped *Parked
}

// replayPage is how many parked messages a replay loads at a time.
const replayPage = 100

// Replay applies the parked messages of one aggregate (aggregateID, or the
// messages without one for "") with h, in order: version, then sequence,
// then parking order. It loads them a page at a time. Each runs in its own
// transaction, which also deletes it from the park; the inbox claim made
// when it was parked stays. Replay stops at the first message whose handler
// returns an error (a gap that is still open returns a *ParkError): that
// message and the ones after it stay parked, its reason and attempts
// updated, and Stopped says which. A *ParkError stop is not an error of
// Replay; other handler errors are returned. Messages of the aggregate
// parked while Replay runs (held behind the ones it replays) are replayed
// too: Replay ends when the aggregate has none left.
//
// h is the handler the messages were parked by; with Options.Versions it
// runs behind the version checks, as in Handle. It receives a detached delivery
// (broker.NewDetachedDelivery): settling it has no effect. Its Attempt is
// the message's failed attempts plus one.
func (in *Inbox[Tx]) Replay(ctx context.Context, aggregateID string, h Handler[Tx]) (ReplayResult, error) {
	in.logStart()
	var res ReplayResult
	f := ParkedFilter{AggregateID: aggregateID, HasAggregate: true}
	for {
		page, err := in.store.ListParked(ctx, in.consumer, ParkedFilter{AggregateID: aggregateID, HasAggregate: true, Limit: replayPage})
		if err != nil {
			return res, fmt.Errorf("idem: replay: %w", err)
		}
		if len(page) == 0 {
			return res, nil
		}
		for i := range page {
			p := &page[i]
			done, herr := in.replayOne(ctx, p, h)
			if herr == nil {
				if done {
					res.Replayed++
				}
				continue
			}
			if errors.Is(herr, errStore) {
				res.Remaining, _ = in.store.CountParked(ctx, in.consumer, f)
				return res, herr
			}
			now, reason := in.o.Now(), driver.BoundReason(herr.Error())
			if err := in.store.UpdateParked(ctx, in.consumer, p.ID, reason, now); err != nil {
				return res, fmt.Errorf("idem: replay: %w", err)
			}
			if res.Remaining, err = in.store.CountParked(ctx, in.consumer, f); err != nil {
				return res, fmt.Errorf("idem: replay: %w", err)
			}
			p.Reason, p.Attempts, p.LastSeen = reason, p.Attempts+1, now
			stopped := Parked(*p)
			res.Stopped = &stopped
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
		in.rollback(ctx, tx)
		if err != nil {
			return false, storeErr("unpark", err)
		}
		return false, nil
	}
	m := &broker.Message{ID: p.MessageID, Key: p.Key, Headers: p.Headers, Body: p.Body}
	if _, err := in.call(ctx, tx, broker.NewDetachedDelivery(m, p.Attempts+1), h, in.checks(false), nil); err != nil {
		in.rollback(ctx, tx)
		return false, err
	}
	if err := in.commit(ctx, tx); err != nil {
		return false, storeErr("commit", err)
	}
	in.stats.replayed.Add(1)
	in.tel.replayed(ctx)
	return true, nil
}

// replayPasses bounds how often ReplayAll goes over the park again for
// messages parked while it ran.
const replayPasses = 3

// ReplayAll replays every aggregate that has parked messages, as Replay
// does, and returns the results by aggregate ID. It goes through the
// aggregates in order with a cursor, never loading more than a page of
// messages at a time. It continues past aggregates that stop (and does not
// retry them); errors are joined. When a pass replayed anything, it goes
// over the park again (at most three passes in all), so that messages
// parked meanwhile, also of aggregates it had already replayed, are not
// left behind. A message held by a delivery whose transaction commits
// after the last pass looked is still parked when ReplayAll returns; list
// the park (Parked) to be sure it is empty.
func (in *Inbox[Tx]) ReplayAll(ctx context.Context, h Handler[Tx]) (map[string]ReplayResult, error) {
	in.logStart()
	out := map[string]ReplayResult{}
	var errs []error
	for range replayPasses {
		replayed := 0
		f := ParkedFilter{Limit: 1}
		for {
			next, err := in.store.ListParked(ctx, in.consumer, f)
			if err != nil {
				return out, errors.Join(append(errs, fmt.Errorf("idem: replay: %w", err))...)
			}
			if len(next) == 0 {
				break
			}
			agg := next[0].AggregateID
			f.AfterAggregate, f.HasAfter = agg, true
			prev, seen := out[agg]
			if seen && (prev.Stopped != nil || prev.Remaining > 0) {
				continue // stopped in an earlier pass: left for the operator
			}
			r, err := in.Replay(ctx, agg, h)
			r.Replayed += prev.Replayed
			out[agg] = r
			replayed += r.Replayed - prev.Replayed
			if err != nil {
				errs = append(errs, err)
			}
		}
		if replayed == 0 {
			break
		}
	}
	return out, errors.Join(errs...)
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
)

// ParkedConsumers returns, for every consumer with parked messages, how
// many it has.
func (a *Admin) ParkedConsumers(ctx context.Context) (map[string]int, error) {
	return a.d.parkedConsumers(ctx)
}

// consumers returns consumer, or with consumer "" every consumer with
// parked messages, in order.
func (a *Admin) consumers(ctx context.Context, consumer string) ([]string, error) {
	if consumer != "" {
		return []string{consumer}, nil
	}
	m, err := a.d.parkedConsumers(ctx)
	return slices.Sorted(maps.Keys(m)), err
}

// Parked lists the parked messages f selects, of consumer or (consumer
// "") of every consumer in turn, by consumer name: each consumer's by
// aggregate, and each aggregate's in replay order (version, then sequence,
// then parking order). f.Limit caps each consumer's; with f.NoBody the
// bodies are not read.
func (a *Admin) Parked(ctx context.Context, consumer string, f idem.ParkedFilter) ([]idem.Parked, error) {
	consumers, err := a.consumers(ctx, consumer)
	if err != nil {
		return nil, err
	}
	out := []idem.Parked{}
	for _, c := range consumers {
		ps, err := a.d.listParked(ctx, c, f)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// CountParked counts the parked messages f selects (its Limit ignored), of
// consumer or (consumer "") of every consumer.
func (a *Admin) CountParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	consumers, err := a.consumers(ctx, consumer)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range consumers {
		k, err := a.d.countParked(ctx, c, f)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// FindParked returns parked message id (the ID Parked lists, unique
// across consumers), if it is consumer's or, with consumer "", whoever's
// it is; ok is false if there is none.
func (a *Admin) FindParked(ctx context.Context, consumer string, id int64) (p idem.Parked, ok bool, err error) {
	ps, err := a.Parked(ctx, consumer, idem.ParkedFilter{ID: id})
	if err != nil || len(ps) == 0 {
		return idem.Parked{}, false, err
	}
	return ps[0], true, nil
}

// ParkedAggregates lists the distinct aggregates of consumer's parked
// messages that f selects (f.AggregateID alone, with f.HasAggregate, if
// it has any), in the order Parked lists them. It reads one message per
// aggregate.
func (a *Admin) ParkedAggregates(ctx context.Context, consumer string, f idem.ParkedFilter) ([]string, error) {
	if consumer == "" {
		return nil, errors.New("idem/admin: parked aggregates: name the consumer")
	}
	if f.HasAggregate {
		n, err := a.d.countParked(ctx, consumer, f)
		if err != nil || n == 0 {
			return nil, err
		}
		return []string{f.AggregateID}, nil
	}
	var out []string
	cur := idem.ParkedFilter{Limit: 1, NoBody: true}
	for {
		ps, err := a.d.listParked(ctx, consumer, cur)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			return out, nil
		}
		out = append(out, ps[0].AggregateID)
		cur.AfterAggregate, cur.HasAfter = ps[0].AggregateID, true
	}
}

// DiscardParked deletes consumer's parked messages that f selects (all of
// them, for the zero filter) and returns how many. Their effects are never
// applied; the inbox keeps their claims, so that copies still arriving are
// duplicates.
func (a *Admin) DiscardParked(ctx context.Context, consumer string, f idem.ParkedFilter) (int, error) {
	if consumer == "" {
		return 0, errors.New("idem/admin: discard parked messages: name the consumer")
	}
	return a.d.discardParked(ctx, consumer, f)
}

// ReplayOptions configures ReplayParked. Nil means defaults.
type ReplayOptions struct {
	// By says who replays, in each message's wary-replayed-by header
	// (driver.HeaderReplayedBy), followed by why the message was parked.
	// Default: "idem/admin" and the time.
	By string
	// Pace, if set, is called before each aggregate (a rate limit); its
	// error stops the replay.
	Pace func(context.Context) error
	// Replayed, if set, is called after each aggregate with its messages,
	// once they are published and gone from the park.
	Replayed func(aggregateID string, ps []idem.Parked)
}

// ReplayParked moves the parked messages of consumer's aggregates back to
// the topic t (the one the consumer reads from), aggregate by aggregate:
// it takes each aggregate's messages out of the park, in replay order,
// forgets their inbox claims so that the consumer processes them again,
// and publishes them with their original IDs, keys and headers plus
// wary-replayed-by (see ReplayHeaders), in one store transaction per
// aggregate, committed only after the broker confirmed every publish. It
// returns the messages replayed, in order.
//
// Nothing is lost: an aggregate whose publish fails stays parked, and the
// replay stops there with an error naming it. A message whose gap is
// still open is parked again when it comes back. A consumer on
// PostgreSQL that receives a replayed message before the replay's
// transaction commits can hold it again (its claim sees the park still):
// list the park afterwards, and replay again if the aggregate is back.
func (a *Admin) ReplayParked(ctx context.Context, t *broker.Topic, consumer string, aggregates []string, opts *ReplayOptions) ([]idem.Parked, error) {
	var o ReplayOptions
	if opts != nil {
		o = *opts
	}
	if o.By == "" {
		o.By = "idem/admin " + time.Now().UTC().Format(time.RFC3339)
	}
	if consumer == "" {
		return nil, errors.New("idem/admin: replay parked messages: name the consumer")
	}
	out := []idem.Parked{}
	for _, agg := range aggregates {
		if o.Pace != nil {
			if err := o.Pace(ctx); err != nil {
				return out, err
			}
		}
		ps, err := a.d.listParked(ctx, consumer, idem.ParkedFilter{AggregateID: agg, HasAggregate: true})
		if err != nil {
			return out, err
		}
		err = a.d.unpark(ctx, consumer, ps, func(ctx context.Context) error {
			msgs := make([]*broker.Message, len(ps))
			for i, p := range ps {
				msgs[i] = &broker.Message{ID: p.MessageID, Key: p.Key, Headers: ReplayHeaders(p.Headers, o.By, p.Reason), Body: p.Body}
			}
			return t.Publish(ctx, msgs...)
		})
		if err != nil {
			return out, fmt.Errorf("replay of aggregate %q (its messages stay parked): %w", agg, err)
		}
		out = append(out, ps...)
		if o.Replayed != nil {
			o.Replayed(agg, ps)
		}
	}
	return out, nil
}

// ReplayHeaders returns the headers a message set aside (parked, or
// dead-lettered) is replayed with: h without wary's reserved headers but
// the event-identity ones (a dead-letter reason, say), and
// driver.HeaderReplayedBy with by and, if not empty, why the message had
// been set aside ("alice@host 2026-12-01T03:12:00Z: gap").
func ReplayHeaders(h broker.Headers, by, reason string) broker.Headers {
	out := make(broker.Headers, 0, len(h)+1)
	for _, p := range h {
		if !driver.ReservedHeader(p[0]) {
			out = append(out, p)
		}
	}
	if reason != "" {
		by += ": " + reason
	}
	out.Set(driver.HeaderReplayedBy, by)
	return out
}

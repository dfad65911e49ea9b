package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/admin"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/redact"
)

// The operations below are the one implementation behind both views of
// wary: the commands print what they return (as tables, or JSON with
// --json), and the console renders the same values as pages and serves
// them as JSON under /api/.

// listParked lists the parked messages that flt selects, of consumer or
// (consumer "") of every consumer, in replay order per consumer.
func listParked(ctx context.Context, d *db, consumer string, flt idem.ParkedFilter, full bool) ([]parkedJSON, error) {
	if !full {
		flt.NoBody = true // not shown: not read
	}
	ps, err := d.Parked(ctx, consumer, flt)
	if err != nil {
		return nil, err
	}
	out := make([]parkedJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, toParkedJSON(p.Consumer, p, full))
	}
	return out, nil
}

// replayParked replays each of aggs in turn (see wary parked replay and
// admin.Admin.ReplayParked): one store transaction per aggregate,
// committed after the broker confirmed every publish. Before each
// aggregate it calls pace (a rate limit; nil for none), and after it done
// with the aggregate's messages.
func replayParked(ctx context.Context, d *db, t *broker.Topic, consumer string, aggs []string, by string,
	pace func(context.Context) error, done func(agg string, ps []parkedJSON)) (replayJSON, error) {
	res := replayJSON{Replayed: []parkedJSON{}}
	_, err := d.ReplayParked(ctx, t, consumer, aggs, &admin.ReplayOptions{By: by, Pace: pace, Replayed: func(agg string, ps []idem.Parked) {
		js := make([]parkedJSON, 0, len(ps))
		for _, p := range ps {
			js = append(js, toParkedJSON(consumer, p, false))
		}
		res.Replayed = append(res.Replayed, js...)
		if done != nil {
			done(agg, js)
		}
	}})
	return res, err
}

// outboxHealth is the outbox's backlog, as wary outbox status prints it.
func outboxHealth(ctx context.Context, d *db) (healthJSON, error) {
	h, err := d.OutboxStatus(ctx)
	if err != nil {
		return healthJSON{}, err
	}
	j := healthJSON{Backlog: h.Backlog, Retrying: h.Retrying, Quarantined: h.Quarantined, OldestUnsent: h.OldestUnsent}
	if !h.OldestUnsent.IsZero() {
		j.OldestUnsentAge = h.OldestUnsentAge.Round(time.Second).String()
		j.oldestAge = h.OldestUnsentAge
	}
	if st := h.Stream; st != nil {
		j.Stream = &streamJSON{Slot: st.Slot, Active: st.Active, LagBytes: st.LagBytes,
			LagAge: st.LagAge.Round(time.Millisecond).String(), WALStatus: st.WALStatus,
			Released: st.Released, ReleasedAt: st.ReleasedAt, ReleasedLag: st.ReleasedLag, exists: st.Exists}
	}
	return j, nil
}

// listOutbox lists outbox rows as wary outbox list prints them (without
// their payloads, which it does not read).
func listOutbox(ctx context.Context, d *db, f outbox.Filter) ([]outboxJSON, error) {
	f.NoPayload = true
	rows, err := d.Outbox(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]outboxJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, outboxJSON{RowID: r.RowID, MessageID: r.ID, AggregateID: r.AggregateID, Sequence: r.Sequence, Version: r.Version,
			Type: r.Type, State: r.State.String(), Attempts: r.Attempts, CreatedAt: r.CreatedAt, LastError: r.LastError})
	}
	return out, nil
}

// setOutbox requeues (to pending) or discards rows, and returns those it
// changed and those it skipped (gone, or in a state the verb does not
// apply to).
func setOutbox(ctx context.Context, d *db, ids []int64, to outbox.State) (done, skipped []int64, err error) {
	if to == outbox.Discarded {
		return d.DiscardOutbox(ctx, ids...)
	}
	return d.RequeueOutbox(ctx, ids...)
}

// moveDead replays (to t) or, with t nil, discards the dead letters of s
// that ids name (all of those read, with all), after confirm accepted how
// many. Those not chosen go back to the queue. It returns what it moved
// and the IDs it did not find.
func moveDead(ctx context.Context, s *broker.Subscription, t *broker.Topic, f *dlqFlags, confirm func(n int) error) (done []deadJSON, missing []string, err error) {
	ds, err := readDead(ctx, s, f)
	if err != nil {
		release(ds)
		return nil, nil, err
	}
	want := map[string]bool{}
	for _, id := range f.ids {
		want[id] = true
	}
	var chosen, others []*broker.Delivery
	for _, d := range ds {
		if f.all || want[d.Message.ID] {
			chosen = append(chosen, d)
			delete(want, d.Message.ID)
		} else {
			others = append(others, d)
		}
	}
	if s.Capabilities().AckModel == capability.AckCumulative && !prefix(ds, chosen) {
		release(ds)
		return nil, nil, errors.New("this dead-letter queue acknowledges cumulatively (a Kafka topic): removing a dead letter removes every earlier one, so choose the first ones in order, or --all")
	}
	release(others)
	verb := "discard"
	if t != nil {
		verb = "replay"
	}
	if len(chosen) > 0 {
		if err := confirm(len(chosen)); err != nil {
			release(chosen)
			return nil, nil, err
		}
	}
	done = []deadJSON{}
	by := replayedBy()
	for i, d := range chosen {
		if t != nil {
			m := d.Message
			err := t.Publish(ctx, &broker.Message{ID: m.ID, Key: m.Key, Headers: admin.ReplayHeaders(m.Headers, by, m.Headers.Get(driver.HeaderDeadLetterReason)), Body: m.Body})
			if err != nil {
				release(chosen[i:])
				return done, nil, fmt.Errorf("replay %s (left in the dead-letter queue): %w", m.ID, err)
			}
		}
		if err := d.Ack(ctx); err != nil {
			release(chosen[i+1:])
			return done, nil, fmt.Errorf("%s %s: removing it from the dead-letter queue failed (a replayed message may be replayed again): %w", verb, d.Message.ID, err)
		}
		done = append(done, toDeadJSON(d, true))
	}
	return done, slices.Sorted(maps.Keys(want)), nil
}

// listDead reads up to f.limit dead letters of s: it peeks where the
// driver can (nothing changes), else receives them and puts them back.
func listDead(ctx context.Context, s *broker.Subscription, f *dlqFlags, bodies bool) ([]deadJSON, error) {
	if out, err := peekDead(ctx, s, f, bodies); !errors.Is(err, errors.ErrUnsupported) {
		return out, err
	}
	ds, err := readDead(ctx, s, f)
	defer release(ds)
	if err != nil {
		return nil, err
	}
	out := make([]deadJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, toDeadJSON(d, bodies))
	}
	return out, nil
}

// peekDead peeks at up to f.limit dead letters of s.
func peekDead(ctx context.Context, s *broker.Subscription, f *dlqFlags, bodies bool) ([]deadJSON, error) {
	out := []deadJSON{}
	for len(out) < f.limit {
		ps, err := s.Peek(ctx, min(f.limit-len(out), 100))
		if err != nil {
			return nil, err // ErrUnsupported only at the first (a subscription with sessions)
		}
		if len(ps) == 0 {
			break
		}
		for _, p := range ps[:min(len(ps), f.limit-len(out))] {
			out = append(out, deadOf(p.Message, p.Attempt, bodies))
		}
	}
	return out, nil
}

// probe reads the entity raw names, then runs the conformance scenarios
// (only, or all) on scratch entities with its settings copied, telling r
// which scenario starts and ends.
func (a *app) probe(ctx context.Context, raw string, only []string, r conformance.Reporter) (probeJSON, error) {
	ent := a.readEntity(ctx, raw)
	h, closeH, err := a.harnessFor(ctx, harnessURL(raw, ent))
	if err != nil {
		return probeJSON{}, err
	}
	defer closeH()
	shortened := copySettings(&h, ent)
	caps, results, err := conformance.Probe(ctx, h, r, only...)
	if err != nil {
		return probeJSON{}, err
	}
	broken := false
	rows := make([]probeRow, 0, len(results))
	for _, r := range results {
		broken = broken || r.Outcome == conformance.Broken
		rows = append(rows, probeRow{Result: r, Declared: declared(r.Scenario, caps)})
	}
	return probeJSON{Broker: redact.String(raw), Entity: ent, Capabilities: caps.String(),
		Scratch: compareScratch(schemeOf(raw), ent, caps, shortened), Results: rows, Broken: broken}, nil
}

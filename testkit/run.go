package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
)

// errCrashBeforeCommit is the injected crash before the commit.
var errCrashBeforeCommit = errors.New("testkit: injected crash before the commit: the transaction is rolled back, the broker delivers the message again")

// Run publishes events, with the faults the Options ask for, and delivers
// them one at a time to h through the kit's inbox (Inbox.Handle), until
// nothing is left to deliver. h is the test's handler; with
// Options.Versions it runs behind the inbox's version checks, and reads
// each event with idem.ParseEvent. Run fails the test (FailNow) for an
// event it cannot publish and for a broker or store failure of its own;
// what h does is in the Report, for the test's assertions (AssertOnce,
// AssertRows).
//
// A test may call Run again, with the same or another handler: the
// database, the inbox's claims and the park carry over, so a second Run of
// the same IDs finds them duplicates.
func (k *Kit[Tx]) Run(h idem.Handler[Tx], events ...Event) *Report {
	k.tb.Helper()
	if h == nil {
		k.tb.Fatal("testkit: Run with a nil handler")
	}
	ctx := k.ctx()
	msgs := make([]*broker.Message, len(events))
	for i, ev := range events {
		m, err := ev.message()
		if err != nil {
			k.tb.Fatalf("testkit: event %d (%q): %v", i, ev.ID, err)
		}
		msgs[i] = m
		if k.messages[m.ID] == nil {
			k.messages[m.ID] = &trace{aggregate: ev.AggregateID, version: ev.Version}
			k.ids = append(k.ids, m.ID)
		}
	}
	order, late := k.plan(msgs)
	rep := &Report{Late: late, Results: map[idem.Result]int{}}
	k.rep = rep
	for _, it := range order {
		m := *it.m
		m.Headers = m.Headers.Clone()
		if err := k.topic.Publish(ctx, &m); err != nil {
			k.tb.Fatalf("testkit: publish %q: %v", m.ID, err)
		}
		rep.Published++
		rep.Order = append(rep.Order, m.ID)
	}

	// Deliver what is deliverable, one at a time; when nothing is, move
	// the clock one step, which makes every retry deliverable. Nothing
	// deliverable after a step: everything is settled.
	poll, cancel := context.WithCancel(ctx)
	cancel()
	handler := k.wrap(h)
	limit := 16 + len(order)*(k.opts.MaxAttempts+4)
	for idle := false; ; {
		ds, err := k.faulty.Receive(poll, 1)
		if err != nil && (!errors.Is(err, context.Canceled) || ctx.Err() != nil) {
			k.tb.Fatalf("testkit: receive: %v", err)
		}
		if len(ds) == 0 {
			if idle {
				break
			}
			idle = true
			k.clock.Advance(step)
			continue
		}
		idle = false
		if rep.Deliveries++; rep.Deliveries > limit {
			k.tb.Fatalf("testkit: %d deliveries and the messages are still not settled\n%s", rep.Deliveries, rep)
		}
		k.handle(ctx, ds[0], handler)
	}
	k.collect(ctx, poll)
	return rep
}

// wrap returns h with the crash before commit, and with a write outside the
// transaction made permanent.
func (k *Kit[Tx]) wrap(h idem.Handler[Tx]) idem.Handler[Tx] {
	return func(ctx context.Context, tx Tx, d *broker.Delivery) error {
		err := h(ctx, tx, d)
		if err != nil {
			if locked(err) {
				return broker.Permanent(fmt.Errorf("%w (testkit: the database is locked by the inbox's own transaction: "+
					"the handler writes through the *sql.DB, outside the transaction it is given; write through tx)", err))
			}
			return err
		}
		t := k.messages[d.Message.ID]
		if t == nil { // not published by Run
			return nil
		}
		t.succeeded++
		if !k.opts.NoCrashBeforeCommit && !t.crashBefore {
			t.crashBefore = true
			t.rolledBack++
			k.rep.CrashesBeforeCommit++
			return errCrashBeforeCommit
		}
		if k.cur != nil {
			k.cur.committed = true
		}
		return nil
	}
}

// locked reports whether err is SQLite's "database is locked" (SQLITE_BUSY
// or SQLITE_LOCKED, with their extended codes).
func locked(err error) bool {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		if code := c.Code() & 0xff; code == 5 || code == 6 {
			return true
		}
	}
	return strings.Contains(err.Error(), "database is locked")
}

// handle hands d to the inbox and records the result.
func (k *Kit[Tx]) handle(ctx context.Context, d *broker.Delivery, h idem.Handler[Tx]) {
	id := d.Message.ID
	r, err := k.inbox.Handle(ctx, d, h)
	if errors.Is(err, errCrashBeforeCommit) {
		return // counted by wrap
	}
	k.rep.Results[r]++
	t := k.messages[id]
	if t != nil && r == idem.ResultEarly {
		t.early = true
	}
	switch {
	case err == nil, r == idem.ResultGapRetried:
	case errors.Is(err, errAckLost): // the crash after commit
	default:
		k.rep.Failures = append(k.rep.Failures, Failure{MessageID: id, Attempt: d.Attempt, Err: err})
		if t != nil {
			t.lastErr, t.lastAttempt = err, d.Attempt
		}
	}
}

// collect reads the dead letters into the report, and the park.
func (k *Kit[Tx]) collect(ctx, poll context.Context) {
	dl, err := k.broker.OpenDeadLetters(topicName, subName, nil)
	if err != nil {
		k.tb.Fatalf("testkit: open the dead letters: %v", err)
	}
	defer dl.Close()
	for {
		ds, err := dl.Receive(poll, 10)
		if err != nil && (!errors.Is(err, context.Canceled) || ctx.Err() != nil) {
			k.tb.Fatalf("testkit: receive the dead letters: %v", err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			dead := DeadLetter{MessageID: d.Message.ID, Reason: d.Message.Headers.Get(driver.HeaderDeadLetterReason)}
			k.rep.DeadLetters = append(k.rep.DeadLetters, dead)
			if t := k.messages[dead.MessageID]; t != nil {
				t.dead = dead.Reason
			}
			if err := d.Ack(ctx); err != nil {
				k.tb.Fatalf("testkit: ack a dead letter: %v", err)
			}
		}
	}
	if k.rep.Parked, err = k.inbox.Parked(ctx, idem.ParkedFilter{}); err != nil {
		k.tb.Fatalf("testkit: list the park: %v", err)
	}
	if k.rep.Early, err = k.early(ctx, k.rep.Parked); err != nil {
		k.tb.Fatalf("testkit: read the early events: %v", err)
	}
}

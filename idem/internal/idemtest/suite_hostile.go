package idemtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/outbox"
)

// Hostile is an outbox holding rows that no relay can publish beside good
// rows, as WriteHostile writes it.
type Hostile struct {
	bad  int             // rows no relay can publish
	good map[string]bool // IDs of the other aggregates' rows: all to be published
	held map[string]bool // IDs of the good rows behind a bad one: none to be
}

// Good is how many messages the relay is to publish.
func (h *Hostile) Good() int { return len(h.good) }

// Bad is how many rows the relay is to quarantine, and Held how many good
// rows it is to leave pending behind them.
func (h *Hostile) Bad() int  { return h.bad }
func (h *Hostile) Held() int { return len(h.held) }

// WriteHostile checks that Outbox.Add refuses, with ErrInvalidMessage,
// every message a relay would not publish (a message ID of white space,
// an aggregate ID that is empty or white space, headers the broker or the
// relay reserves), then writes such rows through plain SQL, as another
// writer can (message IDs of one space, of U+00A0 and empty; an empty
// aggregate ID; headers of a number, of an array and of text that is not
// JSON), each in its own transaction and in an aggregate of its own with a
// good row added behind it (but the one without an aggregate ID), and
// between them 30 good rows on 10 other aggregates. (The refused adds are
// rolled back: where Add took them, the rows written after are the test.)
func WriteHostile[Tx any](e *OutboxEnv[Tx]) *Hostile {
	e.T.Helper()
	t := e.T
	for name, m := range map[string]*outbox.Message{
		"ID of one space":               {ID: " ", AggregateID: "a"},
		"ID of U+00A0":                  {ID: "\u00a0", AggregateID: "a"},
		"empty aggregate ID":            {ID: "m", AggregateID: ""},
		"aggregate ID of white space":   {ID: "m", AggregateID: " \u00a0"},
		"reserved header":               {ID: "m", AggregateID: "a", Headers: broker.Headers{{"wary-key", "x"}}},
		"empty header name":             {ID: "m", AggregateID: "a", Headers: broker.Headers{{"", "x"}}},
		"header the relay writes":       {ID: "m", AggregateID: "a", Headers: broker.Headers{{broker.HeaderSequence, "7"}}},
		"header value that is not UTF8": {ID: "m", AggregateID: "a", Headers: broker.Headers{{"h", "\xff"}}},
	} {
		tx, err := e.Driver.Begin(e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Outbox.Add(e.Ctx, tx, m); !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("Add(%s) = %v, want ErrInvalidMessage", name, err)
		}
		if err := e.Driver.Rollback(e.Ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	h := &Hostile{good: map[string]bool{}, held: map[string]bool{}}
	good := func(round int) {
		for a := range 10 {
			id := fmt.Sprintf("ok-%d-%d", a, round)
			e.Add(OM(id, fmt.Sprintf("ok-%d", a), int64(round+1), "ok"))
			h.good[id] = true
		}
	}
	good(0)
	for i, bad := range []struct{ id, aggregate, headers string }{
		{" ", "bad-0", "{}"},
		{"\u00a0", "bad-1", "{}"},
		{"", "bad-2", "{}"},
		{"no-aggregate", "", "{}"},
		{"number-header", "bad-4", `{"n":1}`},
		{"array-headers", "bad-5", `["a","b"]`},
		{"text-headers", "bad-6", "not json"},
	} {
		// A seed row gives the hostile row its times in the store's own
		// format, in the same transaction.
		seed := fmt.Sprintf("seed-%d", i)
		h.good[seed] = true
		e.InTx(func(tx Tx) error {
			if _, err := e.Outbox.Add(e.Ctx, tx, OM(seed, seed, 1, "seed")); err != nil {
				return err
			}
			if err := e.DB.Exec(e.Ctx, tx, `INSERT INTO wary_outbox_aggregates (aggregate_id, last_sequence) VALUES ($1, 1)`, bad.aggregate); err != nil {
				return err
			}
			return e.DB.Exec(e.Ctx, tx, `INSERT INTO wary_outbox (message_id, aggregate_id, version, sequence, type, headers, payload, created_at, next_attempt)
				SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), 1, 1, type, CAST($3 AS TEXT), payload, created_at, next_attempt
				FROM wary_outbox WHERE message_id = $4`, bad.id, bad.aggregate, bad.headers, seed)
		})
		h.bad++
		if bad.aggregate != "" {
			id := fmt.Sprintf("held-%d", i)
			e.Add(OM(id, bad.aggregate, 2, "held"))
			h.held[id] = true
		}
		if i == 3 {
			good(1)
		}
	}
	good(2)
	return h
}

// Check fails t unless got (the messages the relay published) holds every
// good row and nothing else, each hostile row is quarantined with an
// error naming the invalid message, and the good rows behind them are
// pending.
func (h *Hostile) Check(t testing.TB, got []*broker.Message, rows []outbox.Row) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range got {
		if !h.good[m.ID] {
			t.Errorf("published %q (aggregate %q), which is not a good row of a free aggregate", m.ID, m.Key)
		}
		seen[m.ID] = true
	}
	if len(seen) != len(h.good) {
		t.Errorf("published %d distinct good rows, want %d", len(seen), len(h.good))
	}
	quarantined, pending := 0, 0
	for _, r := range rows {
		switch {
		case h.held[r.ID]:
			if r.State != outbox.Pending {
				t.Errorf("row %s behind a hostile row: %s, want pending", r.ID, r.State)
			}
			pending++
		case r.State == outbox.Quarantined:
			if !strings.Contains(r.LastError, outbox.ErrInvalidMessage.Error()) {
				t.Errorf("row %d (message %q, aggregate %q) quarantined with %q, want the invalid message named", r.RowID, r.ID, r.AggregateID, r.LastError)
			}
			quarantined++
		case r.State == outbox.Pending:
			t.Errorf("row %d (message %q, aggregate %q) pending", r.RowID, r.ID, r.AggregateID)
		}
	}
	if quarantined != h.bad || pending != len(h.held) {
		t.Errorf("%d rows quarantined, %d held pending; want %d and %d", quarantined, pending, h.bad, len(h.held))
	}
}

// testHostile: rows that no relay can publish, refused by Add and written
// by plain SQL, are quarantined with their error, each holding only its
// aggregate, while the polling relay publishes every other aggregate's
// rows.
func testHostile[Tx any](t *testing.T, f Factory[Tx], b OutboxBroker, _ OutboxCaps) {
	e := SetupOutbox(t, f)
	sub := b.Subscribe(t)
	h := WriteHostile(e)
	r := e.Relay(b.Topic, nil)
	if _, err := r.Drain(e.Ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	h.Check(t, Drain(t, sub), e.Rows(outbox.Filter{}))
	if s := r.Stats(); s.Quarantines != int64(h.Bad()) {
		t.Errorf("relay stats %+v, want %d quarantines", s, h.Bad())
	}
}

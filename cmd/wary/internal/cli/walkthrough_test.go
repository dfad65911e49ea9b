package cli_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
)

var quiet = slog.New(slog.DiscardHandler)

// shopStore is a store under test, a *postgres.Store or a *sqlite.Store
// (pgShop, sqliteShop), with idem's constructors bound to it: the tests
// hand the store to idem as a program does, and never call its driver.
type shopStore[Tx any] struct {
	store     any
	newInbox  func(consumer string, caps capability.Subscription, o *idem.Options) (*idem.Inbox[Tx], error)
	newOutbox func() (*outbox.Outbox[Tx], error)
	newRelay  func(top *broker.Topic, o *outbox.RelayOptions) (*outbox.Relay, error)
	// inTx runs f in a transaction, committed if f succeeds.
	inTx func(ctx context.Context, f func(Tx) error) error
}

// park parks msgs for consumer, in order, through an inbox whose handler
// parks each message it is given at once: each aggregate's first message
// is parked with reason, the later ones held behind it.
func park[Tx any](t *testing.T, st shopStore[Tx], consumer, reason string, msgs ...*broker.Message) {
	t.Helper()
	in, err := st.newInbox(consumer, capability.Subscription{}, &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, Tx, *broker.Delivery) error { return &idem.ParkError{Reason: reason, Now: true} }
	for _, m := range msgs {
		if r, err := in.Handle(t.Context(), broker.NewDetachedDelivery(m, 1), h); r != idem.ResultParked && r != idem.ResultHeld {
			t.Fatalf("park %s: %v (%v), want parked or held", m.ID, r, err)
		}
	}
}

// pipe is one pipeline under test: a store (and the flags that name it
// to wary), a topic (and its URL) and the consumer's subscription on it.
type pipe[Tx any] struct {
	store     shopStore[Tx]
	storeArgs []string
	topicURL  string
	topic     *broker.Topic
	sub       *broker.Subscription
}

func (p *pipe[Tx]) args(a ...string) []string { return append(a, p.storeArgs...) }

func event(id, agg string, version int64) *broker.Message {
	return &broker.Message{ID: id, Key: agg, Body: []byte("body of " + id), Headers: broker.Headers{
		{broker.HeaderAggregateID, agg}, {broker.HeaderAggregateVersion, strconv.FormatInt(version, 10)}, {"traceparent", "00-" + id}}}
}

// receive receives n deliveries.
func receive(t *testing.T, s *broker.Subscription, n int) []*broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []*broker.Delivery
	for len(out) < n {
		ds, err := s.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("received %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

func publish(t *testing.T, top *broker.Topic, msgs ...*broker.Message) {
	t.Helper()
	if err := top.Publish(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// parkedWalkthrough: something parked, seen, replayed, processed.
func parkedWalkthrough[Tx any](t *testing.T, w *wary, p *pipe[Tx]) {
	ctx := t.Context()
	const consumer = "billing"
	in, err := p.store.newInbox(consumer, p.sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	failing := true
	h := func(_ context.Context, _ Tx, d *broker.Delivery) error {
		if failing {
			return &idem.ParkError{Reason: "gap: order-1 at version 0", Now: true}
		}
		applied = append(applied, d.Message.ID)
		return nil
	}
	handle := func(ds []*broker.Delivery) []idem.Result {
		var rs []idem.Result
		for _, d := range ds {
			r, err := in.Handle(ctx, d, h)
			if err != nil && !errors.Is(err, broker.ErrInvalid) {
				var pe *idem.ParkError
				if !errors.As(err, &pe) {
					t.Fatalf("handle %s: %v", d.Message.ID, err)
				}
			}
			rs = append(rs, r)
		}
		return rs
	}
	publish(t, p.topic, event("order-1/placed", "order-1", 1))
	if rs := handle(receive(t, p.sub, 1)); rs[0] != idem.ResultParked {
		t.Fatalf("first event: %v, want parked", rs)
	}
	publish(t, p.topic, event("order-1/paid", "order-1", 2))
	if rs := handle(receive(t, p.sub, 1)); rs[0] != idem.ResultHeld {
		t.Fatalf("second event: %v, want held behind the parked one", rs)
	}

	// See it.
	r := w.want(cli.ExitFinding, p.args("parked", "list")...)
	r.has(t, "order-1/placed", "order-1/paid", "gap: order-1 at version 0")
	var listed []struct {
		ID        int64  `json:"id"`
		MessageID string `json:"message_id"`
	}
	w.want(cli.ExitFinding, p.args("parked", "list", "--consumer", consumer, "--json")...).json(t, &listed)
	if len(listed) != 2 || listed[0].MessageID != "order-1/placed" {
		t.Fatalf("parked list --json: %+v, want order-1/placed then order-1/paid", listed)
	}
	// IDs are unique: show needs no --consumer, and with one it checks it.
	r = w.want(cli.ExitOK, p.args("parked", "show", strconv.FormatInt(listed[0].ID, 10))...)
	r.has(t, "traceparent: 00-order-1/placed", "body of order-1/placed", consumer)
	w.want(cli.ExitOK, p.args("parked", "show", strconv.FormatInt(listed[0].ID, 10), "--consumer", consumer)...).has(t, "order-1/placed")
	if r := w.want(cli.ExitError, p.args("parked", "show", strconv.FormatInt(listed[0].ID, 10), "--consumer", "someone-else")...); !strings.Contains(r.errout, `consumer "someone-else" has no parked message`) {
		t.Errorf("show with another consumer: stderr %q", r.errout)
	}
	if r := w.want(cli.ExitError, p.args("parked", "show", "999999")...); !strings.Contains(r.errout, "no parked message 999999") {
		t.Errorf("show of a missing ID: stderr %q", r.errout)
	}

	// Replay asks first; "no" leaves everything parked.
	w.stdin = "no\n"
	replay := p.args("parked", "replay", "--consumer", consumer, "--aggregate", "order-1", "--to", p.topicURL)
	if r := w.want(cli.ExitDeclined, replay...); !strings.Contains(r.errout, "not confirmed") {
		t.Errorf("stderr %q does not say the replay was not confirmed", r.errout)
	}
	w.stdin = "y\n"
	w.want(cli.ExitFinding, p.args("parked", "list")...)
	r = w.want(cli.ExitOK, replay...)
	r.has(t, "replayed 2 message(s) of 1 aggregate(s)")

	// The consumer gets them back, with their IDs, and processes them:
	// their claims are gone.
	failing = false
	ds := receive(t, p.sub, 2)
	why := map[string]string{"order-1/placed": "gap: order-1 at version 0", "order-1/paid": "held behind a parked message"}
	for _, d := range ds {
		if by := d.Message.Headers.Get(driver.HeaderReplayedBy); !strings.Contains(by, "@") || !strings.Contains(by, why[d.Message.ID]) {
			t.Errorf("%s: %s = %q, want who replayed it and why it was parked", d.Message.ID, driver.HeaderReplayedBy, by)
		}
		if d.Message.Headers.Get("traceparent") != "00-"+d.Message.ID || string(d.Message.Body) != "body of "+d.Message.ID {
			t.Errorf("%s came back changed: %v %q", d.Message.ID, d.Message.Headers, d.Message.Body)
		}
	}
	slices.SortFunc(ds, func(a, b *broker.Delivery) int {
		return strings.Compare(a.Message.Headers.Get(broker.HeaderAggregateVersion), b.Message.Headers.Get(broker.HeaderAggregateVersion))
	})
	if rs := handle(ds); rs[0] != idem.ResultApplied || rs[1] != idem.ResultApplied {
		t.Fatalf("replayed events: %v, want both applied", rs)
	}
	w.want(cli.ExitOK, p.args("parked", "list")...).has(t, "nothing parked")

	// Discard.
	failing = true
	publish(t, p.topic, event("order-2/placed", "order-2", 1))
	handle(receive(t, p.sub, 1))
	w.want(cli.ExitFinding, p.args("parked", "list", "--consumer", consumer, "--aggregate", "order-2")...)
	w.want(cli.ExitError, p.args("parked", "discard", "--consumer", consumer)...) // nothing chosen
	w.want(cli.ExitOK, p.args("parked", "discard", "--consumer", consumer, "--aggregate", "order-2", "--yes")...).has(t, "discarded 1")
	w.want(cli.ExitOK, p.args("parked", "list")...)
}

// addRow commits one outbox row of aggregate agg.
func addRow[Tx any](t *testing.T, st shopStore[Tx], agg string) {
	t.Helper()
	addRows(t, st, &outbox.Message{AggregateID: agg, Version: 1, Type: "order.placed", Payload: []byte("{}")})
}

// addRows adds msgs to the outbox in one transaction.
func addRows[Tx any](t *testing.T, st shopStore[Tx], msgs ...*outbox.Message) {
	t.Helper()
	ctx := t.Context()
	ob, err := st.newOutbox()
	if err != nil {
		t.Fatal(err)
	}
	err = st.inTx(ctx, func(tx Tx) error {
		_, err := ob.Add(ctx, tx, msgs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// outboxWalkthrough: a quarantined row seen, requeued, discarded.
func outboxWalkthrough[Tx any](t *testing.T, w *wary, p *pipe[Tx]) {
	ctx := t.Context()
	agg := unique("order")
	addRow(t, p.store, agg)
	// A topic that takes no message this large: the relay quarantines
	// the row at its first failure.
	small := mustOpenTopic(t, "mem://"+unique("small")+"?maxsize=10")
	relay, err := p.store.newRelay(small, &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	w.want(cli.ExitFinding, p.args("outbox", "status")...).has(t, "quarantined 1")
	var rows []struct {
		RowID     int64  `json:"row_id"`
		State     string `json:"state"`
		LastError string `json:"last_error"`
	}
	w.want(cli.ExitOK, p.args("outbox", "list", "--aggregate", agg, "--json")...).json(t, &rows)
	if len(rows) != 1 || rows[0].State != "quarantined" || rows[0].LastError == "" {
		t.Fatalf("outbox list: %+v, want one quarantined row with its error", rows)
	}
	id := strconv.FormatInt(rows[0].RowID, 10)
	w.want(cli.ExitOK, p.args("outbox", "requeue", id, "--yes")...).has(t, "requeued 1 row(s)")
	w.want(cli.ExitOK, p.args("outbox", "list", "--aggregate", agg, "--state", "pending")...).has(t, agg)
	w.want(cli.ExitOK, p.args("outbox", "discard", id, "--yes")...).has(t, "discarded 1 row(s)")
	w.want(cli.ExitOK, p.args("outbox", "status")...).has(t, "quarantined 0")
	// Requeueing a discarded row does nothing, and says so.
	w.want(cli.ExitFinding, p.args("outbox", "requeue", id, "--yes")...).has(t, "skipped ["+id+"]")
}

// dlqWalkthrough: a dead letter seen, replayed with its ID and headers,
// another discarded.
//
// subURL is the consumer's subscription URL, which the dlq commands take;
// wait is how long each command waits for dead letters to arrive.
func dlqWalkthrough(t *testing.T, w *wary, top *broker.Topic, topicURL string, sub *broker.Subscription, subURL, wait string) {
	ctx := t.Context()
	id := unique("dead")
	publish(t, top, event(id, "order-9", 1))
	d := receive(t, sub, 1)[0]
	if err := d.DeadLetter(ctx, "poison: cannot parse"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // list puts them back
		w.want(cli.ExitFinding, "dlq", "list", subURL, "--wait", wait).has(t, id, "poison: cannot parse")
	}
	w.want(cli.ExitFinding, "dlq", "replay", subURL, "--id", "no-such-id", "--to", topicURL, "--yes", "--wait", wait).has(t, "not found: [no-such-id]")
	w.want(cli.ExitOK, "dlq", "replay", subURL, "--id", id, "--to", topicURL, "--yes", "--wait", wait).has(t, "replay: 1 dead letter(s)")
	back := receive(t, sub, 1)[0]
	m := back.Message
	if m.ID != id || string(m.Body) != "body of "+id || m.Headers.Get("traceparent") != "00-"+id || m.Key != "order-9" {
		t.Errorf("replayed message changed: %+v", m)
	}
	if by := m.Headers.Get(driver.HeaderReplayedBy); !strings.Contains(by, "poison: cannot parse") {
		t.Errorf("%s = %q, want who and why", driver.HeaderReplayedBy, by)
	}
	if err := back.DeadLetter(ctx, "still poison"); err != nil {
		t.Fatal(err)
	}
	w.want(cli.ExitOK, "dlq", "discard", subURL, "--all", "--yes", "--wait", wait).has(t, "discard: 1 dead letter(s)", id)
	w.want(cli.ExitOK, "dlq", "list", subURL, "--wait", wait).has(t, "no dead letters")
}

func mustOpenTopic(t *testing.T, u string) *broker.Topic {
	t.Helper()
	top, err := broker.OpenTopic(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	return top
}

func mustOpenSub(t *testing.T, u string) *broker.Subscription {
	t.Helper()
	s, err := broker.OpenSubscription(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

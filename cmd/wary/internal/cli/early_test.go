package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// holder is an inbox with version checks on a memory topic (no order:
// idem.GapsAuto holds gaps in the store), over a version table the test
// made, with a handler that only counts.
type holder[Tx any] struct {
	t       *testing.T
	in      *idem.Inbox[Tx]
	topic   *broker.Topic
	sub     *broker.Subscription
	applied int
}

// newHolder makes table (id, version), with each of aggs at version 1,
// through exec, and an inbox of consumer that checks versions in it.
func newHolder[Tx any](t *testing.T, st shopStore[Tx], exec func(string) error, table, consumer string, aggs ...string) *holder[Tx] {
	t.Helper()
	if err := exec("CREATE TABLE " + table + " (id TEXT PRIMARY KEY, version BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, a := range aggs {
		if err := exec("INSERT INTO " + table + " (id, version) VALUES ('" + a + "', 1)"); err != nil {
			t.Fatal(err)
		}
	}
	name := "mem://" + unique("early")
	h := &holder[Tx]{t: t, topic: mustOpenTopic(t, name), sub: mustOpenSub(t, name+"/"+consumer)}
	var err error
	h.in, err = st.newInbox(consumer, h.sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet},
		Versions: idem.VersionTable{Table: table, IDColumn: "id", VersionColumn: "version"}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// deliver publishes the events, receives and handles them, and returns
// their results.
func (h *holder[Tx]) deliver(evs ...*broker.Message) []idem.Result {
	h.t.Helper()
	publish(h.t, h.topic, evs...)
	var rs []idem.Result
	for _, d := range receive(h.t, h.sub, len(evs)) {
		r, err := h.in.Handle(h.t.Context(), d, func(context.Context, Tx, *broker.Delivery) error { h.applied++; return nil })
		if err != nil {
			h.t.Fatalf("handle %s: %v", d.Message.ID, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func wantResults(t *testing.T, got []idem.Result, want ...idem.Result) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("results %v, want %v", got, want)
		}
	}
}

// earlyWalkthrough: events held ahead of their aggregate are listed by
// wary parked early (text and JSON) with the version awaited, how many,
// and when they are parked; a hold past --early-limit is overdue (exit 1);
// once the awaited event is applied, the aggregate leaves the list.
func earlyWalkthrough[Tx any](t *testing.T, w *wary, st shopStore[Tx], storeArgs []string, exec func(string) error, table string) {
	const consumer = "shipping"
	h := newHolder(t, st, exec, table, consumer, "order-1", "order-2")
	args := func(a ...string) []string { return append(append([]string{"parked", "early"}, a...), storeArgs...) }
	w.want(cli.ExitOK, args()...).has(t, "no early events held")

	wantResults(t, h.deliver(event("o1-v3", "order-1", 3), event("o1-v4", "order-1", 4)), idem.ResultEarly, idem.ResultEarly)
	wantResults(t, h.deliver(event("o2-v2", "order-2", 2), event("o2-v3", "order-2", 3)), idem.ResultApplied, idem.ResultApplied)
	wantResults(t, h.deliver(event("o2-v5", "order-2", 5)), idem.ResultEarly)

	r := w.want(cli.ExitOK, args()...)
	r.has(t, "CONSUMER", "AWAITS", "PARKED AT", "order-1", "v2", "v3-v4", "order-2", "v4", "v5-v5")
	var listed []struct {
		Consumer     string `json:"consumer"`
		AggregateID  string `json:"aggregate_id"`
		Awaited      int64  `json:"awaited"`
		FirstVersion int64  `json:"first_version"`
		LastVersion  int64  `json:"last_version"`
		Held         int    `json:"held"`
		Overdue      bool   `json:"overdue"`
	}
	w.want(cli.ExitOK, args("--consumer", consumer, "--json")...).json(t, &listed)
	if len(listed) != 2 || listed[0].AggregateID != "order-1" || listed[0].Awaited != 2 || listed[0].Held != 2 || listed[0].FirstVersion != 3 ||
		listed[0].LastVersion != 4 || listed[1].AggregateID != "order-2" || listed[1].Awaited != 4 || listed[1].Held != 1 || listed[0].Overdue {
		t.Fatalf("parked early --json: %+v", listed)
	}
	w.want(cli.ExitOK, args("--limit", "1", "--json")...).json(t, &listed)
	if len(listed) != 1 || listed[0].AggregateID != "order-1" {
		t.Errorf("--limit 1: %+v, want the oldest hold (order-1)", listed)
	}
	w.want(cli.ExitOK, args("--consumer", "someone-else")...).has(t, "no early events held")
	// Past the early limit a hold is overdue: exit 1, and said so.
	w.want(cli.ExitFinding, args("--early-limit", "1ns")...).has(t, "(overdue)")

	// The awaited event comes: order-1's held events are applied after it.
	wantResults(t, h.deliver(event("o1-v2", "order-1", 2)), idem.ResultApplied)
	if h.applied != 5 {
		t.Errorf("applied %d, want 5 (o2-v2, o2-v3, o1-v2 and the two held after it)", h.applied)
	}
	r = w.want(cli.ExitOK, args()...)
	if strings.Contains(r.out, "order-1") || !strings.Contains(r.out, "order-2") {
		t.Errorf("after order-1's gap closed:\n%s", r.out)
	}
}

func TestSQLiteParkedEarly(t *testing.T) {
	p := sqlitePipe(t)
	db := p.store.store.(*sqlite.Store).DB()
	earlyWalkthrough(t, newWary(t), p.store, p.storeArgs, func(q string) error { _, err := db.Exec(q); return err }, "ship_versions")
}

func TestPostgresParkedEarly(t *testing.T) {
	st, args := pgStore(t)
	schema := args[len(args)-1]
	earlyWalkthrough(t, newWary(t), pgShop(st), args, func(q string) error { _, err := st.Pool().Exec(t.Context(), q); return err },
		schema+".ship_versions")
}

package idemtest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
)

// testParkedWithoutBodies: ListParked with NoBody lists the messages as
// without it, in the same order and pages, with Body nil; a listing of one
// message (ID) with its body still reads it.
func testParkedWithoutBodies[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	body := bytes.Repeat([]byte("b"), 4096)
	e.InTx(func(tx Tx) error {
		now := time.Now()
		for i := range 6 {
			agg := fmt.Sprintf("agg-%d", i/2)
			m := Msg(fmt.Sprintf("m%d", i), "x", agg, int64(i%2+1))
			if err := e.Driver.Park(e.Ctx, tx, &idem.Parked{Consumer: "list", MessageID: m.ID, AggregateID: agg, Version: int64(i%2 + 1),
				Key: agg, Headers: m.Headers, Body: body, Reason: "test", Attempts: 2, FirstSeen: now, LastSeen: now}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, flt := range []idem.ParkedFilter{{}, {Limit: 3}, {AfterAggregate: "agg-0", HasAfter: true, Limit: 2}, {AggregateID: "agg-2", HasAggregate: true}} {
		full, err := e.Driver.ListParked(e.Ctx, "list", flt)
		if err != nil {
			t.Fatal(err)
		}
		noBody := flt
		noBody.NoBody = true
		bare, err := e.Driver.ListParked(e.Ctx, "list", noBody)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) == 0 || len(bare) != len(full) {
			t.Fatalf("%+v: %d messages without bodies, %d with", flt, len(bare), len(full))
		}
		for i := range full {
			if !bytes.Equal(full[i].Body, body) {
				t.Errorf("%+v: message %s: body of %d bytes, want %d", flt, full[i].MessageID, len(full[i].Body), len(body))
			}
			if bare[i].Body != nil {
				t.Errorf("%+v, NoBody: message %s has a body of %d bytes", flt, bare[i].MessageID, len(bare[i].Body))
			}
			want := full[i]
			want.Body = nil
			if got := bare[i]; got.ID != want.ID || got.MessageID != want.MessageID || got.AggregateID != want.AggregateID ||
				got.Version != want.Version || got.Reason != want.Reason || got.Attempts != want.Attempts || len(got.Headers) != len(want.Headers) {
				t.Errorf("%+v, NoBody: message %d is %+v, want %+v", flt, i, got, want)
			}
		}
	}
	one, err := e.Driver.ListParked(e.Ctx, "list", idem.ParkedFilter{ID: 3})
	if err != nil || len(one) != 1 || !bytes.Equal(one[0].Body, body) {
		t.Fatalf("parked message 3 with its body: %d message(s), %v", len(one), err)
	}
}

// testOutboxListWithoutPayloads: ListOutbox with NoPayload lists the rows
// with Payload nil, and AfterRow pages through them in row order.
func testOutboxListWithoutPayloads[Tx any](t *testing.T, f Factory[Tx], _ OutboxBroker, _ OutboxCaps) {
	e := SetupOutbox(t, f)
	for i := range 5 {
		e.Add(OM(fmt.Sprintf("r%d", i), "a", int64(i+1), "payload"))
	}
	all := e.Rows(outbox.Filter{})
	if len(all) != 5 {
		t.Fatalf("%d rows, want 5", len(all))
	}
	var got []outbox.Row
	for f, n := (outbox.Filter{Limit: 2, NoPayload: true}), 0; ; n++ {
		page := e.Rows(f)
		if len(page) == 0 {
			break
		}
		if n == len(all) {
			t.Fatalf("AfterRow %d: the pages do not end", f.AfterRow)
		}
		got = append(got, page...)
		f.AfterRow = page[len(page)-1].RowID
	}
	if len(got) != len(all) {
		t.Fatalf("paged by AfterRow: %d rows, want %d", len(got), len(all))
	}
	for i, r := range got {
		if r.RowID != all[i].RowID || r.ID != all[i].ID || r.Sequence != all[i].Sequence || string(all[i].Payload) != "payload" {
			t.Errorf("row %d: %+v, want %+v", i, r, all[i])
		}
		if r.Payload != nil {
			t.Errorf("row %d, NoPayload: a payload of %d bytes", r.RowID, len(r.Payload))
		}
	}
}

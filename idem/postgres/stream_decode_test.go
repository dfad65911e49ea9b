package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/wary-go/wary/idem/outbox"
)

// streamedRow is a row as pgoutput sends it in text format, its
// relation's columns in the publication's order.
func streamedRow(cols map[string]string, null ...string) (*pglogrepl.RelationMessage, *pglogrepl.TupleData) {
	names := []string{"id", "message_id", "aggregate_id", "version", "sequence", "type", "headers", "payload",
		"state", "attempts", "created_at", "next_attempt", "last_error", "claims_only", "sent_at"}
	rel := &pglogrepl.RelationMessage{}
	t := &pglogrepl.TupleData{}
	for _, n := range names {
		rel.Columns = append(rel.Columns, &pglogrepl.RelationMessageColumn{Name: n})
		c := &pglogrepl.TupleDataColumn{DataType: 't', Data: []byte(cols[n])}
		for _, z := range null {
			if z == n {
				c = &pglogrepl.TupleDataColumn{DataType: 'n'}
			}
		}
		t.Columns = append(t.Columns, c)
	}
	return rel, t
}

func goodColumns() map[string]string {
	return map[string]string{"id": "42", "message_id": "m-1", "aggregate_id": "agg-7", "version": "3", "sequence": "9",
		"type": "order.placed", "headers": `{"k":"v"}`, "payload": `\x7061796c6f6164`, "state": "0", "attempts": "2",
		"created_at": "2026-12-06 21:19:00.123456+00", "next_attempt": "2026-12-06 21:19:01+00", "last_error": "",
		"claims_only": "f", "sent_at": ""}
}

func TestDecodeRow(t *testing.T) {
	cols := goodColumns()
	rel, tup := streamedRow(cols, "sent_at")
	r, left, err := decodeRow(rel, tup)
	if err != nil || left || r.Invalid != nil {
		t.Fatalf("decodeRow: %v, left %v, invalid %v", err, left, r.Invalid)
	}
	want := outbox.Row{RowID: 42, Sequence: 9, Attempts: 2,
		CreatedAt:   time.Date(2026, 12, 6, 21, 19, 0, 123456000, time.UTC),
		NextAttempt: time.Date(2026, 12, 6, 21, 19, 1, 0, time.UTC)}
	want.ID, want.AggregateID, want.Version, want.Type = "m-1", "agg-7", 3, "order.placed"
	if r.RowID != want.RowID || r.Sequence != want.Sequence || r.Attempts != want.Attempts || r.ID != want.ID ||
		r.AggregateID != want.AggregateID || r.Version != want.Version || r.Type != want.Type ||
		string(r.Payload) != "payload" || r.Headers["k"] != "v" || len(r.Headers) != 1 ||
		!r.CreatedAt.Equal(want.CreatedAt) || !r.NextAttempt.Equal(want.NextAttempt) || r.State != 0 {
		t.Fatalf("decodeRow = %+v", r)
	}
	// The row keeps nothing of the tuple's buffers, which pglogrepl
	// reuses for nothing but the caller may.
	for _, c := range tup.Columns {
		clear(c.Data)
	}
	if r.ID != "m-1" || r.AggregateID != "agg-7" || r.Type != "order.placed" || string(r.Payload) != "payload" {
		t.Fatalf("the row shares the tuple's bytes: %+v", r)
	}

	cols["claims_only"] = "t"
	if _, left, err := decodeRow(streamedRow(cols)); err != nil || !left {
		t.Fatalf("claims_only: left %v, %v", left, err)
	}
	for _, bad := range []struct{ col, v string }{{"version", "x"}, {"payload", "7061"}, {"payload", `\xzz`},
		{"created_at", "yesterday"}, {"attempts", "1.5"}, {"headers", "[1]"}} {
		cols := goodColumns()
		cols[bad.col] = bad.v
		r, _, err := decodeRow(streamedRow(cols))
		if err != nil || !errors.Is(r.Invalid, outbox.ErrInvalidMessage) || r.RowID != 42 {
			t.Errorf("%s=%q: err %v, invalid %v", bad.col, bad.v, err, r.Invalid)
		}
	}
	cols = goodColumns()
	cols["id"] = "x"
	if _, _, err := decodeRow(streamedRow(cols)); err == nil {
		t.Error("a row without its ID decoded")
	}
}

// BenchmarkDecodeRow is the stream's decoding of one outbox row,
// pglogrepl's parsing left out.
func BenchmarkDecodeRow(b *testing.B) {
	cols := goodColumns()
	cols["headers"], cols["version"] = "{}", "0" // as BenchmarkRelayRabbit's rows
	rel, tup := streamedRow(cols, "sent_at")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeRow(rel, tup); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseTime holds the hand-read timestamps to time.Parse's results.
func TestParseTime(t *testing.T) {
	for _, v := range []string{"2026-12-06 21:19:00+00", "2026-12-06 21:19:00.1+00", "2026-12-06 21:19:00.123456+00",
		"2026-12-06 21:19:00.123456789+00", "2024-02-29 00:00:00+00", "0001-01-01 00:00:00+00", "1969-12-31 23:59:59.999999+00",
		"2026-04-31 10:00:00+00", "2025-02-29 10:00:00+00", "2026-12-06 24:00:00+00", "2026-13-06 21:19:00+00",
		"2026-12-06 21:19:00+05:30", "2026-12-06 21:19:00.+00", "2026-12-06 21:19:00.1234567890+00", "2026-12-06 21:19:0x+00",
		"infinity", "", "2026-12-06T21:19:00+00", "2026-12-06 21:19:00 +00"} {
		got, gerr := parseTime([]byte(v))
		want, werr := time.Parse("2006-01-02 15:04:05.999999999-07", v)
		if (gerr == nil) != (werr == nil) || got != want {
			t.Errorf("%q: got %v (%v), time.Parse %v (%v)", v, got, gerr, want, werr)
		}
	}
}

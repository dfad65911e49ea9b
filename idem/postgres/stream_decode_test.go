package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/wary-go/wary/idem/outbox"
)

// streamedRow is a row as pgoutput sends it in text format, its
// relation's columns in the publication's order, read by parseInsert.
func streamedRow(cols map[string]string, null ...string) (*pglogrepl.RelationMessage, []tupleCol) {
	rel, msg := insertMessage(cols, null...)
	id, tup, err := parseInsert(msg, nil)
	if err != nil || id != rel.RelationID {
		panic(fmt.Sprintf("parseInsert: relation %d, %v", id, err))
	}
	return rel, tup
}

// insertMessage is the insert message of streamedRow's row.
func insertMessage(cols map[string]string, null ...string) (*pglogrepl.RelationMessage, []byte) {
	names := []string{"id", "message_id", "aggregate_id", "version", "sequence", "type", "headers", "payload",
		"state", "attempts", "created_at", "next_attempt", "last_error", "claims_only", "sent_at"}
	rel := &pglogrepl.RelationMessage{RelationID: 16385}
	msg := binary.BigEndian.AppendUint32([]byte{'I'}, rel.RelationID)
	msg = binary.BigEndian.AppendUint16(append(msg, 'N'), uint16(len(names)))
	for _, n := range names {
		rel.Columns = append(rel.Columns, &pglogrepl.RelationMessageColumn{Name: n})
		if slices.Contains(null, n) {
			msg = append(msg, 'n')
			continue
		}
		msg = binary.BigEndian.AppendUint32(append(msg, 't'), uint32(len(cols[n])))
		msg = append(msg, cols[n]...)
	}
	return rel, msg
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
		string(r.Payload) != "payload" || r.Headers.Get("k") != "v" || r.Headers.Len() != 1 ||
		!r.CreatedAt.Equal(want.CreatedAt) || !r.NextAttempt.Equal(want.NextAttempt) || r.State != 0 {
		t.Fatalf("decodeRow = %+v", r)
	}
	// The row keeps nothing of the message's bytes, which the
	// connection reuses for the next one.
	for _, c := range tup {
		clear(c.data)
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

// TestParseInsert holds parseInsert to pglogrepl's reading of the same
// message, and refuses a message cut short anywhere.
func TestParseInsert(t *testing.T) {
	rel, msg := insertMessage(goodColumns(), "sent_at", "last_error")
	id, cols, err := parseInsert(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pglogrepl.Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	ins := m.(*pglogrepl.InsertMessage)
	if id != ins.RelationID || id != rel.RelationID || len(cols) != len(ins.Tuple.Columns) {
		t.Fatalf("relation %d, %d columns; pglogrepl: %d, %d", id, len(cols), ins.RelationID, len(ins.Tuple.Columns))
	}
	for i, c := range ins.Tuple.Columns {
		if cols[i].kind != c.DataType || string(cols[i].data) != string(c.Data) {
			t.Errorf("column %d: %q %q; pglogrepl: %q %q", i, cols[i].kind, cols[i].data, c.DataType, c.Data)
		}
	}
	for n := range len(msg) {
		if _, _, err := parseInsert(msg[:n], cols); err == nil {
			t.Errorf("the message cut at %d of %d bytes was read", n, len(msg))
		}
	}
	bad := slices.Clone(msg)
	bad[8] = 'x' // the first column's kind
	if _, _, err := parseInsert(bad, cols); err == nil {
		t.Error("a column of unknown kind was read")
	}
}

// BenchmarkDecodeRow is the stream's reading of one inserted outbox row,
// from the insert message to the row.
func BenchmarkDecodeRow(b *testing.B) {
	cols := goodColumns()
	cols["headers"], cols["version"] = "{}", "0" // as BenchmarkRelayRabbit's rows
	rel, msg := insertMessage(cols, "sent_at")
	var tup []tupleCol
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if _, tup, err = parseInsert(msg, tup); err != nil {
			b.Fatal(err)
		}
		if _, _, err := decodeRow(rel, tup); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRowPglogrepl is BenchmarkDecodeRow with the message read
// by pglogrepl.Parse, as the stream did before parseInsert.
func BenchmarkDecodeRowPglogrepl(b *testing.B) {
	cols := goodColumns()
	cols["headers"], cols["version"] = "{}", "0"
	rel, msg := insertMessage(cols, "sent_at")
	b.ReportAllocs()
	for b.Loop() {
		m, err := pglogrepl.Parse(msg)
		if err != nil {
			b.Fatal(err)
		}
		tup := m.(*pglogrepl.InsertMessage).Tuple
		own := make([]tupleCol, len(tup.Columns))
		for i, c := range tup.Columns {
			own[i] = tupleCol{kind: c.DataType, data: c.Data}
		}
		if _, _, err := decodeRow(rel, own); err != nil {
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

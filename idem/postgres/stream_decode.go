package postgres

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// The replication connection's settings that fix pgoutput's text format
// for the columns decodeRow parses.
var streamParams = map[string]string{"DateStyle": "ISO", "TimeZone": "UTC", "bytea_output": "hex", "extra_float_digits": "3"}

// parseInt parses an integer column; the conversion does not allocate
// (strconv keeps no reference to its argument).
func parseInt(v []byte) (int64, error) { return strconv.ParseInt(string(v), 10, 64) }

// parseBytea decodes a bytea in hex format (\x...) straight from the
// column's bytes.
func parseBytea(v []byte) ([]byte, error) {
	if len(v) < 2 || v[0] != '\\' || v[1] != 'x' {
		return nil, errors.New("bytea not in hex format")
	}
	b := make([]byte, hex.DecodedLen(len(v)-2))
	n, err := hex.Decode(b, v[2:])
	return b[:n], err
}

// parseTime parses a timestamptz in the ISO DateStyle with TimeZone UTC
// (streamParams): YYYY-MM-DD HH:MM:SS[.ffffff]+00 is read by hand, into
// the same time.Time time.Parse returns for it; anything else (another
// offset, a year past 9999, infinity) goes to time.Parse.
func parseTime(v []byte) (time.Time, error) {
	if t, ok := parseISOUTC(v); ok {
		return t, nil
	}
	return time.Parse("2006-01-02 15:04:05.999999999-07", string(v))
}

func parseISOUTC(v []byte) (time.Time, bool) {
	n := len(v)
	if n < 22 || v[4] != '-' || v[7] != '-' || v[10] != ' ' || v[13] != ':' || v[16] != ':' || string(v[n-3:]) != "+00" {
		return time.Time{}, false
	}
	digits := func(b []byte) (int, bool) {
		x := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			x = x*10 + int(c-'0')
		}
		return x, true
	}
	year, ok1 := digits(v[0:4])
	month, ok2 := digits(v[5:7])
	day, ok3 := digits(v[8:10])
	hour, ok4 := digits(v[11:13])
	minute, ok5 := digits(v[14:16])
	sec, ok6 := digits(v[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := v[19 : n-3]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		f, ok := digits(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			f *= 10
		}
		nsec = f
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // 31 April: time.Parse refuses it
		return time.Time{}, false
	}
	// time.Parse places a +00 time in the local zone when that zone's
	// offset is 0 then, otherwise in an unnamed fixed zone of offset 0.
	if _, off := t.In(time.Local).Zone(); off == 0 {
		return t.In(time.Local), true
	}
	return t.In(time.FixedZone("", 0)), true
}

// tupleCol is a column of a streamed tuple: its kind ('n' null, 'u'
// unchanged TOAST, 't' text, 'b' binary) and its bytes, which point into
// the message received (valid until the next one is).
type tupleCol struct {
	kind byte
	data []byte
}

// parseInsert reads a pgoutput insert (protocol 1: 'I', the relation's
// ID, 'N', the tuple) into cols (reused, returned), the columns' bytes
// left in src: pglogrepl.Parse allocates the message, the tuple and each
// column, and copies each column's bytes, per row.
func parseInsert(src []byte, cols []tupleCol) (uint32, []tupleCol, error) {
	if len(src) < 8 || src[0] != 'I' || src[5] != 'N' {
		return 0, cols, errors.New("outbox insert: not an insert of a new tuple")
	}
	rel := binary.BigEndian.Uint32(src[1:5])
	n := int(binary.BigEndian.Uint16(src[6:8]))
	p := src[8:]
	cols = cols[:0]
	for i := range n {
		if len(p) == 0 {
			return 0, cols, fmt.Errorf("outbox insert: column %d of %d: the message ends", i+1, n)
		}
		c := tupleCol{kind: p[0]}
		p = p[1:]
		switch c.kind {
		case 't', 'b':
			if len(p) < 4 {
				return 0, cols, fmt.Errorf("outbox insert: column %d of %d: the message ends", i+1, n)
			}
			l := binary.BigEndian.Uint32(p)
			p = p[4:]
			if uint64(l) > uint64(len(p)) {
				return 0, cols, fmt.Errorf("outbox insert: column %d of %d: %d bytes, %d left", i+1, n, l, len(p))
			}
			c.data, p = p[:l:l], p[l:]
		case 'n', 'u':
		default:
			return 0, cols, fmt.Errorf("outbox insert: column %d of %d: kind %q", i+1, n, c.kind)
		}
		cols = append(cols, c)
	}
	return rel, cols, nil
}

// decodeRow decodes an inserted outbox row from pgoutput's text format.
// Only a row whose ID cannot be read fails (the tuple does not match its
// relation: nothing a writer puts in the columns does that); a row whose
// other columns do not decode, or that check.OutboxMessage refuses, is
// returned with Invalid set, to be quarantined. left reports a row
// inserted for the claims only (claims_only: one the purge moved to
// another slice, streamed again): the table holds it back.
func decodeRow(rel *pglogrepl.RelationMessage, cols []tupleCol) (r outbox.Row, left bool, err error) {
	if len(cols) != len(rel.Columns) {
		return r, false, errors.New("outbox insert: the tuple does not match its relation")
	}
	var headers string
	var errs []error
	for i, c := range cols {
		name := rel.Columns[i].Name
		if c.kind == 'n' {
			continue
		}
		if c.kind != 't' {
			errs = append(errs, fmt.Errorf("column %s: data type %q", name, c.kind))
			continue
		}
		v := c.data
		var err error
		switch name {
		case "id":
			r.RowID, err = parseInt(v)
		case "message_id":
			r.ID = string(v)
		case "aggregate_id":
			r.AggregateID = string(v)
		case "version":
			r.Version, err = parseInt(v)
		case "sequence":
			r.Sequence, err = parseInt(v)
		case "type":
			r.Type = string(v)
		case "headers":
			if string(v) != "{}" {
				headers = string(v)
			}
		case "payload":
			r.Payload, err = parseBytea(v)
		case "state", "attempts":
			var n int64
			n, err = parseInt(v)
			if name == "state" {
				r.State = outbox.State(n)
			} else {
				r.Attempts = int(n)
			}
		case "created_at":
			r.CreatedAt, err = parseTime(v)
		case "next_attempt":
			r.NextAttempt, err = parseTime(v)
		case "last_error":
			r.LastError = string(v)
		case "claims_only":
			left = left || string(v) != "f"
		case "sent_at":
			r.SentAt, err = parseTime(v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s: %w", name, err))
		}
	}
	if r.RowID == 0 {
		return r, false, fmt.Errorf("outbox insert: a row without its ID: %w", errors.Join(errs...))
	}
	sqlcore.DecodeRow(&r, headers, errors.Join(errs...))
	return r, left, nil
}

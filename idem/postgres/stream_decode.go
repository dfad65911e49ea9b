package postgres

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// The replication connection's settings that fix pgoutput's text format
// for the columns decodeRow parses.
var streamParams = map[string]string{"DateStyle": "ISO", "TimeZone": "UTC", "bytea_output": "hex", "extra_float_digits": "3"}

func parseInt(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

func parseBytea(v string) ([]byte, error) {
	if !strings.HasPrefix(v, `\x`) {
		return nil, errors.New("bytea not in hex format")
	}
	return hex.DecodeString(v[2:])
}

// parseTime parses a timestamptz in the ISO DateStyle with TimeZone UTC
// (streamParams).
func parseTime(v string) (time.Time, error) {
	return time.Parse("2006-01-02 15:04:05.999999999-07", v)
}

// decodeRow decodes an inserted outbox row from pgoutput's text format.
// Only a row whose ID cannot be read fails (the tuple does not match its
// relation: nothing a writer puts in the columns does that); a row whose
// other columns do not decode, or that check.OutboxMessage refuses, is
// returned with Invalid set, to be quarantined. left reports a row
// inserted for the claims only (claims_only: one the purge moved to
// another slice, streamed again): the table holds it back.
func decodeRow(rel *pglogrepl.RelationMessage, t *pglogrepl.TupleData) (r outbox.Row, left bool, err error) {
	if t == nil || len(t.Columns) != len(rel.Columns) {
		return r, false, errors.New("outbox insert: the tuple does not match its relation")
	}
	var headers string
	var errs []error
	for i, c := range t.Columns {
		name := rel.Columns[i].Name
		if c.DataType == 'n' {
			continue
		}
		if c.DataType != 't' {
			errs = append(errs, fmt.Errorf("column %s: data type %q", name, c.DataType))
			continue
		}
		v := string(c.Data)
		var err error
		switch name {
		case "id":
			r.RowID, err = parseInt(v)
		case "message_id":
			r.ID = v
		case "aggregate_id":
			r.AggregateID = v
		case "version":
			r.Version, err = parseInt(v)
		case "sequence":
			r.Sequence, err = parseInt(v)
		case "type":
			r.Type = v
		case "headers":
			headers = v
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
			r.LastError = v
		case "claims_only":
			left = left || v != "f"
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

package postgres

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The replication connection's settings that fix pgoutput's text format
// for the columns decodeRow parses.
var streamParams = map[string]string{"DateStyle": "ISO", "TimeZone": "UTC", "bytea_output": "hex", "extra_float_digits": "3"}

func parseInt(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

func parseHeaders(v string) (map[string]string, error) {
	if v == "{}" || v == "" {
		return nil, nil
	}
	var h map[string]string
	err := json.Unmarshal([]byte(v), &h)
	return h, err
}

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
